# cli.py - the `pysample` command line: one subcommand per module.
#
# A subcommand is a module with NAME, HELP and DESCRIPTION (USAGE and EPILOG
# if it wants them), add_options(parser), which adds its options (with the
# helpers of options.py), and run(args), which returns the exit status or
# raises ToolError.  Adding one is writing that module and naming it in
# COMMANDS.
#
# SPDX-License-Identifier: MIT

import sys

from . import convert, diff, dump, flamegraph, info, lib, lines, record, serve, start, stop, top
from .common import PROG, VERSION, ToolError
from .options import Parser

# In the order `pysample --help` lists them.
COMMANDS = (record, flamegraph, top, diff, lines, dump, start, stop, serve, convert, info, lib)


def build_parser():
    parser = Parser(
        prog=PROG,
        description="Record Python programs with libpysample and turn the profiles into flame graphs, "
                    "tables, speedscope and pprof files.",
        epilog="Run `%s COMMAND --help` for the options of each command. "
               "Documentation: docs/tools.md, man pysample." % PROG)
    parser.add_argument("--version", action="version", version="%s %s" % (PROG, VERSION))
    parser.add_argument("--print-lib", action=lib.PrintLibAction,
                        help="print the path of libpysample.so and exit (as `%s lib`)" % PROG)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for module in COMMANDS:
        sub = commands.add_parser(module.NAME, help=module.HELP, description=module.DESCRIPTION,
                                  usage=getattr(module, "USAGE", None), epilog=getattr(module, "EPILOG", None))
        module.add_options(sub)
        sub.set_defaults(run=module.run)
    return parser, commands


def _split_command(commands, argv):
    """For a subcommand that runs a program (options.trailing_command),
    everything after the first `--` is that program, never our options."""
    sub = commands.choices.get(argv[0]) if argv else None
    if getattr(sub, "takes_command", False) and "--" in argv:
        split = argv.index("--")
        return argv[:split], argv[split + 1:]
    if getattr(sub, "splits_runs", False) and "--" in argv:
        # diff BASE... -- HEAD... [options]: the profiles after `--` up to
        # the first option are HEAD's; the options are diff's own.
        split = argv.index("--")
        tail = argv[split + 1:]
        n = next((i for i, a in enumerate(tail) if a.startswith("-") and a != "-"), len(tail))
        return argv[:split] + tail[n:], tail[:n]
    return argv, None


def main(argv=None):
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")
        sys.stderr.reconfigure(errors="replace")
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, commands = build_parser()
    if not argv:
        parser.print_help(sys.stderr)
        return 2
    argv, command_argv = _split_command(commands, argv)
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help(sys.stderr)
        return 2
    if getattr(args, "cmd", None) is not None:
        if command_argv is None:
            command_argv = args.cmd
        elif args.cmd:
            parser.error("unexpected arguments before --: %s" % " ".join(args.cmd))
        args.command_argv = command_argv
    elif command_argv is not None:
        # A command without a program to run that splits its arguments at
        # `--` (diff's BASE... -- HEAD...).
        args.command_argv = command_argv
    try:
        return args.run(args)
    except ToolError as e:
        sys.stderr.write("%s: %s\n" % (PROG, e))
        return e.status
    except KeyboardInterrupt:
        sys.stderr.write("%s: interrupted\n" % PROG)
        return 130
