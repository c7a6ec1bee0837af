# helpers.py - what the tool tests (test_*.py here, one file per subcommand)
# share: where things are, running the command, a temporary directory per
# test, the library (the build's, or the stand-in), the programs the
# recording tests run, and the tests' own readers of the formats
# (test/helpers/formats.py, shared with the integration tests).
#
# Environment (set by meson.build):
#   PYSAMPLE_TEST_BUILD_ROOT   the build dir
#   PYSAMPLE_TEST_FAKE_LIB     test/tools/fake_libpysample.c built as a module
#   PYSAMPLE_TEST_MESON        the meson program, for the install test
#   PYSAMPLE_TEST_VERSION      meson.project_version()
#   PYSAMPLE_TEST_PREFIX, _BINDIR, _DATADIR, _MANDIR, _LIBDIR  install layout
# Outside meson test, what needs a build dir (the fake library, the
# build-dir script, the install) is skipped unless these point at one.
#
# SPDX-License-Identifier: MIT

import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers"))
from formats import decode_pprof, one, unescape  # noqa: E402,F401

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir))
SCRIPTS = os.path.join(SOURCE_ROOT, "scripts")
FRONT_END = os.path.join(SCRIPTS, "pysample")
FIXTURES = os.path.join(HERE, "fixtures")

CONFIG = dict((k, v) for k, v in os.environ.items() if k.startswith("PYSAMPLE_TEST_"))
BUILD_ROOT = CONFIG.get("PYSAMPLE_TEST_BUILD_ROOT")
PYTHON = sys.executable

sys.path.insert(0, SCRIPTS)
import pysample_tool  # noqa: E402  (the package under test)
import pysample_tool.remote  # noqa: E402
import pysample_tool.top  # noqa: E402

SVG_NS = "{http://www.w3.org/2000/svg}"
FG_NS = "{urn:x-pysample:flamegraph}"


def fixture(name):
    return os.path.join(FIXTURES, name)


def clean_env(**extra):
    """The environment without anything that would change what pysample does."""
    env = dict((k, v) for k, v in os.environ.items()
               if not k.startswith("PYSAMPLE_") and k not in ("LD_PRELOAD", "DYLD_INSERT_LIBRARIES"))
    env.update(extra)
    return env


