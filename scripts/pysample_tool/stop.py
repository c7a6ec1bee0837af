# stop.py - `pysample stop --pid PID`: ends what `pysample start` began and
# writes the profile, as `pysample record --pid` would.
#
# SPDX-License-Identifier: MIT

from . import options, remote
from .recordpid import save_remote_profile

NAME = "stop"
HELP = "stop sampling a running armed process and write its profile"
DESCRIPTION = ("Stops the sampling that `pysample start --pid PID` began and writes the profile "
               "(default: pysample-<pid>.txt, with its quality figures in pysample-<pid>.txt.quality.json).")


def add_options(parser):
    remote.add_pid_option(parser, required=True)
    options.output(parser, metavar="FILE", help="where to write the profile (%%p: the pid)")
    options.output_format(parser)
    parser.add_argument("-q", "--quiet", action="store_true", help="print no summary")


def run(args):
    args.format = options.choose_format(args.format, args.output)
    reply = remote.request(args.pid, "stop", args.control_dir)
    return 0 if save_remote_profile(args.pid, reply, args.output, args.format, args.quiet,
                                    "process %d since `pysample start`" % args.pid) else 1
