# pysample_tool - the Python half of the `pysample` command.
#
# The sh front end (scripts/pysample) finds this package and runs it with the
# user's python3.  It needs nothing but the standard library (Python >= 3.6),
# because it has to work on any machine the profiled program runs on.
#
# Subcommands: record, flamegraph, top, diff, lines, dump, start, stop,
# convert, info (cli.py lists them, one module each).  See docs/tools.md and the pysample(1) man page.  The package
# is also the reference reader of the collapsed format that libpysample writes
# (collapsed.py, docs/format.md) and the reference writer of the speedscope
# and pprof formats (speedscope.py, pprof.py).
#
# SPDX-License-Identifier: MIT

from .collapsed import Frame, Profile, Thread, parse_collapsed  # noqa: F401
from .common import VERSION, ToolError, printable  # noqa: F401