def run(args, cwd=None, env=None, timeout=120, stdin=subprocess.DEVNULL):
    """Runs a command and returns (returncode, stdout bytes, stderr text)."""
    proc = subprocess.run(args, cwd=cwd, env=env if env is not None else clean_env(),
                          stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace")


def pysample(*args, **kwargs):
    front_end = kwargs.pop("front_end", FRONT_END)
    return run([front_end] + list(args), **kwargs)


def read_stacks(path):
    """The fixture read independently of the tool: {(thread, frames): count}
    with everything still escaped."""
    stacks = collections.Counter()
    with open(path, "rb") as f:
        for line in f.read().decode("utf-8").splitlines():
            if line.strip():
                text, count = line.rsplit(" ", 1)
                parts = text.split(";")
                stacks[(parts[0], tuple(parts[1:]))] += int(count)
    return stacks


def split_frame(frame):
    """(name, file, line) of an escaped frame, unescaped, as the test sees it."""
    if frame.startswith("[") and frame.endswith("]"):
        return (frame, None, None)   # a marker: [pysample: ...], [gc], [lib.so]
    m = re.match(r"^(.+?) \((.*):(\d+)\)$", frame)
    if m:
        return (unescape(m.group(1)), unescape(m.group(2)), int(m.group(3)))
    m = re.match(r"^(.+?) \((.*)\)$", frame)
    if m:
        return (unescape(m.group(1)), unescape(m.group(2)), None)
    raise AssertionError("a frame that is neither a marker nor 'name (file[:line])': %r" % frame)


class TempDirTestCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pysample-test-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def write(self, name, data):
        path = os.path.join(self.tmp, name)
        with open(path, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        return path


# ---------------------------------------------------------------------------
# top's table as the tests read it
# ---------------------------------------------------------------------------

TOP_ROW = re.compile(r"^\s*(\d+)\s+(\d+\.\d)%\s+(\d+)\s+(\d+\.\d)%\s+(.*)$")


def top_rows(text):
    rows = {}
    for line in text.splitlines():
        m = TOP_ROW.match(line)
        if m:
            rows[m.group(5)] = (int(m.group(1)), float(m.group(2)), int(m.group(3)), float(m.group(4)))
    return rows


# ---------------------------------------------------------------------------
# record's summary, and the real library
# ---------------------------------------------------------------------------

def summary_lines(err, pid):
    """record's summary lines for pid: `pid N: ...` or, with the command
    it saw the process run, `pid N (`python3 ...`): ...`."""
    return re.findall(r"^pysample: pid %d(?: \(`([^`\n]*)`\))?: .*$" % pid, err, re.M)


def built_library():
    """The library this build made; unittest.SkipTest outside meson test
    (which both setUp and setUpClass report as a skip)."""
    library = real_library(os.path.join(BUILD_ROOT, "lib")) if BUILD_ROOT else None
    if not library:
        raise unittest.SkipTest("the real library is not built (run through meson test)")
    return library


def real_library(directory):
    for name in ("libpysample.so", "libpysample.dylib"):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return path
    return None


# Programs for the real library: each part runs until the library has taken
# a number of samples of it (pysample_samples() of the preloaded library),
# not for a fixed time, so that a loaded machine delaying the sampler makes
# them slower, never empty.
SPIN_UNTIL_SAMPLED = (
    "import ctypes, os, sys, time\n"
    "_samples = ctypes.CDLL(None).pysample_samples\n"
    "_samples.restype = ctypes.c_uint64\n"
    "def spin_until_sampled(n=10):\n"
    "    start, give_up = _samples(), time.monotonic() + 60\n"
    "    while _samples() - start < n and time.monotonic() < give_up:\n"
    "        pass\n")


# ---------------------------------------------------------------------------
# diff and lines, on real profiles of two versions of one program
# ---------------------------------------------------------------------------

# Version 1 parses and renders for the same number of samples; version 2,
# written over it at the same path (as a CI job checks out the head commit
# where the base was), renders for three times as many, and its lines have
# moved.  Each part runs until the library has sampled it, so the shares
# hold on a loaded machine: parse and render 50/50 before, 25/75 after.
DIFF_BASE = SPIN_UNTIL_SAMPLED + (
    "def parse():\n"
    "    spin_until_sampled(60)\n"
    "def render():\n"
    "    spin_until_sampled(60)\n"
    "def main():\n"
    "    parse()\n"
    "    render()\n"
    "main()\n")

DIFF_HEAD = SPIN_UNTIL_SAMPLED + (
    "def parse():\n"
    "    spin_until_sampled(60)\n"
    "def render():\n"
    "    # now three times slower\n"
    "    spin_until_sampled(180)\n"
    "def main():\n"
    "    parse()\n"
    "    render()\n"
    "main()\n")


def all_function_totals(path):
    """{(name, file): total %} of every function of a profile, counted
    here (markers are their own text, file None)."""
    stacks = read_stacks(path)
    all_samples = sum(stacks.values())
    totals = collections.Counter()
    for (_, frames), n in stacks.items():
        for function in set(split_frame(f)[:2] for f in frames):
            totals[function] += n
    return dict((f, 100.0 * n / all_samples) for f, n in totals.items())


class RecordedPairTestCase(TempDirTestCase):
    """BASE and HEAD recorded once for the class with the real library."""

    @classmethod
    def setUpClass(cls):
        library = built_library()
        cls.dir = tempfile.mkdtemp(prefix="pysample-diff-")
        cls.program = os.path.join(cls.dir, "prog.py")
        for name, source in (("base.txt", DIFF_BASE), ("head.txt", DIFF_HEAD)):
            with open(cls.program, "w") as f:
                f.write(source)
            # -S: no site imports, whose start-up samples would take a
            # share of their own.
            # CPU time: wall-clock samples clump on a loaded machine (GateTests).
            code, out, err = pysample("record", "-q", "--mode", "cpu", "--rate", "250", "-o", name, "--", PYTHON,
                                      "-S", "prog.py",
                                      cwd=cls.dir, env=clean_env(PYSAMPLE_LIB=library))
            if code != 0:
                raise AssertionError("record %s: %s" % (name, err))
        cls.base = os.path.join(cls.dir, "base.txt")
        cls.head = os.path.join(cls.dir, "head.txt")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(getattr(cls, "dir", ""), True)

    def function(self, name):
        """(name, file) of a function of prog.py as its frames name it
        (Python 3.9+ gives __main__ its absolute path)."""
        return (name, self.program)

    def label(self, name):
        return "%s (%s)" % self.function(name)
