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


def _rate(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a whole number of samples per second, not %r" % text)
    if not 1 <= value <= 100000:
        raise argparse.ArgumentTypeError("must be between 1 and 100000 samples per second, not %d" % value)
    return value


def seconds(text):
    """A whole number of seconds, 1..86400."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a whole number of seconds, not %r" % text)
    if not 1 <= value <= 86400:
        raise argparse.ArgumentTypeError("must be between 1 and 86400 seconds, not %d" % value)
    return value


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
