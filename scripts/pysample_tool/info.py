# info.py - `pysample info`: the version, which build this is (a wheel and
# its tag, or a source tree, build dir or install) and the paths the tool
# uses.
#
# SPDX-License-Identifier: MIT

import os
import sys

from .common import VERSION, write_output
from .library import demo_path, find_library, library_build, package_dir, wheel_install


NAME = "info"
HELP = "show which build this is and where the tool, the demo and the library are"
DESCRIPTION = ("Prints the version, how this copy was installed, the library's own version and build, "
               "and the paths pysample uses; handy when record cannot find the library.")


def add_options(parser):
    pass


def _install_line():
    wheel = wheel_install()
    if wheel is None:
        return "install:     from files (source tree, build dir or meson install)"
    return "install:     wheel %s-%s-%s (%s) in %s" % (
        "libpysample", wheel.version, ".".join(wheel.tags) or "?", wheel.installer or "?", wheel.site)


def _library_lines(library, places):
    if library is None:
        return ["library:     not found (looked in %s)" % ", ".join(places)]
    build = library_build(library)
    if build is None:
        what = "no version inside (older than 0.1.0, or not libpysample)"
    else:
        what = "libpysample %s (%s)%s" % (build[0], build[1],
                                          "" if build[0] == VERSION else ", NOT this tool's version")
    return ["library:     %s" % library, "lib build:   %s" % what]


def run(args):
    library, places = find_library()
    lines = [
        "pysample %s" % VERSION,
        _install_line(),
        "tool module: %s" % package_dir(),
        "demo:        %s%s" % (demo_path(), "" if os.path.isfile(demo_path()) else " (missing)"),
    ] + _library_lines(library, places) + [
        "python:      %s (%s)" % (sys.executable, sys.version.split()[0]),
        "platform:    %s" % sys.platform,
    ]
    write_output(None, ("\n".join(lines) + "\n").encode("utf-8"), binary=False)
    return 0
