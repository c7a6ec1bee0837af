# options.py - the command line's building blocks, shared by the commands so
# that an option means the same and reads the same in each of them.
#
# SPDX-License-Identifier: MIT

import argparse
import sys

from .common import PROG


class Parser(argparse.ArgumentParser):
    """argparse, but errors are one `pysample: ...` line and exit status 2."""

    def error(self, message):
        sys.stderr.write("%s: %s (see `%s --help`)\n" % (PROG, message, self.prog))
        sys.exit(2)


def _whole_number(unit, lo, hi):
    """An argparse type: a whole number of unit within lo..hi, said in
    words when it is not."""
    def check(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError("expected a whole number of %s, not %r" % (unit, text))
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError("must be between %d and %d %s, not %d" % (lo, hi, unit, value))
        return value
    return check


_rate = _whole_number("samples per second", 1, 100000)

# A whole number of seconds, 1..86400 (record --duration).
seconds = _whole_number("seconds", 1, 86400)


def profile_file(parser):
    """The collapsed profile a reading command reads: args.file."""
    parser.add_argument("file", metavar="FILE", help="a collapsed profile written by libpysample")


def output(parser, metavar="OUT", help="write here instead of standard output"):
    """-o/--output: args.output, None when not given."""
    parser.add_argument("-o", "--output", metavar=metavar, help=help)


def rate(parser, help):
    """--rate HZ, checked against the library's range: args.rate."""
    parser.add_argument("--rate", type=_rate, metavar="HZ", help=help)


def trailing_command(parser):
    """Lets the command take a program to run after its options (`-- COMMAND
    ARG...` or just `COMMAND ARG...`): cli.main hands it over as
    args.command_argv, everything after `--` untouched."""
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="COMMAND", help=argparse.SUPPRESS)
    parser.set_defaults(command_argv=None)
    parser.takes_command = True
