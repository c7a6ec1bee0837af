# start.py - `pysample start --pid PID`: a running, armed process starts
# sampling, until `pysample stop --pid PID` collects the profile.
#
# SPDX-License-Identifier: MIT

import sys

from . import options, remote
from .common import PROG

NAME = "start"
HELP = "start sampling a running armed process"
DESCRIPTION = ("Makes process PID (%s) start sampling itself; `pysample stop --pid PID` collects "
               "the profile and stops. Only one record, top or start runs in a process at a time." % remote.ARMED)


def add_options(parser):
    remote.add_pid_option(parser, required=True)
    options.rate(parser, help="samples per second, 1..100000 (default: the process's PYSAMPLE_RATE or 100)")


def run(args):
    reply = remote.request(args.pid, "start", args.control_dir, rate=args.rate)
    sys.stderr.write("%s: process %d: %s\n" % (PROG, args.pid, reply.text or "sampling"))
    return 0
