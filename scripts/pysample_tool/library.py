# library.py - where the tool finds libpysample and its demo program, for
# record and info.
#
# Layouts it knows: a source checkout (scripts/ next to build/lib), a build
# dir (<builddir>/scripts next to <builddir>/lib), an install (<prefix>/bin
# next to <prefix>/lib*, the tool in <datadir>/pysample), and a wheel
# installed by pip (the package `pysample` in site-packages, the library
# where the wheel's RECORD says: docs/install.md).  A wheel's tool uses
# its own library only, never one of another install.
#
# SPDX-License-Identifier: MIT

import csv
import glob
import os
import re
import sys

LIB_BASENAMES = ("libpysample.so", "libpysample.dylib")

# Set by the sh front end: the directory the `pysample` script lives in, where
# record starts looking for the library.  record removes it from the
# environment of the profiled command.
SCRIPT_DIR_ENV = "PYSAMPLE_TOOL_SCRIPT_DIR"

# The directory that holds this package and demo.py: scripts/ of a checkout,
# <datadir>/pysample of an install.
TOOL_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def package_dir():
    return os.path.dirname(os.path.abspath(__file__))


def script_dir():
    return os.environ.get(SCRIPT_DIR_ENV) or TOOL_DIR


def library_candidates(here):
    native = "libpysample.dylib" if sys.platform == "darwin" else "libpysample.so"
    names = [native] + [n for n in LIB_BASENAMES if n != native]
    up = os.path.normpath(os.path.join(here, os.pardir))
    places = []
    # A source checkout with the conventional build dir, then the build dir the
    # script was configured into (<builddir>/scripts -> <builddir>/lib), which
    # is also <prefix>/lib of an install.
    for d in (os.path.join(up, "build", "lib"), os.path.join(up, "lib")):
        places.extend(os.path.join(d, n) for n in names)
    # <prefix>/lib64, <prefix>/lib32, <prefix>/lib/x86_64-linux-gnu ...
    try:
        entries = sorted(os.listdir(up))
    except OSError:
        entries = []
    for entry in entries:
        if entry.startswith("lib") and entry != "lib":
            places.extend(os.path.join(up, entry, n) for n in names)
    libdir = os.path.join(up, "lib")
    try:
        subdirs = sorted(os.listdir(libdir))
    except OSError:
        subdirs = []
    for entry in subdirs:
        # (not Meson's private <target>.p directories of a build dir)
        if not entry.endswith(".p") and os.path.isdir(os.path.join(libdir, entry)):
            places.extend(os.path.join(libdir, entry, n) for n in names)
    return places


# The distribution name of the wheel (pyproject.toml).
DIST_NAME = "libpysample"


class WheelInstall(object):
    """This package as pip installed it from a wheel: its .dist-info beside
    it, and what that says (version, tags, where the library is)."""

    def __init__(self, dist_info):
        self.dist_info = dist_info
        self.site = os.path.dirname(dist_info)
        self.version = os.path.basename(dist_info)[len(DIST_NAME) + 1:-len(".dist-info")]
        self.tags = []
        self.installer = None
        self.library = None
        self._read()

    def _read(self):
        for key, value in _key_values(os.path.join(self.dist_info, "WHEEL")):
            if key == "Tag":
                self.tags.append(value)
        for key, value in _key_values(os.path.join(self.dist_info, "INSTALLER"), sep=None):
            self.installer = key
        try:
            with open(os.path.join(self.dist_info, "RECORD")) as f:
                for row in csv.reader(f):
                    if row and os.path.basename(row[0]) in LIB_BASENAMES:
                        self.library = os.path.normpath(os.path.join(self.site, row[0]))
        except (IOError, OSError):
            pass
        if self.library is None:
            # No RECORD (a copied site-packages): where meson-python puts it.
            self.library = os.path.join(self.site, ".%s.mesonpy.libs" % DIST_NAME, LIB_BASENAMES[0])


def _key_values(path, sep=":"):
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except (IOError, OSError):
        return []
    if sep is None:
        return [(line.strip(), "") for line in lines if line.strip()]
    return [tuple(part.strip() for part in line.split(sep, 1)) for line in lines if sep in line]


def wheel_install():
    """The WheelInstall this package belongs to, or None (a source tree, a
    build dir or a `meson install`)."""
    here = package_dir()
    site = os.path.dirname(here)
    if os.path.basename(here) != "pysample":
        return None
    found = sorted(glob.glob(os.path.join(glob.escape(site), DIST_NAME + "-*.dist-info")))
    return WheelInstall(found[-1]) if found else None


_IDENT_RE = re.compile(rb"libpysample-build: ([0-9A-Za-z.+-]+) \(([^)\0]*)\)")


def library_build(path):
    """(version, build) of the library file at path, from the text lib/api.c
    puts in it, read without loading it; None if it has none."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (IOError, OSError):
        return None
    m = _IDENT_RE.search(data)
    return (m.group(1).decode("ascii"), m.group(2).decode("ascii", "replace")) if m else None


def find_library(here=None):
    """Returns (path, places looked at).  path is None when not found."""
    explicit = os.environ.get("PYSAMPLE_LIB")
    if explicit:
        return (explicit if os.path.isfile(explicit) else None), [explicit + " (PYSAMPLE_LIB)"]
    wheel = wheel_install() if here is None else None
    if wheel is not None:
        return (wheel.library if os.path.isfile(wheel.library) else None), [wheel.library]
    places = library_candidates(here or script_dir())
    for place in places:
        if os.path.isfile(place):
            return os.path.abspath(place), places
    return None, places


def demo_path():
    """Beside the package (checkout, build dir, install), or inside it (wheel)."""
    inside = os.path.join(package_dir(), "demo.py")
    return inside if os.path.isfile(inside) else os.path.join(TOOL_DIR, "demo.py")
