# info.py - `pysample info`: the version and the paths the tool uses.
#
# SPDX-License-Identifier: MIT

import os
import sys

from .common import VERSION, write_output
from .library import demo_path, find_library, package_dir


NAME = "info"
HELP = "show where the tool, the demo and the library are"
DESCRIPTION = "Prints the version and the paths pysample uses; handy when record cannot find the library."


def add_options(parser):
    pass


def run(args):
    library, places = find_library()
    lines = [
        "pysample %s" % VERSION,
        "tool module: %s" % package_dir(),
        "demo:        %s%s" % (demo_path(), "" if os.path.isfile(demo_path()) else " (missing)"),
        "library:     %s" % (library or "not found (looked in %s)" % ", ".join(places)),
        "python:      %s (%s)" % (sys.executable, sys.version.split()[0]),
        "platform:    %s" % sys.platform,
    ]
    write_output(None, ("\n".join(lines) + "\n").encode("utf-8"), binary=False)
    return 0
