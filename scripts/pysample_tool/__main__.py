# Runs the pysample command: `python3 <dir>/pysample_tool ARGS` (what the sh
# front end does) or `python3 -m pysample_tool ARGS` with <dir> on the path,
# or `python -m pysample ARGS` after `pip install libpysample`.
#
# SPDX-License-Identifier: MIT

import os
import sys

if sys.version_info < (3, 6):
    sys.stderr.write("pysample: needs Python 3.6 or newer, this is %s\n" % sys.version.split()[0])
    sys.exit(2)

if __package__ in (None, ""):
    # Run as a directory: sys.path[0] is the package itself; its parent
    # holds the package.
    sys.path[0] = os.path.dirname(os.path.abspath(sys.path[0]))
    from pysample_tool.cli import main
else:
    # `python -m pysample_tool`, or `python -m pysample` of a wheel, where
    # the package has that name.
    from .cli import main

sys.exit(main())
