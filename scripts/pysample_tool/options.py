# options.py - the command line's building blocks, shared by the commands so
# that an option means the same and reads the same in each of them.
#
# SPDX-License-Identifier: MIT

import argparse
import os
import sys

from .common import PROG, ToolError


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
    """-r/--rate HZ (py-spy's -r), checked against the library's range: args.rate."""
    parser.add_argument("-r", "--rate", type=_rate, metavar="HZ", help=help)


# The formats a profile is written in, and py-spy's names for two of them
# (`py-spy record -f flamegraph`, `-f raw`), so that its command lines work.
FORMATS = ("collapsed", "svg", "speedscope", "pprof")
FORMAT_ALIASES = {"flamegraph": "svg", "raw": "collapsed"}

# What an output file's extension says it is: `-o profile.svg` is a flame
# graph, as with py-spy.  Other extensions say nothing.
FORMAT_OF_EXTENSION = {".svg": "svg", ".json": "speedscope", ".pb": "pprof", ".pprof": "pprof",
                       ".txt": "collapsed", ".folded": "collapsed", ".collapsed": "collapsed"}


def _format_name(text):
    name = FORMAT_ALIASES.get(text.lower(), text.lower())
    if name not in FORMATS:
        raise argparse.ArgumentTypeError("unknown format %r (choose from %s; py-spy's flamegraph and raw "
                                         "are svg and collapsed)" % (text, ", ".join(FORMATS)))
    return name


def output_format(parser):
    """-f/--format: args.format, None when not given (see choose_format)."""
    parser.add_argument("-f", "--format", type=_format_name, metavar="FORMAT", default=None,
                        help="collapsed (the library's text), svg (flame graph; py-spy's flamegraph), "
                             "speedscope (JSON) or pprof (default: from the extension of -o: .svg, "
                             ".json, .pb or .pprof, .txt or .folded; else collapsed)")


def choose_format(fmt, output):
    """The format to write: --format if given, else what output's extension
    says, else collapsed.  A --format that the extension contradicts
    (`-o prof.json --format svg`) is refused: one of the two is a mistake,
    and either way the file would not be what its name says."""
    ext = os.path.splitext(output or "")[1].lower()
    implied = FORMAT_OF_EXTENSION.get(ext)
    if fmt is not None and implied is not None and fmt != implied:
        raise ToolError("-o %s names a %s file but --format is %s: change one of them"
                        % (output, implied, fmt))
    return fmt or implied or "collapsed"


def mode(parser, help):
    """--mode wall|cpu: args.mode, None when not given (each command says
    what None means: the library's default, the process's PYSAMPLE_MODE,
    the profile's .quality.json)."""
    parser.add_argument("--mode", choices=("wall", "cpu"), default=None, help=help)


def addresses(parser):
    """How the commands that show stacks (all that call grouped) merge
    frames.  --addresses: args.addresses; without it the commands merge
    native frames without a symbol per object
    (collapsed.group_native_addresses).  --task-names: args.task_names,
    which asyncio task names stay in the task markers
    (collapsed.merge_task_names)."""
    parser.add_argument("--addresses", action="store_true",
                        help="keep native frames without a symbol apart by address (lib.so+0x1234) "
                             "instead of one [lib.so] per object")
    parser.add_argument("--task-names", choices=("auto", "all", "none"), default="auto",
                        help="asyncio task markers: auto merges the tasks asyncio named itself "
                             "(Task-135) by coroutine, [task \"handle\"], and keeps the names the "
                             "program gave (default); all keeps every name; none merges every task "
                             "by its coroutine")


def grouped(profile, args, resolve=None):
    """The profile as the commands show it: the samples --thread and
    --active keep (filters.py), asyncio tasks merged as --task-names says,
    then, unless --addresses, a GIL wait's native frames named as one
    (filters.name_gil_waits) and native addresses merged (by symbol with
    resolve, else per object)."""
    from .collapsed import group_native_addresses, merge_task_names
    from .filters import apply, name_gil_waits
    profile = merge_task_names(apply(profile, args), getattr(args, "task_names", "auto"))
    if getattr(args, "addresses", False):
        return profile
    return group_native_addresses(name_gil_waits(profile), resolve)


def trailing_command(parser):
    """Lets the command take a program to run after its options (`-- COMMAND
    ARG...` or just `COMMAND ARG...`): cli.main hands it over as
    args.command_argv, everything after `--` untouched."""
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="COMMAND", help=argparse.SUPPRESS)
    parser.set_defaults(command_argv=None)
    parser.takes_command = True


def pyspy_compat(parser, function=False, capture=False):
    """py-spy's options that need nothing of us, so that its command lines
    work as they are (docs/tools.md#from-py-spy): --full-filenames (paths
    are always whole), --hideprogress (there is no progress bar); with
    capture, --capture (args.capture: the program's output is discarded, as
    py-spy does); with function, -F/--function (args.nolineno: one frame per
    function)."""
    parser.add_argument("--full-filenames", action="store_true",
                        help="accepted for py-spy: file names are always whole paths")
    parser.add_argument("--hideprogress", action="store_true", help=argparse.SUPPRESS)
    if capture:
        parser.add_argument("--capture", action="store_true",
                            help="discard COMMAND's standard output and error, and give it no standard "
                                 "input (py-spy's --capture)")
    if function:
        parser.add_argument("-F", "--function", dest="nolineno", action="store_true",
                            help="aggregate by function (py-spy's -F): as --nolineno, the frames carry "
                                 "no line number")
