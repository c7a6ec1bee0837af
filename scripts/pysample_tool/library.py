# library.py - where the tool finds libpysample and its demo program, for
# record and info.
#
# Layouts it knows: a source checkout (scripts/ next to build/lib), a build
# dir (<builddir>/scripts next to <builddir>/lib), an install (<prefix>/bin
# next to <prefix>/lib*, the tool in <datadir>/pysample).
#
# SPDX-License-Identifier: MIT

import os
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


def find_library(here=None):
    """Returns (path, places looked at).  path is None when not found."""
    explicit = os.environ.get("PYSAMPLE_LIB")
    if explicit:
        return (explicit if os.path.isfile(explicit) else None), [explicit + " (PYSAMPLE_LIB)"]
    places = library_candidates(here or script_dir())
    for place in places:
        if os.path.isfile(place):
            return os.path.abspath(place), places
    return None, places


def demo_path():
    return os.path.join(TOOL_DIR, "demo.py")
