# lib.py - `pysample lib` (also `pysample --print-lib`): the path of the
# library this tool preloads, for LD_PRELOAD=$(pysample lib) in Dockerfiles,
# pod specs and shell scripts (docs/install.md).
#
# SPDX-License-Identifier: MIT

import argparse
import sys

from .common import PROG, VERSION, ToolError
from .library import find_library, library_build, wheel_install

NAME = "lib"
HELP = "print the path of libpysample.so, for LD_PRELOAD=$(pysample lib)"
DESCRIPTION = ("Prints the absolute path of the library `pysample record` preloads: the one installed "
               "with this tool (a pip install's own, never another environment's), or PYSAMPLE_LIB. "
               "Exit status 2, and nothing on standard output, when it is missing.")


def add_options(parser):
    pass


def require_library():
    """The library's path, or a ToolError that says what is missing."""
    library, places = find_library()
    if library is not None:
        return library
    wheel = wheel_install()
    if wheel is not None and places == [wheel.library]:
        raise ToolError("this install of libpysample %s (%s) has lost its library: %s is missing; "
                        "reinstall it: pip install --force-reinstall libpysample==%s"
                        % (wheel.version, wheel.site, wheel.library, wheel.version))
    raise ToolError("cannot find libpysample (looked for %s); build it with `meson setup build && "
                    "meson compile -C build`, install it with pip, or point PYSAMPLE_LIB at it"
                    % ", ".join(places[:4] + (["..."] if len(places) > 4 else [])))


def run(args):
    library = require_library()
    build = library_build(library)
    if build is not None and build[0] != VERSION:
        sys.stderr.write("%s: %s is libpysample %s, this tool is %s\n" % (PROG, library, build[0], VERSION))
    sys.stdout.write(library + "\n")
    return 0


class PrintLibAction(argparse.Action):
    """`pysample --print-lib`: `pysample lib`, as an option like --version."""

    def __init__(self, option_strings, dest, **kwargs):
        kwargs.update(nargs=0, default=argparse.SUPPRESS)
        argparse.Action.__init__(self, option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            status = run(namespace)
        except ToolError as e:
            sys.stderr.write("%s: %s\n" % (PROG, e))
            status = e.status
        parser.exit(status)
