#!/usr/bin/env python3
"""Tests of the pysample command (scripts/pysample, the package scripts/pysample_tool).

Run by Meson (test/tools/meson.build, suite 'tools'), one test case class per
Meson test, e.g.  python3 test_pysample.py FlamegraphTests -v
They can also run by hand from a source checkout; what needs a build dir
(the fake library, the build-dir script, the install) is then skipped unless
the PYSAMPLE_TEST_* variables below point at one.

Environment (set by meson.build):
  PYSAMPLE_TEST_BUILD_ROOT   the build dir
  PYSAMPLE_TEST_FAKE_LIB     test/tools/fake_libpysample.c built as a module
  PYSAMPLE_TEST_MESON        the meson program, for the install test
  PYSAMPLE_TEST_VERSION      meson.project_version()
  PYSAMPLE_TEST_PREFIX, _BINDIR, _DATADIR, _MANDIR, _LIBDIR  install layout
"""

import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET

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
USABLE_WIDTH = 1180.0     # 1200 px image, 10 px on each side
CHAR_WIDTH = 12 * 0.59


def fixture(name):
    return os.path.join(FIXTURES, name)


def clean_env(**extra):
    """The environment without anything that would change what pysample does."""
    env = dict((k, v) for k, v in os.environ.items()
               if not k.startswith("PYSAMPLE_") and k not in ("LD_PRELOAD", "DYLD_INSERT_LIBRARIES"))
    env.update(extra)
    return env


# `go tool pprof` is compiled into the Go build cache on its first use (41 s
# of CPU with Go 1.26): one cache for every run, kept outside the repository
# (.ci/run fills it in the background), not a new one per test's HOME.
GOCACHE = os.environ.get("PYSAMPLE_GOCACHE") or os.path.join(
    os.path.expanduser("~"), ".cache", "pysample", "go-build")


def go_env(home):
    """The environment of a `go tool pprof` run with HOME at home."""
    return clean_env(HOME=home, GOCACHE=GOCACHE)


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


def unescape(text):
    return re.sub(r"%([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), text)


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
# The collapsed-format reader
# ---------------------------------------------------------------------------

class ParseTests(TempDirTestCase):
    def test_basic_fixture_counts_threads_and_totals(self):
        profile = pysample_tool.parse_collapsed(fixture("basic.txt"))
        self.assertEqual(profile.total, 100)
        self.assertTrue(profile.has_lines)
        threads = dict((t.tid, (t.name, n)) for t, n in profile.threads())
        self.assertEqual(threads, {100: ("MainThread", 78), 101: ("worker;pool-1", 16), 102: (None, 6)})

    def test_python_frames_have_name_file_and_line(self):
        profile = pysample_tool.parse_collapsed(fixture("basic.txt"))
        frames = set(f for _, stack, _ in profile.stacks for f in stack)
        self.assertIn(pysample_tool.Frame("py", "compute", "/srv/app/work.py", 5), frames)
        self.assertIn(pysample_tool.Frame("py", "<lambda>", "<frozen importlib._bootstrap>", 241), frames)

    def test_escapes_are_undone_in_names_paths_and_thread_names(self):
        profile = pysample_tool.parse_collapsed(fixture("basic.txt"))
        frames = set(f for _, stack, _ in profile.stacks for f in stack)
        self.assertIn(pysample_tool.Frame("py", "weird%name;x", "/tmp/dir with space/odd\nfile (1).py", 7),
                      frames)
        profile = pysample_tool.parse_collapsed(fixture("escapes.txt"))
        frames = set(f for _, stack, _ in profile.stacks for f in stack)
        names = dict((f.name, f) for f in frames)
        self.assertEqual(names["ctl\x01\x7fx\r"].file, "/srv/%app/c;d.py")
        self.assertEqual(names["lt<&>\"'"].file, "'quoted' <dir>/a&b.py")
        self.assertEqual(names["ünïcødé.函数"].file, "/srv/ñ/файл.py")
        self.assertEqual([t.name for t, _ in profile.threads()], ["Main\nThread"])

    def test_markers_are_their_own_kind(self):
        profile = pysample_tool.parse_collapsed(fixture("basic.txt"))
        markers = set(f.name for _, stack, _ in profile.stacks for f in stack if f.kind == "marker")
        self.assertEqual(markers, {"[pysample: truncated]", "[pysample: stack table full]"})

    def test_native_task_and_interpreter_frames(self):
        # What PYSAMPLE_NATIVE, PYSAMPLE_ASYNC and sub-interpreters write
        # (docs/format.md): every reader must take it, not only the library.
        profile = pysample_tool.parse_collapsed(fixture("mixed.txt"))
        self.assertEqual(profile.total, 35)
        frames = set(f for _, stack, _ in profile.stacks for f in stack)
        self.assertIn(pysample_tool.Frame("py", "deflate", "libz.so.1", None), frames)
        self.assertIn(pysample_tool.Frame("native", "libz.so.1+0x5e03", "libz.so.1", None), frames)
        self.assertIn(pysample_tool.Frame("native", "[unknown]+0x7f0012345678", "[unknown]", None), frames)
        markers = set(f.name for f in frames if f.kind == "marker")
        self.assertEqual(markers, {"[native: truncated]", '[task Task-1 "main"]', '[task w1 "work"]',
                                   "interp 2"})
        for command in (["top"], ["flamegraph"], ["convert", "--to", "speedscope"],
                        ["convert", "--to", "pprof", "-o", os.path.join(self.tmp, "p.pb.gz")]):
            with self.subTest(command=command[0]):
                code, out, err = pysample(command[0], fixture("mixed.txt"), *command[1:], cwd=self.tmp)
                self.assertEqual(code, 0, err)

    def test_lines_off_profile_has_no_line_numbers(self):
        profile = pysample_tool.parse_collapsed(fixture("nolines.txt"))
        self.assertFalse(profile.has_lines)
        frames = set(f for _, stack, _ in profile.stacks for f in stack)
        self.assertIn(pysample_tool.Frame("py", "compute", "/srv/app/work.py", None), frames)
        self.assertIn(pysample_tool.Frame("py", "Thread._bootstrap", "<frozen threading>", None), frames)

    def test_crlf_line_ends_and_blank_lines_are_tolerated(self):
        self.assertEqual(pysample_tool.parse_collapsed(fixture("crlf.txt")).total, 5)
        path = self.write("gaps.txt", "\nthread 1;f (/a.py:1) 2\n\n\nthread 1;f (/a.py:1) 3\n")
        profile = pysample_tool.parse_collapsed(path)
        self.assertEqual(profile.total, 5)
        self.assertEqual(len(profile.stacks), 1, "identical stacks are merged")

    def test_file_with_colon_and_parentheses_in_its_name(self):
        path = self.write("p.txt", "thread 1;C.m (/odd (x):y/z.py:12) 1\n")
        (_, (frame,), _), = pysample_tool.parse_collapsed(path).stacks
        self.assertEqual(frame, pysample_tool.Frame("py", "C.m", "/odd (x):y/z.py", 12))

    def test_thread_with_unknown_id(self):
        path = self.write("q.txt", "thread ?;f (/a.py:1) 2\nthread ? (Pool);f (/a.py:1) 1\nthread 5;f (/a.py:1) 1\n")
        profile = pysample_tool.parse_collapsed(path)
        self.assertEqual([(t.label, n) for t, n in profile.threads()],
                         [("thread 5", 1), ("thread ?", 2), ("thread ? (Pool)", 1)])
        for command in (["top"], ["flamegraph"], ["convert", "--to", "speedscope"]):
            code, out, err = pysample(command[0], path, *command[1:])
            self.assertEqual(code, 0, err)
        code, out, err = pysample("convert", path, "--to", "speedscope")
        self.assertIn("thread ? (Pool)", [p["name"] for p in json.loads(out.decode())["profiles"]])

    def test_thread_without_python_frames(self):
        path = self.write("t.txt", "thread 9 (Idle) 4\n")
        profile = pysample_tool.parse_collapsed(path)
        self.assertEqual(profile.stacks[0][1], ())
        self.assertEqual(profile.total, 4)


# ---------------------------------------------------------------------------
# Errors and help
# ---------------------------------------------------------------------------

class ErrorTests(TempDirTestCase):
    READERS = (["top"], ["flamegraph"], ["convert", "--to", "speedscope"], ["convert", "--to", "pprof"])

    def assertOneLineError(self, result, *fragments):
        code, out, err = result
        self.assertEqual(code, 2, "exit status 2 expected; stderr: %r" % err)
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, "one line expected on stderr, got %r" % err)
        self.assertTrue(lines[0].startswith("pysample: "), lines[0])
        for fragment in fragments:
            self.assertIn(fragment, lines[0])
        self.assertEqual(out, b"", "nothing on stdout after an error")

    def run_reader(self, command, path):
        args = list(command)
        args.insert(1, path)
        return pysample(*args, cwd=self.tmp)

    def test_missing_file(self):
        for command in self.READERS:
            with self.subTest(command=command[0]):
                self.assertOneLineError(self.run_reader(command, "no-such-profile.txt"),
                                        "no-such-profile.txt", "No such file")

    def test_empty_file(self):
        for name in ("empty.txt", "blank.txt"):
            for command in self.READERS:
                with self.subTest(fixture=name, command=command[0]):
                    self.assertOneLineError(self.run_reader(command, fixture(name)), name, "empty profile")

    MALFORMED = [
        # (content, line number, words the message must contain)
        ("thread 1;f (/a.py:1) 3\nthread 1;f (/a.py:1)\n", 2, "sample count"),
        ("thread 1;f (/a.py:1) 0\n", 1, "positive"),
        ("thread 1;f (/a.py:1) 3x\n", 1, "sample count"),
        ("thread 1;f (/a.py:1) -3\n", 1, "sample count"),
        ("thread 1;f (/a.py:1) 3\n\nf (/a.py:1);g (/a.py:2) 5\n", 3, "first frame"),
        ("thread one;f (/a.py:1) 3\n", 1, "first frame"),
        ("thread 1;f (/a.py:1);garbage 3\n", 1, "frame 3"),
        ("thread 1;f (/a.py:1);;g (/a.py:2) 3\n", 1, "frame 3"),
        ("<?xml version=\"1.0\"?>\n<svg>x 1</svg>\n", 1, "SVG"),
        ("hello world\n", 1, "sample count"),
    ]

    def test_malformed_lines_are_reported_with_their_line_number(self):
        for number, (content, lineno, words) in enumerate(self.MALFORMED):
            path = self.write("bad.txt", content)
            # All commands share the reader: every command for the first case,
            # then top only, to keep the number of processes down.
            for command in self.READERS if number == 0 else self.READERS[:1]:
                with self.subTest(content=content, command=command[0]):
                    self.assertOneLineError(self.run_reader(command, path),
                                            "bad.txt:%d: malformed line" % lineno, words)

    def test_every_command_has_help(self):
        for command in ("record", "flamegraph", "top", "diff", "lines", "convert", "info"):
            with self.subTest(command=command):
                code, out, err = pysample(command, "--help")
                self.assertEqual(code, 0, err)
                self.assertIn("usage: pysample %s" % command, out.decode())
        code, out, _ = pysample("--help")
        self.assertEqual(code, 0)
        for command in ("record", "flamegraph", "top", "diff", "lines", "convert"):
            self.assertIn(command, out.decode())

    def test_usage_errors_are_one_line(self):
        self.assertOneLineError(pysample("top"), "FILE")
        self.assertOneLineError(pysample("convert", fixture("basic.txt")), "--to")
        self.assertOneLineError(pysample("convert", fixture("basic.txt"), "--to", "perf"), "invalid choice")
        self.assertOneLineError(pysample("frobnicate"), "invalid choice")
        self.assertOneLineError(pysample("top", fixture("basic.txt"), "-n", "many"), "-n")
        self.assertOneLineError(pysample("record", "--rate", "0", "--", PYTHON, "-c", "pass"), "--rate")
        self.assertOneLineError(pysample("convert", fixture("basic.txt"), "--to", "pprof", "--rate", "0"),
                                "between 1 and 100000")
        self.assertOneLineError(pysample("record", "--mode", "idle"), "--mode")

    def test_no_arguments_prints_usage_and_fails(self):
        code, out, err = pysample()
        self.assertEqual(code, 2)
        self.assertIn("usage: pysample", err)

    def test_version_matches_the_project(self):
        code, out, _ = pysample("--version")
        self.assertEqual(code, 0)
        version = CONFIG.get("PYSAMPLE_TEST_VERSION", pysample_tool.VERSION)
        self.assertEqual(out.decode().strip(), "pysample %s" % version)

    def test_record_without_library_says_where_it_looked(self):
        env = clean_env(PYSAMPLE_LIB=os.path.join(self.tmp, "missing", "libpysample.so"))
        self.assertOneLineError(pysample("record", "--", PYTHON, "-c", "pass", env=env, cwd=self.tmp),
                                "cannot find libpysample", "PYSAMPLE_LIB")

    def test_refuses_binary_pprof_on_a_terminal(self):
        try:
            import pty
        except ImportError:
            self.skipTest("no pty module")
        master, slave = pty.openpty()
        try:
            proc = subprocess.run([FRONT_END, "convert", fixture("basic.txt"), "--to", "pprof"],
                                  stdout=slave, stderr=subprocess.PIPE, env=clean_env(), timeout=60)
        finally:
            os.close(slave)
            os.close(master)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("use -o FILE", proc.stderr.decode())


# ---------------------------------------------------------------------------
# top
# ---------------------------------------------------------------------------

TOP_ROW = re.compile(r"^\s*(\d+)\s+(\d+\.\d)%\s+(\d+)\s+(\d+\.\d)%\s+(.*)$")


def top_rows(text):
    rows = {}
    for line in text.splitlines():
        m = TOP_ROW.match(line)
        if m:
            rows[m.group(5)] = (int(m.group(1)), float(m.group(2)), int(m.group(3)), float(m.group(4)))
    return rows


class NativeGroupingTests(TempDirTestCase):
    """Native frames that no symbol covers: one per object, not per address."""

    def test_native_addresses_are_one_row_per_object(self):
        """`lib.so+0x...` frames (no symbol covers them) are one row per
        object, `[lib.so]`, unless --addresses."""
        path = os.path.join(self.tmp, "stripped.txt")
        with open(path, "w") as f:
            for i, off in enumerate((0x2e2cb0, 0x2e2cc6, 0x2e2d01, 0x1000)):
                f.write("thread 1 (MainThread);f (a.py:1);PyCFunction_Call (python3);"
                        "_umath.so+0x%x;_umath.so+0x%x %d\n" % (off, off + 0x40, i + 1))
            f.write("thread 1 (MainThread);f (a.py:1);[unknown]+0x7f0012345678 5\n")
        code, out, err = pysample("top", path, "-n", "0")
        self.assertEqual(code, 0, err)
        rows = self.table(out)
        self.assertEqual(rows["[_umath.so]"], (10, 10), "a run of one object's addresses is one frame")
        self.assertEqual(rows["[unknown]"], (5, 5))
        self.assertFalse([name for name in rows if "+0x" in name], rows)
        code, out, err = pysample("top", path, "-n", "0", "--addresses")
        rows = self.table(out)
        self.assertEqual(rows["_umath.so+0x2e2cf0"], (1, 1))
        self.assertEqual(len([name for name in rows if "_umath.so+0x" in name]), 8)
        code, out, err = pysample("flamegraph", path)
        self.assertEqual(code, 0, err)
        self.assertIn(b">[_umath.so]<", out)
        self.assertNotIn(b"0x2e2cb0", out)

    STRIPPED_C = """
static double hidden_spin(long n);
double exported_entry(long n) { return hidden_spin(n) + 1.0; }
/* static, and stripped of .symtab: no symbol covers it */
static __attribute__((noinline)) double hidden_spin(long n)
{
    volatile double x = 0;
    for (long i = 0; i < n; i++)
        x += (double)i * 0.5;
    return x;
}
"""
    STRIPPED_PY = """
import ctypes, sys
sys.path.insert(0, sys.argv[2])
import sampled
lib = ctypes.CDLL(sys.argv[1])
lib.exported_entry.restype = ctypes.c_double
until = sampled.Until(seconds=0.2, ticks=30)
while until.more():
    lib.exported_entry(200000)
"""

    def tools(self, *names):
        import platform
        library = real_library(os.path.join(BUILD_ROOT, "lib")) if BUILD_ROOT else None
        found = [shutil.which(n) for n in names]
        if not library or not all(found):
            self.skipTest("needs the real library and %s" % ", ".join(names))
        if not sys.platform.startswith("linux") or platform.machine() != "x86_64":
            self.skipTest("native stacks are x86-64 Linux only")
        return [library] + found

    def build(self, cc, source_text, name, *flags):
        source, so = os.path.join(self.tmp, name + ".c"), os.path.join(self.tmp, name)
        with open(source, "w") as f:
            f.write(source_text)
        code, out, err = run([cc, "-O1", "-shared", "-fPIC"] + list(flags) + ["-o", so, source])
        self.assertEqual(code, 0, err)
        return so

    def record_native(self, library, so):
        program = os.path.join(self.tmp, "stripped.py")
        with open(program, "w") as f:
            f.write(self.STRIPPED_PY)
        code, out, err = pysample("record", "-o", "prof.txt", "--native", "--", PYTHON, program, so,
                                  os.path.join(SOURCE_ROOT, "test", "integration", "programs"),
                                  cwd=self.tmp, env=clean_env(PYSAMPLE_LIB=library))
        self.assertEqual(code, 0, err)
        return err

    def test_record_native_groups_a_stripped_library(self):
        """record --native of a stripped object's static function: its
        addresses are one row, [libstripped.so], in record's summary and
        in top; the collapsed file keeps them."""
        library, cc, strip = self.tools("gcc", "strip")
        so = self.build(cc, self.STRIPPED_C, "libstripped.so")
        code, out, err = run([strip, "--strip-all", so])
        self.assertEqual(code, 0, err)
        err = self.record_native(library, so)
        self.assertNotIn("libstripped.so+0x", err, "record's summary groups them")
        summary = self.table(err.split("top functions by self samples:\n")[1].encode())
        code, out, err = pysample("top", os.path.join(self.tmp, "prof.txt"), "-n", "0")
        grouped = self.table(out)
        code, out, err = pysample("top", os.path.join(self.tmp, "prof.txt"), "-n", "0", "--addresses")
        apart = self.table(out)
        addresses = [row for name, row in apart.items() if name.startswith("libstripped.so+0x")]
        self.assertTrue(addresses, "the file keeps the addresses: %r" % apart)
        self.assertEqual(grouped["[libstripped.so]"][0], sum(s for s, _ in addresses))
        self.assertEqual(summary["[libstripped.so]"], grouped["[libstripped.so]"])
        self.assertFalse([name for name in grouped if "+0x" in name], grouped)

    # hidden_spin after an exported function (-fno-toplevel-reorder keeps
    # the source's order).
    PRECEDED_C = """
double first_exported(long n) { return (double)n; }
static __attribute__((noinline)) double hidden_spin(long n)
{
    volatile double x = 0;
    for (long i = 0; i < n; i++)
        x += (double)i * 0.5;
    return x;
}
double exported_entry(long n) { return hidden_spin(n) + 1.0; }
"""

    def test_record_names_them_by_the_preceding_symbol_or_minidebuginfo(self):
        """Where record can read the object while the program runs: with
        MiniDebugInfo (.gnu_debugdata, xz-compressed symbols of the static
        functions), the static function's own name; with a .symtab that
        lacks it, `first_exported+... (lib)`; with .dynsym alone, whose
        preceding symbol would name the wrong function, [lib]."""
        import lzma
        library, cc, strip, objcopy = self.tools("gcc", "strip", "objcopy")
        full = self.build(cc, self.PRECEDED_C, "libfull.so", "-fno-toplevel-reorder")
        preceded = os.path.join(self.tmp, "libpreceded.so")
        dynsym_only = os.path.join(self.tmp, "libdynsym.so")
        mini = os.path.join(self.tmp, "mini.debug")
        for command in ([strip, "--strip-symbol=hidden_spin", "-o", preceded, full],
                        [strip, "--strip-all", "-o", dynsym_only, full],
                        [objcopy, "--strip-all", "--keep-symbol=hidden_spin", full, mini]):
            code, out, err = run(command)
            self.assertEqual(code, 0, err)
        with open(mini, "rb") as f, open(mini + ".xz", "wb") as xz:
            xz.write(lzma.compress(f.read(), format=lzma.FORMAT_XZ))
        with_mdi = os.path.join(self.tmp, "libmdi.so")
        code, out, err = run([objcopy, "--add-section", ".gnu_debugdata=%s.xz" % mini, dynsym_only, with_mdi])
        self.assertEqual(code, 0, err)
        for so, want in ((preceded, "first_exported+... (libpreceded.so)"), (with_mdi, "hidden_spin (libmdi.so)"),
                         (dynsym_only, "[libdynsym.so]")):
            with self.subTest(object=os.path.basename(so)):
                err = self.record_native(library, so)
                summary = self.table(err.split("top functions by self samples:\n")[1].encode())
                self.assertIn(want, summary)
                # (exported_entry, hidden_spin's caller, the library names itself)
                self.assertEqual([name for name in summary if ("libdynsym.so" in name or "libmdi.so" in name
                                                               or "libpreceded.so" in name)
                                  and not name.startswith("exported_entry (")], [want], summary)
                with open(os.path.join(self.tmp, "prof.txt")) as f:
                    self.assertIn(os.path.basename(so) + "+0x", f.read(), "the file keeps the addresses")

    @staticmethod
    def table(out):
        """{function: (self, total)} of a top table."""
        rows = {}
        for line in out.decode().splitlines():
            m = re.match(r"^\s*(\d+)\s+\S+%\s+(\d+)\s+\S+%\s+(.*)$", line)
            if m:
                rows[m.group(3)] = (int(m.group(1)), int(m.group(2)))
        return rows


class TopTests(unittest.TestCase):
    def top(self, *args):
        code, out, err = pysample("top", *args)
        self.assertEqual(code, 0, err)
        return out.decode("utf-8")

    def test_self_and_total_of_each_function(self):
        rows = top_rows(self.top(fixture("basic.txt"), "-n", "0"))
        self.assertEqual(rows["compute (/srv/app/work.py)"], (50, 50.0, 50, 50.0),
                         "the lines of a function are added up")
        self.assertEqual(rows["JSONEncoder.encode (/usr/lib/python3.11/json/encoder.py)"], (15, 15.0, 15, 15.0))
        self.assertEqual(rows["fib (/srv/app/work.py)"], (10, 10.0, 10, 10.0),
                         "recursion counts once in the total")
        self.assertEqual(rows["main (/srv/app/main.py)"], (0, 0.0, 75, 75.0))
        self.assertEqual(rows["[pysample: stack table full]"], (4, 4.0, 4, 4.0))
        self.assertEqual(rows["[pysample: truncated]"], (0, 0.0, 3, 3.0))
        self.assertEqual(rows["weird%name;x (/tmp/dir with space/odd\\nfile (1).py)"], (5, 5.0, 5, 5.0),
                         "names are unescaped, control characters shown as \\n")
        self.assertEqual(sum(r[0] for r in rows.values()), 100, "self samples add up to the total")

    def test_sorted_by_self_samples(self):
        rows = [TOP_ROW.match(line) for line in self.top(fixture("basic.txt"), "-n", "0").splitlines()]
        selfs = [int(m.group(1)) for m in rows if m]
        self.assertEqual(selfs, sorted(selfs, reverse=True))
        self.assertGreater(len(selfs), 10)

    def test_header_and_limit(self):
        text = self.top(fixture("basic.txt"), "-n", "3")
        self.assertIn("100 samples in 3 threads", text.splitlines()[0])
        self.assertEqual(len(top_rows(text)), 3)
        self.assertRegex(text, r"\.\.\. \d+ more functions")

    def test_lines_off_profile(self):
        text = self.top(fixture("nolines.txt"))
        self.assertIn("line numbers off", text)
        rows = top_rows(text)
        self.assertEqual(rows["compute (/srv/app/work.py)"], (30, 50.0, 30, 50.0))
        self.assertEqual(rows["Thread._bootstrap (<frozen threading>)"], (0, 0.0, 20, 33.3))

    def test_output_into_a_closed_pipe_is_not_an_error(self):
        proc = subprocess.Popen([FRONT_END, "top", fixture("basic.txt"), "-n", "0"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=clean_env())
        proc.stdout.close()
        err = proc.stderr.read().decode()
        self.assertEqual(proc.wait(timeout=60), 0)
        self.assertNotIn("Traceback", err)


# ---------------------------------------------------------------------------
# flamegraph
# ---------------------------------------------------------------------------

def expected_nodes(stacks):
    """{(depth, label): [counts]} of the flame graph of a fixture: one node for
    the root, one per thread, one per distinct frame per call path."""
    nodes = collections.Counter()
    total = 0
    for (thread, frames), count in stacks.items():
        total += count
        nodes[("thread", thread)] += count
        for i in range(1, len(frames) + 1):
            nodes[(thread,) + frames[:i]] += count
    result = collections.defaultdict(list)
    result[(0, "all")].append(total)
    for key, count in nodes.items():
        if key[0] == "thread":
            result[(1, unescape(key[1]))].append(count)
        else:
            name, filename, line = split_frame(key[-1])
            label = name if filename is None else "%s (%s:%d)" % (name, filename, line)
            result[(len(key), pysample_tool.printable(label))].append(count)
    for counts in result.values():
        counts.sort()
    return dict(result), total


class FlamegraphTests(TempDirTestCase):
    def render(self, path, *args):
        code, out, err = pysample("flamegraph", path, *args)
        self.assertEqual(code, 0, err)
        return out, ET.fromstring(out)

    def frames(self, root):
        group = root.find(SVG_NS + "g[@id='frames']")
        self.assertIsNotNone(group, "a <g id='frames'> holds the boxes")
        return group.findall(SVG_NS + "g")

    def test_valid_xml_with_one_group_per_frame(self):
        out, root = self.render(fixture("basic.txt"))
        self.assertEqual(root.tag, SVG_NS + "svg")
        self.assertTrue(out.startswith(b"<?xml"))
        expected, total = expected_nodes(read_stacks(fixture("basic.txt")))
        boxes = self.frames(root)
        self.assertEqual(len(boxes), sum(len(c) for c in expected.values()))
        for g in boxes:
            self.assertEqual(g.get("class"), "f")
            self.assertEqual(len(g.findall(SVG_NS + "rect")), 1)
            self.assertEqual(len(g.findall(SVG_NS + "title")), 1)
            self.assertEqual(len(g.findall(SVG_NS + "text")), 1)

    def boxes(self, root, total):
        """[(depth, label, samples, percent, x, y, width, fill, text, g)]"""
        result = []
        heights = sorted(set(float(g.find(SVG_NS + "rect").get("y")) for g in self.frames(root)), reverse=True)
        for g in self.frames(root):
            rect = g.find(SVG_NS + "rect")
            title = g.find(SVG_NS + "title").text
            label, stats = title.split("\n")[:2]
            m = re.match(r"^([\d,]+) samples? \((\d+\.\d\d)%\)", stats)
            self.assertIsNotNone(m, "title %r shows samples and a percentage" % title)
            y = float(rect.get("y"))
            result.append((heights.index(y), label, int(m.group(1).replace(",", "")), float(m.group(2)),
                           float(rect.get("x")), y, float(rect.get("width")), rect.get("fill"),
                           g.find(SVG_NS + "text").text or "", g))
        return result

    def test_asyncio_tasks_merge_by_coroutine(self):
        """Issue #35: a server's tasks, each named Task-N by asyncio, split
        the graph into one sliver per request.  By default they are one box
        per coroutine; a name the program gave stays; --task-names all
        keeps every name, none merges by coroutine only."""
        path = os.path.join(self.tmp, "tasks.txt")
        loop = "thread 7 (MainThread);run_forever (/a/base_events.py:607);Handle._run (/a/events.py:80)"
        with open(path, "w") as f:
            for i in range(2, 42):
                f.write('%s;[task Task-%d "handle"];handle (/srv/app.py:9);query (/srv/db.py:3) %d\n'
                        % (loop, i, i))
            f.write('%s;[task ticker "tick"];tick (/srv/app.py:20) 5\n' % loop)
            f.write('%s;[task Task-7 "Server.serve"];Server.serve (/srv/app.py:30) 3\n' % loop)

        def task_boxes(*args):
            out, root = self.render(path, *args)
            found = collections.Counter()
            for _, label, samples, _, _, _, _, _, _, _ in self.boxes(root, None):
                if label.startswith("[task "):
                    found[label] += samples
            return found

        want = sum(range(2, 42))
        self.assertEqual(task_boxes(), {'[task "handle"]': want, "[task ticker \"tick\"]": 5,
                                        '[task "Server.serve"]': 3})
        self.assertEqual(task_boxes("--task-names", "none"),
                         {'[task "handle"]': want, '[task "tick"]': 5, '[task "Server.serve"]': 3})
        every = task_boxes("--task-names", "all")
        self.assertEqual(len(every), 42)
        self.assertEqual(every['[task Task-41 "handle"]'], 41)

    def test_titles_name_file_line_samples_and_percent(self):
        _, root = self.render(fixture("basic.txt"))
        expected, total = expected_nodes(read_stacks(fixture("basic.txt")))
        found = collections.defaultdict(list)
        for depth, label, samples, pct, *_ in self.boxes(root, total):
            found[(depth, label)].append(samples)
            self.assertAlmostEqual(pct, 100.0 * samples / total, places=2)
        for counts in found.values():
            counts.sort()
        self.assertEqual(dict(found), expected)

    def test_widths_are_proportional_to_samples(self):
        _, root = self.render(fixture("basic.txt"))
        for depth, label, samples, pct, x, y, width, *_rest in self.boxes(root, 100):
            g = _rest[-1]
            self.assertAlmostEqual(width, USABLE_WIDTH * samples / 100, delta=0.01, msg=label)
            self.assertEqual(int(g.get(FG_NS + "w")), samples)
            self.assertAlmostEqual(x, 10 + USABLE_WIDTH * int(g.get(FG_NS + "x")) / 100, delta=0.01)

    def test_children_sit_on_their_parent(self):
        _, root = self.render(fixture("basic.txt"))
        boxes = self.boxes(root, 100)
        by_depth = collections.defaultdict(list)
        for box in boxes:
            by_depth[box[0]].append(box)
        for depth, label, samples, pct, x, y, width, *_ in boxes:
            if depth == 0:
                continue
            parents = [p for p in by_depth[depth - 1] if p[4] - 0.01 <= x and x + width <= p[4] + p[6] + 0.01]
            self.assertEqual(len(parents), 1, "%s has one parent below it" % label)
            self.assertAlmostEqual(parents[0][5] - y, 16, msg="one frame height above its parent")

    def test_labels_fit_their_boxes(self):
        _, root = self.render(fixture("basic.txt"))
        for depth, label, samples, pct, x, y, width, fill, text, g in self.boxes(root, 100):
            self.assertLessEqual(len(text) * CHAR_WIDTH, width - 6 + 1e-6, "%r fits %r" % (text, label))
            if text and not text.endswith(".."):
                self.assertIn(text.split(" (")[0], label)

    def test_colours_by_file_category(self):
        _, root = self.render(fixture("basic.txt"))
        fills = collections.defaultdict(set)
        for depth, label, samples, pct, x, y, width, fill, text, g in self.boxes(root, 100):
            fills[label].add(fill)
        rgb = lambda label: tuple(int(v) for v in re.findall(r"\d+", list(fills[label])[0]))
        self.assertEqual(fills["[pysample: truncated]"], {"rgb(170,170,170)"}, "markers are grey")
        self.assertEqual(fills["[pysample: stack table full]"], {"rgb(170,170,170)"})
        user = rgb("compute (/srv/app/work.py:5)")
        stdlib = rgb("JSONEncoder.encode (/usr/lib/python3.11/json/encoder.py:200)")
        frozen = rgb("<lambda> (<frozen importlib._bootstrap>:241)")
        site = rgb("fetch (/venv/lib/python3.11/site-packages/requests/api.py:59)")
        self.assertGreater(user[0], user[2], "user code is warm")
        self.assertGreater(stdlib[2], stdlib[0], "the standard library is blue")
        self.assertGreater(frozen[2], frozen[0], "frozen modules are standard library")
        self.assertGreater(site[1], max(site[0], site[2]), "site-packages are green")
        self.assertEqual(fills["compute (/srv/app/work.py:5)"], fills["compute (/srv/app/work.py:6)"],
                         "one function, one colour")

    def test_colours_are_stable_across_runs(self):
        first, _ = self.render(fixture("basic.txt"))
        second, _ = self.render(fixture("basic.txt"))
        self.assertEqual(re.findall(rb'fill="rgb[^"]*"', first), re.findall(rb'fill="rgb[^"]*"', second))

    def test_interactive_parts_are_present(self):
        out, root = self.render(fixture("basic.txt"))
        scripts = root.findall(SVG_NS + "script")
        self.assertEqual(len(scripts), 1)
        code = scripts[0].text
        for word in ("function zoom", "function search", "Matched: ", "mouseover", "keydown"):
            self.assertIn(word, code)
        ids = set(e.get("id") for e in root.iter() if e.get("id"))
        self.assertTrue({"title", "details", "matched", "search", "unzoom", "frames"} <= ids, ids)
        self.assertEqual(int(root.get(FG_NS + "total")), 100)

    def test_title_option_and_hostile_names_stay_valid_xml(self):
        out, root = self.render(fixture("escapes.txt"), "--title", "<&> ]]> profile")
        self.assertEqual(root.find(SVG_NS + "text[@id='title']").text, "<&> ]]> profile")
        titles = [g.find(SVG_NS + "title").text for g in self.frames(root)]
        self.assertTrue(any(t.startswith("ctl\\x01\\x7fx\\r (/srv/%app/c;d.py:1)") for t in titles), titles)
        self.assertTrue(any(t.startswith("lt<&>\"' ('quoted' <dir>/a&b.py:9)") for t in titles), titles)
        self.assertTrue(any(t.startswith("ünïcødé.函数 (/srv/ñ/файл.py:4)") for t in titles), titles)
        self.assertTrue(any(t.startswith("thread 1 (Main\\nThread)") for t in titles), titles)

    def test_output_file(self):
        out_path = os.path.join(self.tmp, "flame.svg")
        code, out, err = pysample("flamegraph", fixture("basic.txt"), "-o", out_path)
        self.assertEqual((code, out), (0, b""), err)
        ET.parse(out_path)

    def test_deep_stacks(self):
        depth = 3000
        frames = ";".join("level_%d (/srv/deep.py:%d)" % (i, i) for i in range(depth))
        path = self.write("deep.txt", "thread 1 (MainThread);%s 7\nthread 1 (MainThread);%s 3\n"
                          % (frames, frames.rsplit(";", 1)[0]))
        _, root = self.render(path)
        boxes = self.frames(root)
        self.assertEqual(len(boxes), depth + 2)
        self.assertGreaterEqual(int(root.get("height")), (depth + 2) * 16)

    def test_tiny_frames_are_left_out_and_said_so(self):
        lines = ["thread 1;big (/a.py:1) 100000"] + ["thread 1;tiny%d (/a.py:%d) 1" % (i, i) for i in range(5)]
        path = self.write("tiny.txt", "\n".join(lines) + "\n")
        _, root = self.render(path)
        self.assertEqual(len(self.frames(root)), 3)
        self.assertIn("5 frames narrower", root.find(SVG_NS + "text[@id='subtitle']").text)
        _, root = self.render(path, "--minwidth", "0")
        self.assertEqual(len(self.frames(root)), 8)


# ---------------------------------------------------------------------------
# convert --to speedscope
# ---------------------------------------------------------------------------

class SpeedscopeTests(TempDirTestCase):
    UNITS = {"none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"}

    def convert(self, path, *args):
        code, out, err = pysample("convert", path, "--to", "speedscope", *args)
        self.assertEqual(code, 0, err)
        return json.loads(out.decode("utf-8"))

    TIMELINE = ("# pysample timeline 1\nrate_hz 100\nstart_unix_ns 1700000000000000000\nend_us 60000\n"
                "samples 5\nmax_records 5\ndropped_records 2\ndropped_samples 2\nfirst_dropped_us 40000\n"
                "stacks 3\n"
                "thread 1 (MainThread);main (p.py:1);a (p.py:5) 3\n"
                "thread 1 (MainThread);main (p.py:2);b (p.py:9) 2\n"
                "thread 2 (worker);w (p.py:20) 2\n"
                "records 5\n0 2 1\n5000 0 1\n15000 0 1\n25000 1 1\n30000 2 1\n")

    def test_timeline_in_time_order(self):
        """A .timeline converts to one sampled profile per thread in time
        order: each sample lasts to the thread's next (at most twice
        1/rate; a longer gap, or the time before the first, is an empty
        sample), and the samples past the bound are one marker to the end."""
        path = self.write("prof.txt.timeline", self.TIMELINE)
        doc = self.convert(path)
        self.check_schema(doc)
        names = [f["name"] for f in doc["shared"]["frames"]]
        main, worker = doc["profiles"]
        self.assertEqual((main["name"], worker["name"]), ("thread 1 (MainThread)", "thread 2 (worker)"))
        self.assertEqual(main["unit"], "microseconds")

        def leaves(p):
            return [names[s[-1]] if s else "" for s in p["samples"]]
        self.assertEqual(leaves(main), ["", "a", "a", "b", "[pysample: timeline full]"])
        self.assertEqual(main["weights"], [5000, 10000, 10000, 15000, 20000])
        # 0 -> 30000 is more than twice 10 ms: 10 ms of w, then nothing.
        self.assertEqual(leaves(worker), ["w", "", "w", "[pysample: timeline full]"])
        self.assertEqual(worker["weights"], [10000, 20000, 10000, 20000])
        self.assertEqual((main["endValue"], worker["endValue"]), (60000, 60000))
        self.assertIn("timeline full: 2 samples after 0.040 s", doc["exporter"])
        self.assertEqual(doc["pysample"]["timeline"]["dropped_samples"], 2)

    def test_timeline_damaged(self):
        """A cut timeline is refused with the line that is wrong."""
        path = self.write("cut.timeline", self.TIMELINE[:-20])   # the last two records
        code, out, err = pysample("convert", path, "--to", "speedscope")
        self.assertEqual(code, 2)
        self.assertRegex(err.decode() if isinstance(err, bytes) else err,
                         r"cut\.timeline:18: not a pysample timeline: 5 records announced, 3 there")

    def check_schema(self, doc):
        """The required fields of https://www.speedscope.app/file-format-schema.json."""
        self.assertEqual(doc["$schema"], "https://www.speedscope.app/file-format-schema.json")
        self.assertIsInstance(doc["shared"]["frames"], list)
        for frame in doc["shared"]["frames"]:
            self.assertIsInstance(frame["name"], str)
            self.assertLessEqual(set(frame), {"name", "file", "line", "col"})
            if "file" in frame:
                self.assertIsInstance(frame["file"], str)
            if "line" in frame:
                self.assertIsInstance(frame["line"], int)
        self.assertIsInstance(doc["profiles"], list)
        self.assertTrue(doc["profiles"])
        nframes = len(doc["shared"]["frames"])
        for profile in doc["profiles"]:
            self.assertEqual(profile["type"], "sampled")
            self.assertIsInstance(profile["name"], str)
            self.assertIn(profile["unit"], self.UNITS)
            self.assertEqual(len(profile["samples"]), len(profile["weights"]))
            for stack in profile["samples"]:
                for index in stack:
                    self.assertTrue(0 <= index < nframes)
            self.assertEqual(profile["startValue"], 0)
            self.assertAlmostEqual(profile["endValue"], sum(profile["weights"]))
        self.assertIsInstance(doc["exporter"], str)
        self.assertIsInstance(doc["name"], str)
        self.assertTrue(0 <= doc["activeProfileIndex"] < len(doc["profiles"]))

    def test_schema_and_total_weight(self):
        doc = self.convert(fixture("basic.txt"))
        self.check_schema(doc)
        self.assertEqual(sum(sum(p["weights"]) for p in doc["profiles"]), 100)
        self.assertEqual({p["unit"] for p in doc["profiles"]}, {"none"})

    def test_one_profile_per_thread_with_its_stacks(self):
        doc = self.convert(fixture("basic.txt"))
        frames = doc["shared"]["frames"]
        got = collections.Counter()
        for profile in doc["profiles"]:
            for stack, weight in zip(profile["samples"], profile["weights"]):
                got[(profile["name"], tuple((frames[i]["name"], frames[i].get("file"), frames[i].get("line"))
                                            for i in stack))] += weight
        want = collections.Counter()
        for (thread, stack), count in read_stacks(fixture("basic.txt")).items():
            want[(unescape(thread), tuple(split_frame(f) for f in stack))] += count
        self.assertEqual(got, want)
        self.assertEqual([p["name"] for p in doc["profiles"]],
                         ["thread 100 (MainThread)", "thread 101 (worker;pool-1)", "thread 102"])
        self.assertEqual(doc["activeProfileIndex"], 0, "the busiest thread is shown first")
        names = [(f["name"], f.get("file"), f.get("line")) for f in frames]
        self.assertEqual(len(names), len(set(names)), "frames are shared, not repeated")

    def test_lines_off_frames_have_no_line(self):
        doc = self.convert(fixture("nolines.txt"))
        self.check_schema(doc)
        self.assertFalse(any("line" in f for f in doc["shared"]["frames"]))

    def test_rate_gives_milliseconds(self):
        doc = self.convert(fixture("basic.txt"), "--rate", "200")
        self.check_schema(doc)
        self.assertEqual({p["unit"] for p in doc["profiles"]}, {"milliseconds"})
        self.assertAlmostEqual(sum(sum(p["weights"]) for p in doc["profiles"]), 500.0)

    def test_output_file_and_unicode(self):
        out_path = os.path.join(self.tmp, "p.json")
        code, out, err = pysample("convert", fixture("escapes.txt"), "--to", "speedscope", "-o", out_path)
        self.assertEqual((code, out), (0, b""), err)
        with open(out_path, encoding="utf-8") as f:
            doc = json.load(f)
        self.check_schema(doc)
        self.assertIn("ünïcødé.函数", [f["name"] for f in doc["shared"]["frames"]])
        self.assertIn("ctl\x01\x7fx\r", [f["name"] for f in doc["shared"]["frames"]])


# ---------------------------------------------------------------------------
# convert --to speedscope, read by speedscope itself (npm package, headless
# chromium).  Skipped, with the reason, when chromium, npm or the package is
# not available (CI: .ci/run installs chromium).
# ---------------------------------------------------------------------------

SPEEDSCOPE_CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                "pysample", "npm")


def speedscope_release():
    """(speedscope's dist/release directory, None) or (None, why not).  The
    npm package is fetched once with `npm pack` into SPEEDSCOPE_CACHE,
    outside the repository, and reused."""
    if os.path.isdir(SPEEDSCOPE_CACHE):
        for name in sorted(os.listdir(SPEEDSCOPE_CACHE), reverse=True):
            release = os.path.join(SPEEDSCOPE_CACHE, name, "package", "dist", "release")
            if name.startswith("speedscope-") and os.path.isfile(os.path.join(release, "index.html")):
                return release, None
    npm = shutil.which("npm")
    if not npm:
        return None, "npm is not installed and %s has no speedscope package" % SPEEDSCOPE_CACHE
    os.makedirs(SPEEDSCOPE_CACHE, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".fetch-", dir=SPEEDSCOPE_CACHE)
    try:
        try:
            code, out, err = run([npm, "pack", "--silent", "speedscope"], cwd=work, timeout=90,
                                 env=clean_env(npm_config_update_notifier="false", npm_config_fund="false"))
        except subprocess.TimeoutExpired:
            return None, "`npm pack speedscope` timed out"
        tarballs = [n for n in os.listdir(work) if n.startswith("speedscope-") and n.endswith(".tgz")]
        if code != 0 or len(tarballs) != 1:
            return None, "`npm pack speedscope` failed: %s" % (err.strip().splitlines() or ["?"])[-1]
        import tarfile
        with tarfile.open(os.path.join(work, tarballs[0])) as tar:
            for member in tar.getmembers():
                if not member.name.startswith("package/") or ".." in member.name.split("/") \
                        or not (member.isfile() or member.isdir()):
                    return None, "unexpected member %r in %s" % (member.name, tarballs[0])
            tar.extractall(work)
        os.remove(os.path.join(work, tarballs[0]))
        final = os.path.join(SPEEDSCOPE_CACHE, tarballs[0][:-len(".tgz")])
        try:
            os.rename(work, final)   # atomic: a concurrent fetch may have won, which is fine
        except OSError:
            pass
    finally:
        shutil.rmtree(work, True)
    release = os.path.join(final, "package", "dist", "release")
    if not os.path.isfile(os.path.join(release, "index.html")):
        return None, "the speedscope package has no dist/release/index.html"
    return release, None


# Says its pid, then is busy in one function until 0.4 s of wall time
# has passed: samples whatever the machine's load.
# 0.4 s of its own CPU time, not of the wall clock: at load ~19 a 0.4 s
# wall-clock spin was sampled so little that `record` had no samples to
# convert (and so no file); the sampler ticks on the wall clock, which a
# loaded machine stretches along with the CPU-time spin.
SPEEDSCOPE_SPINNER = (
    "import os, time\n"
    "print(os.getpid())\n"
    "def speedscope_spin(end):\n"
    "    while time.process_time() < end:\n"
    "        sum(i * i for i in range(1000))\n"
    "speedscope_spin(time.process_time() + 0.4)\n"
)


class SpeedscopeImporterTests(TempDirTestCase):
    """Our speedscope files as speedscope's own importer reads them: the
    release page loaded in headless chromium from a local HTTP server (same
    origin, so no CORS), #profileURL= naming the file, and the DOM dumped
    after the import.  speedscope titles the page "<profile name> -
    speedscope" and lists each profile with its total weight when the
    import succeeds, and shows "Something went wrong" when it fails."""

    FAILED = "Something went wrong"

    def setUp(self):
        super().setUp()
        self.chromium = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))
                              if p), None)
        if not self.chromium:
            self.skipTest("chromium is not installed (CI: .ci/run installs it): speedscope import check skipped")
        release, why = speedscope_release()
        if not release:
            self.skipTest("speedscope npm package unavailable: %s" % why)
        self.root = os.path.join(self.tmp, "www")
        shutil.copytree(release, self.root)
        # speedscope reports some failures (a file of no known format) with
        # alert(), which blocks a headless browser until it is killed; the
        # served copy of its page records the message on <html> instead.
        # Nothing else of the page or its importer is changed.
        index = os.path.join(self.root, "index.html")
        with open(index, encoding="utf-8") as f:
            page = f.read()
        self.assertIn("<head>", page)
        page = page.replace("<head>", "<head><script>window.alert = function (m) {"
                            " document.documentElement.setAttribute('data-alert', String(m)); };</script>", 1)
        with open(index, "w", encoding="utf-8") as f:
            f.write(page)
        import functools
        import http.server
        import threading

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(Quiet, directory=self.root))
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(self.server.server_close)
        self.addCleanup(self.server.shutdown)

    def open_in_speedscope(self, doc_bytes, name="profile.speedscope.json"):
        """(page title, page text) once speedscope has imported the file."""
        with open(os.path.join(self.root, name), "wb") as f:
            f.write(doc_bytes)
        base = "http://127.0.0.1:%d/" % self.server.server_address[1]
        profile = tempfile.mkdtemp(prefix="chromium-", dir=self.tmp)
        # The virtual time budget lets the page's fetch and import finish
        # before the DOM is dumped, however slow the machine; the real
        # timeout only stops a hung browser.
        args = [self.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--user-data-dir=" + profile, "--virtual-time-budget=10000",
                "--dump-dom", base + "index.html#profileURL=" + base + name]
        try:
            code, out, err = run(args, env=clean_env(HOME=self.tmp), timeout=60)
        except subprocess.TimeoutExpired:
            self.fail("chromium did not finish with speedscope's page in 60 s")
        self.assertEqual(code, 0, err[-2000:])
        dom = out.decode("utf-8", "replace")
        self.assertIn("<body", dom, "chromium dumped no page: " + err[-2000:])
        title = re.search(r"<title>(.*?)</title>", dom, re.S)
        alert = re.search(r'data-alert="([^"]*)"', dom)
        text = re.sub(r"\s+", " ", re.sub(r"<[^>]*>", " ", dom))
        if alert:
            text = "alert: %s; %s" % (alert.group(1), text)
        return (title.group(1) if title else ""), text

    def convert_quality_fixture(self):
        path = os.path.join(self.tmp, "quality.txt")
        shutil.copy(fixture("quality.txt"), path)
        shutil.copy(fixture("quality.txt.quality.json"), path + ".quality.json")
        code, out, err = pysample("convert", path, "--to", "speedscope")
        self.assertEqual(code, 0, err)
        return out

    def test_speedscope_imports_profile_with_quality(self):
        out = self.convert_quality_fixture()
        doc = json.loads(out.decode("utf-8"))
        # What the converter wrote: the figures of the sidecar, typed, and
        # the summary in the exporter; the sidecar's rate gives milliseconds.
        with open(fixture("quality.txt.quality.json")) as f:
            sidecar = json.load(f)
        del sidecar["pid"]
        self.assertEqual(doc["pysample"], sidecar)
        self.assertRegex(doc["exporter"], r"^pysample \S+ \(98\.7 of 100 Hz, 99 samples\)$")
        self.assertEqual(doc["name"], "quality.txt")
        title, text = self.open_in_speedscope(out)
        self.assertNotIn(self.FAILED, text)
        self.assertNotIn("alert:", text)
        self.assertEqual(title, "quality.txt - speedscope", text[:500])
        # The profile picker: each thread, with its total weight in the
        # unit the file gives (97 and 2 samples at 100 Hz).
        self.assertRegex(text, r"thread 27467 \(MainThread\) 970(\.0+)?ms")
        self.assertRegex(text, r"thread 27470 \(flusher\) 20(\.0+)?ms")

    def test_speedscope_imports_a_recorded_profile(self):
        """record --format speedscope with the real library: its quality
        figures in the file, and the file imported."""
        library = built_library()
        script = self.write("spinner.py", SPEEDSCOPE_SPINNER)
        code, out, err = pysample("record", "--format", "speedscope", "--rate", "100",
                                  "-o", os.path.join(self.root, "rec.json"), "--", PYTHON, script,
                                  cwd=self.tmp, env=clean_env(PYSAMPLE_LIB=library))
        self.assertEqual(code, 0, err)
        pid = int(out)
        self.assertTrue(os.path.exists(os.path.join(self.root, "rec.json")), err)
        with open(os.path.join(self.root, "rec.json"), "rb") as f:
            data = f.read()
        doc = json.loads(data.decode("utf-8"))
        quality = doc["pysample"]
        self.assertEqual((quality["requested_rate_hz"], quality["how"]), (100, "PYSAMPLE_OUTPUT"), quality)
        self.assertRegex(quality["python"], r"^%d\.%d" % sys.version_info[:2])
        # At 100 Hz each sample weighs 10 ms; the figures count every sample.
        total = sum(sum(p["weights"]) for p in doc["profiles"])
        self.assertAlmostEqual(total, quality["samples"] * 10.0, delta=0.01)
        self.assertGreater(quality["samples"], 0)
        self.assertIn("(%s of 100 Hz, %d samples)" % (quality["achieved_rate_hz"], quality["samples"]),
                      doc["exporter"])
        self.assertIn("speedscope_spin", [f["name"] for f in doc["shared"]["frames"]])
        title, text = self.open_in_speedscope(data, "rec.json")
        self.assertNotIn(self.FAILED, text)
        self.assertNotIn("alert:", text)
        self.assertEqual(title, "rec.json - speedscope", text[:500])
        self.assertIn("thread %d (MainThread)" % pid, text)

    def test_speedscope_imports_a_recorded_timeline(self):
        """record --timeline --format speedscope with the real library, of
        a program that runs phase_a, phase_b, phase_a (each for 30 sampler
        ticks): the main thread's samples in that order, each weighing the
        time to the next, and the file imported by speedscope."""
        library = built_library()
        program = os.path.join(SOURCE_ROOT, "test", "integration", "programs", "phases.py")
        out_path = os.path.join(self.root, "tl.json")
        code, out, err = pysample("record", "--timeline", "--format", "speedscope", "--rate", "200",
                                  "-o", out_path, "--", PYTHON, program, "30",
                                  cwd=self.tmp, env=clean_env(PYSAMPLE_LIB=library))
        self.assertEqual(code, 0, err)
        with open(out_path, "rb") as f:
            data = f.read()
        doc = json.loads(data.decode("utf-8"))
        names = [f["name"] for f in doc["shared"]["frames"]]
        main = [p for p in doc["profiles"] if p["name"].endswith("(MainThread)")]
        self.assertEqual(len(main), 1, [p["name"] for p in doc["profiles"]])
        main = main[0]
        self.assertEqual((main["type"], main["unit"], main["startValue"]), ("sampled", "microseconds", 0))
        self.assertEqual(main["endValue"], sum(main["weights"]))
        self.assertTrue(all(w > 0 for w in main["weights"]), main["weights"])
        # The phases, in time order: one letter per sample, runs collapsed.
        phases = ""
        for sample in main["samples"]:
            frames = {names[i] for i in sample}
            letter = "a" if "phase_a" in frames else "b" if "phase_b" in frames else ""
            if letter and not phases.endswith(letter):
                phases += letter
        self.assertEqual(phases, "aba")
        # A sample weighs the time to the thread's next one: at 200 Hz about
        # 5 ms, never more than twice that (a longer gap is an empty sample).
        busy = [w for s, w in zip(main["samples"], main["weights"]) if s]
        self.assertLessEqual(max(busy), 10000)
        self.assertGreater(sum(busy), 0.5 * 5000 * len(busy))
        figures = doc["pysample"]["timeline"]
        self.assertEqual((figures["rate_hz"], figures["dropped_records"]), (200, 0))
        self.assertEqual(figures["samples"], sum(1 for s in main["samples"] if s)
                         + sum(sum(1 for s in p["samples"] if s) for p in doc["profiles"] if p is not main))
        title, text = self.open_in_speedscope(data, "tl.json")
        self.assertNotIn(self.FAILED, text)
        self.assertNotIn("alert:", text)
        self.assertEqual(title, "tl.json - speedscope", text[:500])
        self.assertIn(main["name"], text)

    def test_speedscope_reports_a_broken_file(self):
        """The check above can fail: speedscope's failure is seen."""
        doc = json.loads(self.convert_quality_fixture().decode("utf-8"))
        doc["profiles"][0]["samples"][0].append(len(doc["shared"]["frames"]))   # no such frame
        title, text = self.open_in_speedscope(json.dumps(doc).encode("utf-8"))
        self.assertIn(self.FAILED, text)
        self.assertNotIn("quality.txt", title)
        # Cut short, the file is not JSON: speedscope says it knows no such format.
        title, text = self.open_in_speedscope(self.convert_quality_fixture()[:300], "cut.json")
        self.assertRegex(text, r"^alert: Unrecognized format", text[:500])
        self.assertNotIn("quality.txt", title)


# ---------------------------------------------------------------------------
# convert --to pprof
# ---------------------------------------------------------------------------

def _varint(buf, i):
    shift = value = 0
    while True:
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def decode_message(buf):
    """{field number: [int or bytes]} of one protobuf message."""
    fields = collections.defaultdict(list)
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            length, i = _varint(buf, i)
            value = bytes(buf[i:i + length])
            i += length
        elif wire == 1:
            value, i = bytes(buf[i:i + 8]), i + 8
        elif wire == 5:
            value, i = bytes(buf[i:i + 4]), i + 4
        else:
            raise ValueError("wire type %d at %d" % (wire, i))
        if i > len(buf):
            raise ValueError("truncated message")
        fields[number].append(value)
    return fields


def repeated_ints(values):
    """A repeated integer field, packed or not."""
    out = []
    for value in values:
        if isinstance(value, bytes):
            i = 0
            while i < len(value):
                v, i = _varint(value, i)
                out.append(v)
        else:
            out.append(value)
    return out


def one(fields, number, default=0):
    values = fields.get(number, [])
    assert len(values) <= 1, "field %d repeated" % number
    return values[0] if values else default


def decode_pprof(data):
    p = decode_message(data)
    strings = [s.decode("utf-8") for s in p[6]]
    functions = {}
    for raw in p[5]:
        f = decode_message(raw)
        functions[one(f, 1)] = (strings[one(f, 2)], strings[one(f, 4)], one(f, 5))
    locations = {}
    for raw in p[4]:
        loc = decode_message(raw)
        lines = [decode_message(x) for x in loc[4]]
        locations[one(loc, 1)] = (one(loc, 2), [(one(ln, 1), one(ln, 2)) for ln in lines])
    samples = []
    for raw in p[2]:
        s = decode_message(raw)
        labels = {}
        for lab in s[3]:
            lab = decode_message(lab)
            labels[strings[one(lab, 1)]] = strings[one(lab, 2)]
        samples.append((repeated_ints(s[1]), repeated_ints(s[2]), labels))
    vt = lambda raw: (strings[one(decode_message(raw), 1)], strings[one(decode_message(raw), 2)])
    return {
        "strings": strings,
        "sample_type": [vt(raw) for raw in p[1]],
        "samples": samples,
        "locations": locations,
        "functions": functions,
        "mappings": [decode_message(m) for m in p[3]],
        "period_type": vt(one(p, 11)) if p.get(11) else None,
        "period": one(p, 12),
        "comments": [strings[i] for i in repeated_ints(p[13])],
        "time_nanos": one(p, 9),
        "default_sample_type": strings[one(p, 14)],
    }


class PprofTests(TempDirTestCase):
    def convert(self, path, *args):
        out_path = os.path.join(self.tmp, "p.pb")
        code, out, err = pysample("convert", path, "--to", "pprof", "-o", out_path, *args)
        self.assertEqual(code, 0, err)
        with open(out_path, "rb") as f:
            data = f.read()
        self.assertNotEqual(data[:2], b"\x1f\x8b", "uncompressed")
        return out_path, decode_pprof(data)

    def stacks(self, prof):
        """{(thread label, root-first frames as (name, file, line)): counts}"""
        got = collections.Counter()
        for location_ids, values, labels in prof["samples"]:
            frames = []
            for lid in location_ids:
                mapping, lines = prof["locations"][lid]
                self.assertEqual(len(lines), 1)
                fid, line = lines[0]
                name, filename, _ = prof["functions"][fid]
                frames.append((name, filename or None, line or None))
            thread = "thread " + labels["thread_id"]
            if "thread_name" in labels:
                thread += " (%s)" % labels["thread_name"]
            got[(thread, tuple(reversed(frames)))] += values[0]
        return got

    def test_string_table_and_sample_types(self):
        _, prof = self.convert(fixture("basic.txt"))
        self.assertEqual(prof["strings"][0], "")
        self.assertEqual(len(prof["strings"]), len(set(prof["strings"])), "strings are stored once")
        self.assertEqual(prof["sample_type"], [("samples", "count")])
        self.assertEqual(prof["period_type"], ("samples", "count"))
        self.assertEqual(prof["period"], 1)
        self.assertTrue(any("pysample" in c for c in prof["comments"]))
        self.assertGreater(prof["time_nanos"], 0)

    def test_values_sum_to_the_total(self):
        _, prof = self.convert(fixture("basic.txt"))
        self.assertEqual(sum(values[0] for _, values, _ in prof["samples"]), 100)
        for _, values, _ in prof["samples"]:
            self.assertEqual(len(values), len(prof["sample_type"]))

    def test_stacks_functions_lines_and_thread_labels(self):
        _, prof = self.convert(fixture("basic.txt"))
        want = collections.Counter()
        for (thread, stack), count in read_stacks(fixture("basic.txt")).items():
            want[(unescape(thread), tuple(split_frame(f) for f in stack))] += count
        self.assertEqual(self.stacks(prof), want)
        names = set(name for name, _, _ in prof["functions"].values())
        self.assertTrue({"compute", "fib", "<module>", "weird%name;x", "[pysample: truncated]"} <= names)
        self.assertEqual(len(prof["functions"]), len(set(prof["functions"].values())),
                         "a function is listed once, whatever its lines")

    def test_ids_are_unique_and_nonzero(self):
        _, prof = self.convert(fixture("basic.txt"))
        self.assertNotIn(0, prof["functions"])
        self.assertNotIn(0, prof["locations"])
        mapping_ids = [one(m, 1) for m in prof["mappings"]]
        self.assertEqual(mapping_ids, [1])
        self.assertEqual(one(prof["mappings"][0], 7), 1, "has_functions: pprof must not symbolize")
        for mapping, lines in prof["locations"].values():
            self.assertIn(mapping, mapping_ids)
            for fid, _ in lines:
                self.assertIn(fid, prof["functions"])

    def test_leaf_first(self):
        _, prof = self.convert(fixture("basic.txt"))
        leaves = collections.Counter()
        for location_ids, values, _ in prof["samples"]:
            fid = prof["locations"][location_ids[0]][1][0][0]
            leaves[prof["functions"][fid][0]] += values[0]
        self.assertEqual(leaves["compute"], 50)
        self.assertEqual(leaves["main"], 0)

    def test_rate_adds_cpu_nanoseconds(self):
        _, prof = self.convert(fixture("basic.txt"), "--rate", "250", "--mode", "cpu")
        self.assertEqual(prof["sample_type"], [("samples", "count"), ("cpu", "nanoseconds")])
        self.assertEqual(prof["period_type"], ("cpu", "nanoseconds"))
        self.assertEqual(prof["period"], 4000000)
        self.assertEqual(prof["default_sample_type"], "cpu")
        for _, values, _ in prof["samples"]:
            self.assertEqual(values[1], values[0] * 4000000)

    def test_wall_profile_is_labelled_wall(self):
        """Issue #35: a wall profile came out as `cpu`.  Labelled by the
        profile's mode: its .quality.json's, else wall (the library's
        default, said in one line); cpu only for a cpu profile."""
        src = os.path.join(self.tmp, "prof.txt")
        shutil.copy(fixture("basic.txt"), src)
        out_path = os.path.join(self.tmp, "p.pb")
        code, _, err = pysample("convert", src, "--to", "pprof", "--rate", "100", "-o", out_path)
        self.assertEqual(code, 0, err)
        with open(out_path, "rb") as f:
            prof = decode_pprof(f.read())
        self.assertEqual(prof["sample_type"], [("samples", "count"), ("wall", "nanoseconds")])
        self.assertEqual(prof["period_type"], ("wall", "nanoseconds"))
        self.assertEqual(prof["default_sample_type"], "wall")
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("--mode cpu", err)
        for mode in ("wall", "cpu"):
            with open(src + ".quality.json", "w") as f:
                json.dump({"mode": mode, "requested_rate_hz": 100}, f)
            code, _, err = pysample("convert", src, "--to", "pprof", "-o", out_path)
            self.assertEqual((code, err), (0, ""))
            with open(out_path, "rb") as f:
                prof = decode_pprof(f.read())
            self.assertEqual(prof["sample_type"][1], (mode, "nanoseconds"))
            self.assertEqual(prof["default_sample_type"], mode)

    def test_lines_off(self):
        _, prof = self.convert(fixture("nolines.txt"))
        self.assertEqual({line for _, lines in prof["locations"].values() for _, line in lines}, {0})
        self.assertEqual(one(prof["mappings"][0], 9), 0, "has_line_numbers is false")

    def test_go_tool_pprof_reads_it(self):
        go = shutil.which("go")
        if not go:
            self.skipTest("go is not installed: `go tool pprof` check skipped")
        path, _ = self.convert(fixture("basic.txt"), "--rate", "100")
        code, out, err = run([go, "tool", "pprof", "-raw", path], env=go_env(self.tmp))
        self.assertEqual(code, 0, err)
        text = out.decode("utf-8", "replace")
        self.assertIn("compute /srv/app/work.py:5", text)
        self.assertIn("<module> /srv/app/main.py:30", text)
        code, out, err = run([go, "tool", "pprof", "-top", "-sample_index=samples", path],
                             env=go_env(self.tmp))
        self.assertEqual(code, 0, err)
        self.assertRegex(out.decode(), r"50\s+50(\.00)?%.*compute")

    def test_quality_figures_are_one_comment(self):
        """pprof prints every comment above every report: the figures used to
        be 17 lines at the head of `go tool pprof -top`."""
        profile = fixture("basic.txt")
        shutil.copy(profile, os.path.join(self.tmp, "basic.txt"))
        with open(os.path.join(self.tmp, "basic.txt.quality.json"), "w") as f:
            json.dump({"requested_rate_hz": 100, "achieved_rate_hz": 98.5, "samples": 100, "ticks": 101,
                       "mode": "wall", "python": "3.12", "dropped_unreadable": 2, "late_ticks": 1,
                       "truncated_stacks": 0, "budget_pct": 0.0, "duration_s": 1.0}, f)
        path, prof = self.convert(os.path.join(self.tmp, "basic.txt"), "--rate", "100")
        self.assertEqual(prof["comments"], ["converted by pysample %s from basic.txt: Python 3.12, wall-clock, "
                                            "98.5 of 100 Hz, 100 samples, 2 dropped" % pysample_tool.VERSION])
        go = shutil.which("go")
        if go:
            code, out, err = run([go, "tool", "pprof", "-top", path], env=go_env(self.tmp))
            self.assertEqual(code, 0, err)
            head = out.decode().split("\nType:")[0].splitlines()
            self.assertLessEqual(len(head), 2, "File: and the one comment above the report: %r" % head)

    def test_hostile_quality_figures_are_read_as_absent(self):
        """The figures come from the profiled process (its sidecar file or
        its control socket), which may write anything: text, NaN, infinity
        or a negative count used to stop convert, top and record with a
        ValueError traceback."""
        shutil.copy(fixture("basic.txt"), os.path.join(self.tmp, "basic.txt"))
        with open(os.path.join(self.tmp, "basic.txt.quality.json"), "w") as f:
            json.dump({"requested_rate_hz": "x", "achieved_rate_hz": "nan", "samples": "-5",
                       "mode": "wall", "dropped_unreadable": "1e400", "dropped_other": "many",
                       "truncated_stacks": "?", "budget_pct": "inf", "budget_adjustments": "-1"}, f)
        path, prof = self.convert(os.path.join(self.tmp, "basic.txt"), "--rate", "100")
        self.assertEqual(prof["comments"], ["converted by pysample %s from basic.txt: wall-clock, "
                                            "? samples, 0 dropped" % pysample_tool.VERSION])
        meta = {"requested_rate_hz": "100", "achieved_rate_hz": "-1", "budget_adjustments": "x",
                "duration_s": "1e309", "dropped_inconsistent": "2"}
        self.assertIn("2 dropped", pysample_tool.remote.describe_quality(meta))
        self.assertIn("achieved rate 0.0 Hz", pysample_tool.remote.low_rate_warning(meta))
        self.assertIn("0 dropped", pysample_tool.top.live_header(1, {"dropped_other": "x"})[1])


# ---------------------------------------------------------------------------
# record, with a stand-in library (test/tools/fake_libpysample.c)
# ---------------------------------------------------------------------------

def fake_library():
    path = CONFIG.get("PYSAMPLE_TEST_FAKE_LIB")
    if path and os.path.isfile(path):
        return path
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc or sys.platform == "darwin":
        return None
    out = os.path.join(tempfile.mkdtemp(prefix="pysample-fake-"), "libfakepysample.so")
    code, _, _ = run([cc, "-shared", "-fPIC", "-D_GNU_SOURCE", "-o", out,
                      os.path.join(HERE, "fake_libpysample.c"), "-ldl"])
    return out if code == 0 else None


class RecordTests(TempDirTestCase):
    @classmethod
    def setUpClass(cls):
        cls.lib = fake_library()

    def setUp(self):
        if not self.lib:
            self.skipTest("the fake library is not built (run through meson test)")
        TempDirTestCase.setUp(self)

    def record(self, *args, **kwargs):
        env = clean_env(PYSAMPLE_LIB=self.lib, **kwargs.pop("env", {}))
        return pysample("record", *args, cwd=kwargs.pop("cwd", self.tmp), env=env, **kwargs)

    def profiles(self, directory=None, pattern=r"^pysample-(\d+)\.txt$"):
        directory = directory or self.tmp
        found = {}
        for name in os.listdir(directory):
            m = re.match(pattern, name)
            if m:
                found[int(m.group(1))] = os.path.join(directory, name)
        return found

    def test_exit_status_environment_and_summary(self):
        code, out, err = self.record("--rate", "250", "--mode", "cpu", "--", PYTHON, "-c",
                                     "import sys; print('child says hi'); sys.exit(3)")
        self.assertEqual(code, 3, "record exits with the command's status; stderr: %s" % err)
        self.assertEqual(out, b"child says hi\n", "the command's output is left alone")
        (pid, path), = self.profiles().items()
        with open(path) as f:
            text = f.read()
        self.assertIn("env rate=250 mode=cpu format=collapsed async=unset", text)
        self.assertRegex(err, r"pid %d( \(`python[^`\n]*`\))?: 4 samples in 1 thread" % pid)
        self.assertIn(path, err)
        self.assertIn("top functions by self samples", err)
        self.assertRegex(err, r"3\s+75\.0%\s+3\s+75\.0%\s+env rate=250")
        self.assertIn("pysample flamegraph pysample-%d.txt" % pid, err)

    def test_async_flag_sets_pysample_async(self):
        code, out, err = self.record("--async", "--", PYTHON, "-c", "pass")
        self.assertEqual(code, 0, err)
        (pid, path), = self.profiles().items()
        with open(path) as f:
            self.assertIn("async=1", f.read())

    def test_native_flag_sets_pysample_native(self):
        for flag, want in (("--native", "native=1"), ("--native=all", "native=all")):
            for f in self.profiles().values():
                os.unlink(f)
            code, out, err = self.record(flag, "--", PYTHON, "-c", "pass")
            self.assertEqual(code, 0, err)
            (pid, path), = self.profiles().items()
            with open(path) as f:
                self.assertIn(want, f.read())

    def test_every_python_process_gets_a_file(self):
        code, out, err = self.record("--", PYTHON, "-c",
                                     "import subprocess, sys\n"
                                     "for _ in range(2): subprocess.run([sys.executable, '-c', 'pass'])")
        self.assertEqual(code, 0, err)
        found = self.profiles()
        self.assertEqual(len(found), 3, err)
        for pid, path in found.items():
            self.assertEqual(len(summary_lines(err, pid)), 1, err)
            self.assertIn(path, err)
        self.assertIn("(all 3 processes)", err)

    def test_command_line_of_a_process_is_escaped(self):
        """What a process ran, as the summary shows it: its own words,
        which may hold escape sequences, made visible, the program by its
        base name, shortened."""
        from pysample_tool import tree
        child = subprocess.Popen([PYTHON, "-c", "import sys; sys.stdin.read()", "\x1b]0;title\x07\nx" * 20],
                                 stdin=subprocess.PIPE)
        self.addCleanup(child.wait)
        self.addCleanup(child.stdin.close)
        give_up = time.monotonic() + 30
        shown = tree.command_line(child.pid)
        while " -c " not in (shown or "") and time.monotonic() < give_up:
            time.sleep(0.01)     # the exec may not have happened yet
            shown = tree.command_line(child.pid)
        self.assertTrue(shown.startswith("%s -c import sys; sys.stdin.read() \\x1b]0;title\\x07\\nx"
                                         % os.path.basename(PYTHON)), shown)
        self.assertFalse(re.search("[\x00-\x1f\x7f]", shown), shown)
        self.assertEqual(len(shown), tree.COMMAND_MAX)
        self.assertTrue(shown.endswith("..."), shown)
        self.assertIn(child.pid, tree.descendants(os.getpid()))

    def test_output_template_with_pid(self):
        os.mkdir(os.path.join(self.tmp, "out"))
        code, out, err = self.record("-o", "out/prof-%p.txt", "--", PYTHON, "-c",
                                     "import subprocess, sys; subprocess.run([sys.executable, '-c', 'pass'])")
        self.assertEqual(code, 0, err)
        self.assertEqual(len(self.profiles(os.path.join(self.tmp, "out"), r"^prof-(\d+)\.txt$")), 2)

    def test_host_name_adds_no_directory(self):
        # As the library names its files (lib/profile/output.c): a host name
        # from a UTS namespace or a pod can hold '/' and '..'.
        from pysample_tool.deliver import expand_template
        self.assertEqual(expand_template("out/%h.txt", 1, "../../x/y", 2), "out/.._.._x_y.txt")
        self.assertEqual(expand_template("out/%h/p.txt", 1, "..", 2), "out/__/p.txt")
        self.assertEqual(expand_template("out/%h-%p.txt", 7, "web-1", 2), "out/web-1-7.txt")

    def test_output_without_pid_and_several_processes(self):
        code, out, err = self.record("-o", "prof.txt", "--", PYTHON, "-c",
                                     "import subprocess, sys; subprocess.run([sys.executable, '-c', 'pass'])")
        self.assertEqual(code, 0, err)
        names = sorted(os.listdir(self.tmp))
        self.assertEqual(len(names), 2, names)
        self.assertIn("prof.txt", names, "the started process gets the name asked for")
        self.assertRegex([n for n in names if n != "prof.txt"][0], r"^prof\.\d+\.txt$")

    def test_single_process_gets_exactly_the_output_name(self):
        code, out, err = self.record("-o", "only.txt", "--", PYTHON, "-c", "pass")
        self.assertEqual(code, 0, err)
        self.assertEqual(os.listdir(self.tmp), ["only.txt"])

    def test_every_profile_the_library_names_is_kept(self):
        """record takes every profile in its private directory, whatever the
        library named it: here the command itself leaves one under the name
        the library gives the image after an exec (<pid>.1), next to the
        fake library's <pid>, and a temporary file that must be ignored."""
        program = ("import os\n"
                   "template = os.environ['PYSAMPLE_OUTPUT']\n"
                   "for name, line in (('%d.1' % os.getpid(), 'thread 1;later (b.py:1) 2\\n'),\n"
                   "                   ('.x.tmp', 'thread 1;partial (c.py:1) 1\\n')):\n"
                   "    path = template.replace('%p', name)\n"
                   "    if name.startswith('.'):\n"
                   "        path = os.path.join(os.path.dirname(path), name)\n"
                   "    with open(path, 'w') as f:\n"
                   "        f.write(line)\n"
                   "print(os.getpid())\n")
        code, out, err = self.record("--", PYTHON, "-c", program)
        self.assertEqual(code, 0, err)
        pid = int(out)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["pysample-%d.1.txt" % pid, "pysample-%d.txt" % pid], err)
        with open(os.path.join(self.tmp, "pysample-%d.1.txt" % pid)) as f:
            self.assertEqual(f.read(), "thread 1;later (b.py:1) 2\n")
        self.assertEqual(len(summary_lines(err, pid)), 2, err)
        self.assertIn("(all 2 profiles of 1 process)", err)

        # A name without %p: the started process's first profile gets it,
        # the later one the library's extra part after the pid.
        os.mkdir(os.path.join(self.tmp, "named"))
        code, out, err = self.record("-o", "prof.txt", "--", PYTHON, "-c", program,
                                     cwd=os.path.join(self.tmp, "named"))
        self.assertEqual(code, 0, err)
        pid = int(out)
        self.assertEqual(sorted(os.listdir(os.path.join(self.tmp, "named"))),
                         ["prof.%d.1.txt" % pid, "prof.txt"], err)
        for template, names in (("svg/%p.svg", ["%d.1.svg", "%d.svg"]),
                                ("pprof/x-%p.pb", ["x-%d.1.pb", "x-%d.pb"])):
            os.mkdir(os.path.join(self.tmp, os.path.dirname(template)))
            code, out, err = self.record("-o", template, "--format", os.path.splitext(template)[1][1:]
                                         .replace("pb", "pprof"), "--", PYTHON, "-c", program)
            self.assertEqual(code, 0, err)
            pid = int(out)
            self.assertEqual(sorted(os.listdir(os.path.join(self.tmp, os.path.dirname(template)))),
                             [n % pid for n in names], err)

    def test_formats(self):
        for fmt, ext in (("svg", ".svg"), ("speedscope", ".json"), ("pprof", ".pb")):
            with self.subTest(format=fmt):
                directory = os.path.join(self.tmp, fmt)
                os.mkdir(directory)
                code, out, err = self.record("--format", fmt, "--", PYTHON, "-c", "pass", cwd=directory)
                self.assertEqual(code, 0, err)
                (pid, path), = self.profiles(directory, r"^pysample-(\d+)%s$" % re.escape(ext)).items()
                with open(path, "rb") as f:
                    data = f.read()
                if fmt == "svg":
                    ET.fromstring(data)
                elif fmt == "speedscope":
                    doc = json.loads(data.decode())
                    self.assertEqual(doc["profiles"][0]["unit"], "milliseconds", "record knows the rate")
                    self.assertAlmostEqual(sum(sum(p["weights"]) for p in doc["profiles"]), 40.0)
                else:
                    prof = decode_pprof(data)
                    self.assertEqual(prof["sample_type"], [("samples", "count"), ("wall", "nanoseconds")])
                    self.assertEqual(prof["period"], 10000000, "100 Hz by default")
                self.assertEqual(os.listdir(directory), [os.path.basename(path)], "no leftovers")

    def test_output_extension_chooses_the_format(self):
        """py-spy's habit: `record -o profile.svg -- ...` is a flame graph."""
        checks = (("profile.svg", lambda d: ET.fromstring(d).tag == SVG_NS + "svg"),
                  ("profile.json", lambda d: "profiles" in json.loads(d.decode())),
                  ("profile.pb", lambda d: decode_pprof(d)["period"] == 10000000),
                  ("profile.pprof", lambda d: decode_pprof(d)["period"] == 10000000),
                  ("profile.folded", lambda d: d.startswith(b"thread ")),
                  ("profile.txt", lambda d: d.startswith(b"thread ")))
        for name, is_right in checks:
            with self.subTest(output=name):
                code, out, err = self.record("-o", name, "--", PYTHON, "-c", "pass")
                self.assertEqual(code, 0, err)
                with open(os.path.join(self.tmp, name), "rb") as f:
                    self.assertTrue(is_right(f.read()), "%s holds what its name says" % name)

    def test_format_and_extension_that_disagree_are_refused(self):
        code, out, err = self.record("-o", "profile.json", "--format", "svg", "--", PYTHON, "-c",
                                     "open('started', 'w')")
        self.assertEqual(code, 2, err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("pysample: -o profile.json names a speedscope file but --format is svg", err)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "started")), "the command is not run")
        # An extension that says nothing leaves --format in charge.
        code, out, err = self.record("-o", "profile.out", "-f", "flamegraph", "--", PYTHON, "-c", "pass")
        self.assertEqual(code, 0, err)
        with open(os.path.join(self.tmp, "profile.out"), "rb") as f:
            ET.fromstring(f.read())

    def test_unknown_placeholder_in_output_is_refused(self):
        """-o takes the placeholders PYSAMPLE_OUTPUT takes, and refuses any
        other as the library does, before the command runs: a %x kept as
        it is would name a file the user did not ask for."""
        for template in ("prof.%x.txt", "prof.%"):
            code, out, err = self.record("-o", template, "--", PYTHON, "-c", "open('started', 'w')")
            self.assertEqual(code, 2, err)
            self.assertEqual(err, "pysample: -o '%s' has an unknown %%-placeholder (known: %%p %%h %%t %%%%)\n"
                             % template)
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "started")), "the command is not run")
        code, out, err = self.record("-o", "prof.%p.%%.txt", "--", PYTHON, "-c", "pass")
        self.assertEqual(code, 0, err)
        self.assertTrue(any(re.match(r"^prof\.\d+\.%\.txt$", f) for f in os.listdir(self.tmp)),
                        os.listdir(self.tmp))

    def test_py_spy_short_flags_and_names(self):
        code, out, err = self.record("-r", "250", "-n", "-g", "--nolineno", "-t", "--nonblocking",
                                     "-f", "raw", "-o", "prof", "--", PYTHON, "-c", "pass")
        self.assertEqual(code, 0, err)
        with open(os.path.join(self.tmp, "prof")) as f:
            self.assertIn("env rate=250 mode=unset format=collapsed async=unset native=1 gil=1 lines=0",
                          f.read())
        code, out, err = self.record("-o", "native.txt", "-n", PYTHON, "-c", "pass")
        self.assertEqual(code, 0, err)
        with open(os.path.join(self.tmp, "native.txt")) as f:
            self.assertIn("native=1", f.read(), "-n takes no value: the command follows it")
        code, out, err = self.record("-i", "-o", "idle.txt", "--", PYTHON, "-c", "pass")
        self.assertEqual(code, 0, err)
        with open(os.path.join(self.tmp, "idle.txt")) as f:
            self.assertIn("mode=wall", f.read(), "--idle: idle threads too, which is wall mode")
        code, out, err = self.record("-i", "--mode", "cpu", "--", PYTHON, "-c", "pass")
        self.assertEqual(code, 2, err)
        self.assertIn("--idle (include idle threads) contradicts --mode cpu", err)
        code, out, err = self.record("-F", "--full-filenames", "--hideprogress", "--capture", "-o", "fn.txt",
                                     "--", PYTHON, "-c", "print('from the program')")
        self.assertEqual(code, 0, err)
        self.assertNotIn(b"from the program", out, "--capture discards the program's output")
        with open(os.path.join(self.tmp, "fn.txt")) as f:
            self.assertIn("lines=0", f.read(), "-F/--function aggregates by function")
        code, out, err = self.record("-f", "chrometrace", "--", PYTHON, "-c", "pass")
        self.assertEqual(code, 2, err)
        self.assertIn("unknown format 'chrometrace'", err)

    def test_no_subprocesses_keeps_the_started_process_only(self):
        program = ("import subprocess, sys\n"
                   "for _ in range(2): subprocess.run([sys.executable, '-c', 'pass'])")
        code, out, err = self.record("--no-subprocesses", "--", PYTHON, "-c", program)
        self.assertEqual(code, 0, err)
        self.assertEqual(len(self.profiles()), 1, err)
        self.assertIn("--no-subprocesses: left out the profiles of 2 other processes", err)
        code, out, err = self.record("-s", "--", PYTHON, "-c", program)
        self.assertEqual(code, 0, err)
        self.assertEqual(len(self.profiles()), 1 + 3, err)

    def test_unwritable_output_directory_is_refused_before_the_command_runs(self):
        """A directory the user cannot write: one line, exit 2, the command
        not started (it used to run, then a traceback and the profile lost)."""
        os.chmod(self.tmp, 0o755)
        locked = os.path.join(self.tmp, "locked")
        os.mkdir(locked, 0o555)
        started = os.path.join(self.tmp, "started")
        # (sh: nobody may not be allowed to run this test's Python)
        command = ["record", "-o", os.path.join(locked, "prof.svg"), "--", "/bin/sh", "-c",
                   "echo > %s; exit 3" % started]
        prefix = []
        if os.geteuid() == 0:
            # root writes anywhere: run as nobody, for whom 0555 means no.
            if not shutil.which("setpriv"):
                self.skipTest("running as root without setpriv")
            prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
            os.chmod(self.tmp, 0o777)
        lib = os.path.join(self.tmp, os.path.basename(self.lib))   # where nobody can read it
        shutil.copy(self.lib, lib)
        os.chmod(lib, 0o755)
        env = clean_env(PYSAMPLE_LIB=lib)
        code, out, err = run(prefix + [FRONT_END] + command, cwd=self.tmp, env=env)
        self.assertEqual(code, 2, err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertRegex(err, r"^pysample: cannot write .*locked/prof\.svg: .*locked: Permission denied "
                              r"\(the command was not started\)\n$")
        self.assertFalse(os.path.exists(started), "the command did not run")

    def test_profile_is_kept_when_writing_it_fails_after_the_run(self):
        """A failure after the run (here the command removed the output
        directory) keeps the profile at a path the message names, and the
        exit status stays the command's."""
        for fmt in ("collapsed", "svg"):
            with self.subTest(format=fmt):
                out_dir = os.path.join(self.tmp, "out-" + fmt)
                os.mkdir(out_dir)
                code, out, err = self.record("-f", fmt, "-o", os.path.join(out_dir, "prof"), "--", PYTHON, "-c",
                                             "import os; os.rmdir(%r); raise SystemExit(3)" % out_dir)
                self.assertEqual(code, 3, err)
                self.assertNotIn("Traceback", err)
                m = re.search(r"pysample: pid \d+: cannot write \S*prof: .*; its profile is kept at (\S+)\n", err)
                self.assertTrue(m, err)
                with open(m.group(1)) as f:
                    self.assertIn("fake.main (fake.py:1)", f.read())
                self.assertIn("pysample: the profiles not delivered are kept in %s\n"
                              % os.path.dirname(m.group(1)), err)
                self.assertNotIn("next:", err, "no hint at a file that is not there")
                shutil.rmtree(os.path.dirname(m.group(1)))

    def test_files_record_writes_are_private(self):
        """Profiles name files and functions: 0600 whatever the umask and the
        format, or what PYSAMPLE_FILE_MODE says (they used to be 0644)."""
        for env, want in (({}, 0o600), ({"PYSAMPLE_FILE_MODE": "0640"}, 0o640)):
            for name in ("p.txt", "p.svg", "p.json", "p.pb"):
                with self.subTest(output=name, env=env):
                    code, out, err = self.record("-o", name, "--", PYTHON, "-c", "import os; os.umask(0o022)",
                                                 env=env)
                    self.assertEqual(code, 0, err)
                    self.assertEqual(os.stat(os.path.join(self.tmp, name)).st_mode & 0o777, want, name)
        sys.path.insert(0, SCRIPTS)
        from pysample_tool import quality
        old = os.umask(0o022)
        try:
            path = quality.write_sidecar(os.path.join(self.tmp, "p.txt"), {"samples": "3"}, 42)
        finally:
            os.umask(old)
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600, "the --pid outputs' .quality.json")

    def test_pprof_comment_names_its_source_not_itself(self):
        code, out, err = self.record("-o", "prof.pb", "--", PYTHON, "-c", "pass")
        self.assertEqual(code, 0, err)
        with open(os.path.join(self.tmp, "prof.pb"), "rb") as f:
            comments = decode_pprof(f.read())["comments"]
        self.assertEqual(len(comments), 1, comments)
        self.assertRegex(comments[0], r"^converted by pysample \S+ from the profile of pid \d+$")

    def test_next_hint_names_the_busiest_process(self):
        """A server's master waits for its workers: the hint names the
        profile with the most samples, not the started process's."""
        code, out, err = self.record("--", PYTHON, "-c",
                                     "import os, subprocess, sys\n"
                                     "env = dict(os.environ, PYSAMPLE_FAKE_SAMPLES='30')\n"
                                     "child = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'],"
                                     " env=env, stdout=subprocess.PIPE)\n"
                                     "sys.stdout.write(child.stdout.decode())")
        self.assertEqual(code, 0, err)
        busy = int(out)
        self.assertEqual(len(self.profiles()), 2)
        self.assertIn("pysample: next: pysample flamegraph pysample-%d.txt -o flame.svg\n" % busy, err)

    def test_command_killed_by_a_signal(self):
        code, out, err = self.record("--", PYTHON, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
        self.assertEqual(code, 128 + signal.SIGTERM)
        self.assertIn("killed by SIGTERM", err)
        self.assertIn("no profile was written", err)

    def test_not_a_python_program(self):
        code, out, err = self.record("--", "sh", "-c", "exit 4")
        self.assertEqual(code, 4)
        self.assertIn("no profile was written", err)
        self.assertIn("Python program", err)
        self.assertEqual(os.listdir(self.tmp), [])

    def test_command_not_found(self):
        code, out, err = self.record("--", "no-such-command-pysample")
        self.assertEqual(code, 127)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("pysample: cannot run no-such-command-pysample", err)

    def test_py_file_runs_with_python_option(self):
        self.write("app.py", "print('app ran')\n")
        code, out, err = self.record("--python", PYTHON, "--", "app.py")
        self.assertEqual(code, 0, err)
        self.assertEqual(out, b"app ran\n")
        self.assertEqual(len(self.profiles()), 1)

    def test_command_without_double_dash(self):
        code, out, err = self.record("-q", PYTHON, "-c", "import sys; print(sys.argv[1:])", "-o", "x")
        self.assertEqual(code, 0, err)
        self.assertEqual(out, b"['-o', 'x']\n", "options after the command belong to the command")

    def test_preload_variables(self):
        code, out, err = self.record("-q", "--", PYTHON, "-c",
                                     "import os; print(os.environ.get('LD_PRELOAD') or "
                                     "os.environ.get('DYLD_INSERT_LIBRARIES')); "
                                     "print(os.environ.get('PYSAMPLE_TOOL_SCRIPT_DIR'))",
                                     env={"PYSAMPLE_LINES": "0"})
        self.assertEqual(code, 0, err)
        preload, script_dir = out.decode().splitlines()
        self.assertEqual(preload.split(":")[0], self.lib)
        self.assertEqual(script_dir, "None", "the front end's variable does not reach the command")

    def test_existing_preload_is_kept(self):
        if sys.platform == "darwin":
            self.skipTest("LD_PRELOAD test")
        code, out, err = self.record("-q", "--", PYTHON, "-c", "import os; print(os.environ['LD_PRELOAD'])",
                                     env={"LD_PRELOAD": self.lib + "-copy.so"})
        self.assertEqual(out.decode().strip(), "%s:%s-copy.so" % (self.lib, self.lib))

    def test_quiet(self):
        code, out, err = self.record("-q", "--", PYTHON, "-c", "pass")
        self.assertEqual((code, err), (0, ""))

    def test_demo_without_command(self):
        code, out, err = self.record(env={"PYSAMPLE_DEMO_SECONDS": "0.3"})
        self.assertEqual(code, 0, err)
        self.assertIn("profiling the bundled demo", err)
        self.assertIn(b"demo: ", out)
        self.assertEqual(len(self.profiles()), 1)

    def test_sigterm_is_passed_on_and_the_profile_kept(self):
        script = self.write("server.py", "import signal, sys, time\n"
                            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
                            "print('ready', flush=True)\n"
                            "time.sleep(60)\n")
        proc = subprocess.Popen([FRONT_END, "record", "--", PYTHON, script], cwd=self.tmp,
                                env=clean_env(PYSAMPLE_LIB=self.lib), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        self.assertEqual(proc.stdout.readline(), b"ready\n")
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=60), 0)
        err = proc.stderr.read().decode()
        self.assertEqual(len(self.profiles()), 1, err)
        proc.stdout.close()
        proc.stderr.close()

    def test_macos_sip_protected_interpreter_is_refused(self):
        """On macOS a command that starts through a SIP-protected binary loses
        DYLD_INSERT_LIBRARIES, so record says so instead of recording nothing
        (pysample_tool/sip.py; PYSAMPLE_TEST_UNAME=Darwin takes that path here)."""
        darwin = {"PYSAMPLE_TEST_UNAME": "Darwin"}
        script = self.write("via_env", "#!/usr/bin/env python3\nprint('ran')\n")
        os.chmod(script, 0o755)
        for args in (["--", "/usr/bin/python3", "-c", "print('ran')"],
                     ["--", script],
                     ["--python", "/usr/bin/python3", "--", "app.py"]):
            code, out, err = self.record(*args, env=darwin)
            self.assertEqual(code, 2, "%s: %s" % (args, err))
            self.assertIn("System Integrity Protection", err)
            self.assertIn("docs/macos.md", err)
            self.assertEqual(out, b"", "the command must not run")
            self.assertEqual(self.profiles(), {})
        err = self.record("--", script, env=darwin)[2]
        self.assertIn("/usr/bin/env (the #! line of %s)" % script, err)
        real = os.path.realpath(PYTHON)
        if real.startswith(("/usr/", "/bin/", "/sbin/", "/System/")):
            return  # no unprotected interpreter to show the check lets through
        code, out, err = self.record("--", real, "-c", "print('ran')", env=darwin)
        self.assertEqual((code, out), (0, b"ran\n"), err)


# ---------------------------------------------------------------------------
# The build dir: <builddir>/scripts/pysample and the real library
# ---------------------------------------------------------------------------

def summary_lines(err, pid):
    """record's summary lines for pid: `pid N: ...` or, with the command
    it saw the process run, `pid N (`python3 ...`): ...`."""
    return re.findall(r"^pysample: pid %d(?: \(`([^`\n]*)`\))?: .*$" % pid, err, re.M)


def needs_build_root(test):
    return unittest.skipUnless(BUILD_ROOT, "PYSAMPLE_TEST_BUILD_ROOT is not set (run through meson test)")(test)




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


class BuildDirTests(TempDirTestCase):
    @needs_build_root
    def test_build_dir_script_finds_the_module_and_library(self):
        script = os.path.join(BUILD_ROOT, "scripts", "pysample")
        self.assertTrue(os.access(script, os.X_OK), "%s is executable" % script)
        code, out, err = pysample("info", front_end=script)
        self.assertEqual(code, 0, err)
        text = out.decode()
        self.assertIn("tool module: %s\n" % os.path.join(SCRIPTS, "pysample_tool"), text)
        library = real_library(os.path.join(BUILD_ROOT, "lib"))
        if library:
            self.assertIn("library:     %s" % library, text)
        code, out, err = pysample("top", fixture("basic.txt"), front_end=script)
        self.assertEqual(code, 0, err)

    @needs_build_root
    def test_record_with_the_real_library(self):
        library = real_library(os.path.join(BUILD_ROOT, "lib"))
        if not library:
            self.skipTest("%s/lib/libpysample.so is not built yet: real record skipped" % BUILD_ROOT)
        script = os.path.join(BUILD_ROOT, "scripts", "pysample")
        code, out, err = pysample("record", "-o", "prof.txt", "--rate", "200", "--", PYTHON, "-c", SPIN,
                                  front_end=script, cwd=self.tmp)
        self.assertEqual(code, 0, err)
        profile = pysample_tool.parse_collapsed(os.path.join(self.tmp, "prof.txt"))
        functions = set((f.name, f.file) for _, stack, _ in profile.stacks for f in stack)
        self.assertIn(("spin", "<string>"), functions, err)
        threads = profile.threads()
        self.assertEqual(len(threads), 2, "the main thread and the spinner: %r" % threads)
        self.assertGreater(profile.total, 50, "SPIN runs until the library has taken 60 samples")
        self.assertIn("top functions by self samples", err)
        code, out, err = pysample("flamegraph", "prof.txt", "-o", "prof.svg", front_end=script, cwd=self.tmp)
        self.assertEqual(code, 0, err)
        ET.parse(os.path.join(self.tmp, "prof.svg"))


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

EXEC_FIRST = SPIN_UNTIL_SAMPLED + (
    "def before_exec():\n"
    "    spin_until_sampled()\n"
    "before_exec()\n"
    "print(os.getpid(), flush=True)\n"
    "os.execv(sys.executable, [sys.executable, sys.argv[1]])\n")

EXEC_SECOND = SPIN_UNTIL_SAMPLED + (
    "def after_exec():\n"
    "    spin_until_sampled()\n"
    "after_exec()\n")

FORKS = SPIN_UNTIL_SAMPLED + (
    "def child_work():\n"
    "    spin_until_sampled()\n"
    "def parent_work():\n"
    "    spin_until_sampled()\n"
    "children = []\n"
    "for how in ('_exit', 'return'):\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        child_work()\n"
    "        if how == '_exit':\n"
    "            os._exit(0)      # as multiprocessing's children end\n"
    "        sys.exit(0)\n"
    "    children.append(pid)\n"
    "for pid in children:\n"
    "    os.waitpid(pid, 0)\n"
    "parent_work()\n"
    "print(os.getpid(), *children)\n")

# A multiprocessing pool of two workers started by spawn or the fork server
# (argv[1]): each worker runs work_in_worker until it has been sampled (the
# pool's initializer, so both run it whoever takes the tasks).  Prints the
# pids of every Python process of the tree: the main program, the workers,
# the resource tracker and the fork server.
POOL = SPIN_UNTIL_SAMPLED + (
    "import multiprocessing as mp\n"
    "import multiprocessing.forkserver, multiprocessing.resource_tracker\n"
    "def work_in_worker():\n"
    "    spin_until_sampled()\n"
    "def task(n):\n"
    "    return n\n"
    "if __name__ == '__main__':\n"
    "    mp.set_start_method(sys.argv[1])\n"
    "    pool = mp.Pool(2, initializer=work_in_worker)\n"
    "    pool.map(task, range(4))\n"
    "    workers = [w.pid for w in pool._pool]\n"
    "    pool.close()\n"
    "    pool.join()\n"
    "    helpers = [mp.resource_tracker._resource_tracker._pid,\n"
    "               mp.forkserver._forkserver._forkserver_pid]\n"
    "    print(os.getpid(), ' '.join(map(str, workers)), ' '.join(str(p) for p in helpers if p), sep='|')\n")
# record -d: a spawn pool whose workers run until record has delivered their
# profile (prof.<pid>.txt), or 60 s.  Prints the workers' pids.
POOL_DURATION = (
    "import multiprocessing as mp, os, sys, time\n"
    "def worker_loop(_):\n"
    "    give_up = time.time() + 60\n"
    "    while not os.path.exists('prof.%d.txt' % os.getpid()) and time.time() < give_up:\n"
    "        time.sleep(0.01)\n"
    "    return os.getpid()\n"
    "if __name__ == '__main__':\n"
    "    mp.set_start_method('spawn')\n"
    "    time.sleep(0.3)\n"
    "    pool = mp.Pool(2)\n"
    "    workers = [w.pid for w in pool._pool]\n"
    "    pool.map(worker_loop, range(2), chunksize=1)\n"
    "    pool.close()\n"
    "    pool.join()\n"
    "    print(*workers)\n")


# An armed master that forks a child when the file fork-now appears; both run
# until the file stop appears.  Prints the master's pid, then the child's.
FORK_LATER = (
    "import os, sys, time\n"
    "def master_before_fork():\n"
    "    while not os.path.exists('fork-now'):\n"
    "        time.sleep(0.01)\n"
    "def child_after_start():\n"
    "    while not os.path.exists('stop'):\n"
    "        sum(range(1000))\n"
    "def master_after_fork():\n"
    "    while not os.path.exists('stop'):\n"
    "        time.sleep(0.01)\n"
    "print(os.getpid(), flush=True)\n"
    "master_before_fork()\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    child_after_start()\n"
    "    os._exit(0)\n"
    "print(pid, flush=True)\n"
    "master_after_fork()\n"
    "os.waitpid(pid, 0)\n")


# Two threads, each busy for a while and then on until the library has taken
# 60 more samples (of both threads), however loaded the machine.
SPIN = SPIN_UNTIL_SAMPLED + (
    "import threading\n"
    "def spin(seconds):\n"
    "    end = time.time() + seconds\n"
    "    while time.time() < end:\n"
    "        pass\n"
    "    spin_until_sampled(60)\n"
    "t = threading.Thread(target=spin, args=(0.4,), name='Spinner')\n"
    "t.start()\n"
    "spin(0.6)\n"
    "t.join()\n")


class RealRecordTests(TempDirTestCase):
    """record with the real library, where the library names the files:
    the image an exec starts and forked children must not be lost."""

    def setUp(self):
        self.library = real_library(os.path.join(BUILD_ROOT, "lib")) if BUILD_ROOT else None
        if not self.library:
            self.skipTest("the real library is not built (run through meson test)")
        TempDirTestCase.setUp(self)

    def record(self, *args):
        return pysample("record", *args, cwd=self.tmp, env=clean_env(PYSAMPLE_LIB=self.library))

    def functions(self, name):
        profile = pysample_tool.parse_collapsed(os.path.join(self.tmp, name))
        return set(f.name for _, stack, _ in profile.stacks for f in stack)

    def test_exec_into_another_python_keeps_both_profiles(self):
        first = self.write("first.py", EXEC_FIRST)
        second = self.write("second.py", EXEC_SECOND)
        code, out, err = self.record("--", PYTHON, first, second)
        self.assertEqual(code, 0, err)
        pid = int(out)
        self.assertEqual(sorted(n for n in os.listdir(self.tmp) if n.startswith("pysample-") and not n.endswith(".quality.json")),
                         ["pysample-%d.1.txt" % pid, "pysample-%d.txt" % pid], err)
        before, after = self.functions("pysample-%d.txt" % pid), self.functions("pysample-%d.1.txt" % pid)
        self.assertIn("before_exec", before)
        self.assertNotIn("after_exec", before)
        self.assertIn("after_exec", after)
        self.assertNotIn("before_exec", after)
        self.assertEqual(len(summary_lines(err, pid)), 2, err)

    def test_exec_with_an_output_name(self):
        first = self.write("first.py", EXEC_FIRST)
        second = self.write("second.py", EXEC_SECOND)
        code, out, err = self.record("-o", "prof.txt", "--", PYTHON, first, second)
        self.assertEqual(code, 0, err)
        pid = int(out)
        self.assertIn("before_exec", self.functions("prof.txt"))
        self.assertIn("after_exec", self.functions("prof.%d.1.txt" % pid), err)

    def test_duration_writes_the_profile_then_and_the_command_runs_on(self):
        """record -d 1 -- COMMAND: the profile of the first second is
        delivered while COMMAND runs on, and record exits with its status.
        The program waits for the profile to appear before its second
        phase, so the machine's load cannot move one into the other.  Three
        seconds, not one: under load, starting the interpreter took the whole
        first second, and first_phase had no sample."""
        program = ("import os, sys, time\n"
                   "def first_phase():\n"
                   "    give_up = time.time() + 60\n"
                   "    while not os.path.exists('prof.txt') and time.time() < give_up:\n"
                   "        sum(range(1000))\n"
                   "def second_phase():\n"
                   "    end = time.time() + 0.3\n"
                   "    while time.time() < end:\n"
                   "        sum(range(1000))\n"
                   "first_phase()\n"
                   "second_phase()\n"
                   "sys.stderr.write('program: done\\n')\n"
                   "sys.exit(3)\n")
        code, out, err = self.record("-d", "3", "-o", "prof.txt", "--", PYTHON, "-c", program)
        self.assertEqual(code, 3, err)
        runs_on = err.find("pysample: recorded the first 3 s; `python")
        self.assertIn("runs on (record waits for it; its later samples are not kept)", err)
        self.assertGreaterEqual(runs_on, 0, err)
        self.assertLess(runs_on, err.find("program: done"), "delivered before the command ended: " + err)
        functions = self.functions("prof.txt")
        self.assertIn("first_phase", functions)
        self.assertNotIn("second_phase", functions)

    def test_top_runs_a_command_and_shows_its_live_table(self):
        """`pysample top -- python3 app.py`, as with py-spy: a live table of
        the command, its output kept in a file, its exit status."""
        # Armed, the program samples only once top has connected: it runs
        # until the session has ticked 150 times (a table is 100), however
        # late top connects on a loaded machine.
        program = os.path.join(self.tmp, "app.py")
        with open(program, "w") as f:
            f.write("import sys, time\n"
                    "sys.path.insert(0, %r)\n"
                    "import sampled\n"
                    "def hot_function():\n"
                    "    sum(range(1000))\n"
                    "print('hello from the program')\n"
                    "first, give_up = None, time.time() + 60\n"
                    "while time.time() < give_up:\n"
                    "    hot_function()\n"
                    "    st = sampled.status()\n"
                    "    if st is not None and st.running:\n"
                    "        first = st.ticks if first is None else first\n"
                    "        if st.ticks - first >= 150:\n"
                    "            break\n"
                    "sys.exit(3)\n" % os.path.join(SOURCE_ROOT, "test", "integration", "programs"))
        code, out, err = pysample("top", "-n", "5", "--", PYTHON, program, cwd=self.tmp,
                                  env=clean_env(PYSAMPLE_LIB=self.library))
        self.assertEqual(code, 3, err)
        text = out.decode()
        self.assertRegex(text, r"pysample top: process \d+, Python ", err)
        self.assertRegex(text, r"\d+\s+\S+%\s+\d+\s+\S+%\s+hot_function \(" + re.escape(program) + r"\)")
        self.assertNotIn("hello from the program", text, "the table is not scrolled away")
        m = re.search(r"pysample: the output of `.*` is in (\S+)\n", err)
        self.assertTrue(m, err)
        with open(m.group(1)) as f:
            self.assertEqual(f.read(), "hello from the program\n")
        os.unlink(m.group(1))
        # --delay (py-spy's): a table every 0.2 s instead of every second.
        code, out, err = pysample("top", "--delay", "0.2", "-n", "1", "--", PYTHON, program, cwd=self.tmp,
                                  env=clean_env(PYSAMPLE_LIB=self.library))
        self.assertEqual(code, 3, err)
        self.assertGreaterEqual(out.decode().count("pysample top: process"), 4, out.decode() + err)

    def test_forked_children_get_their_own_profiles(self):
        program = self.write("forks.py", FORKS)
        code, out, err = self.record("--", PYTHON, program)
        self.assertEqual(code, 0, err)
        parent, *children = [int(p) for p in out.split()]
        self.assertEqual(sorted(n for n in os.listdir(self.tmp) if n.startswith("pysample-") and not n.endswith(".quality.json")),
                         sorted("pysample-%d.txt" % p for p in [parent] + children), err)
        self.assertIn("parent_work", self.functions("pysample-%d.txt" % parent))
        self.assertNotIn("child_work", self.functions("pysample-%d.txt" % parent),
                         "a child's samples stay the child's")
        for child in children:
            functions = self.functions("pysample-%d.txt" % child)
            self.assertIn("child_work", functions)
            self.assertNotIn("parent_work", functions)
        self.assertIn("(all 3 processes)", err)

    def pool_keeps_every_profile(self, start_method, helpers):
        """record -- a pool: every process's profile, each worker's with the
        function it ran, and the summary names each process's command."""
        program = self.write("pool.py", POOL)
        code, out, err = self.record("-o", "prof.%p.txt", "--", PYTHON, program, start_method)
        self.assertEqual(code, 0, err)
        (main,), workers, others = [[int(p) for p in part.split()] for part in out.decode().split("|")]
        self.assertEqual(len(workers), 2, out)
        self.assertEqual(len(others), helpers, "resource tracker and fork server: %s" % out)
        everyone = [main] + workers + others
        self.assertEqual(sorted(n for n in os.listdir(self.tmp) if n.startswith("prof.") and not n.endswith(".quality.json")),
                         sorted("prof.%d.txt" % p for p in everyone), err)
        for worker in workers:
            self.assertIn("work_in_worker", self.functions("prof.%d.txt" % worker), err)
        self.assertIn("(all %d processes)" % len(everyone), err)
        self.assertNotIn("cannot write", err)
        for pid in everyone:
            self.assertEqual(len(summary_lines(err, pid)), 1, err)
        self.assertRegex(summary_lines(err, main)[0], r"^python[0-9.]* .*pool\.py %s$" % start_method)
        for pid in workers + others:
            self.assertIn("-c from multiprocessing", summary_lines(err, pid)[0])

    def test_spawn_pool_keeps_every_profile(self):
        self.pool_keeps_every_profile("spawn", 1)

    def test_forkserver_pool_keeps_every_profile(self):
        self.pool_keeps_every_profile("forkserver", 2)

    def test_duration_keeps_the_workers_started_after_the_program(self):
        """record -d 2 -- a spawn pool: the workers, started after the main
        program, write their profiles later than it; record delivers them
        too, and nothing says `cannot write` when the pool ends."""
        program = self.write("pool.py", POOL_DURATION)
        code, out, err = self.record("-d", "2", "-o", "prof.%p.txt", "--", PYTHON, program)
        self.assertEqual(code, 0, err)
        for worker in [int(p) for p in out.split()]:
            self.assertTrue(os.path.exists(os.path.join(self.tmp, "prof.%d.txt" % worker)), err)
            self.assertEqual(len(summary_lines(err, worker)), 1, err)
        self.assertNotIn("cannot write", err)

    def end_master(self, master):
        """However the test went: the master and its child end."""
        self.write("fork-now", "")
        self.write("stop", "")
        try:
            master.wait(timeout=30)
        except subprocess.TimeoutExpired:
            master.kill()
            master.wait()

    def test_pid_subprocesses_catches_a_child_forked_during_the_recording(self):
        """record --pid MASTER -s: the armed master and a child it forks
        once the recording has begun, each in its own profile."""
        program = self.write("master.py", FORK_LATER)
        master = subprocess.Popen([PYTHON, program], cwd=self.tmp, stdout=subprocess.PIPE,
                                  env=clean_env(LD_PRELOAD=self.library, PYSAMPLE_ARM="1"))
        self.addCleanup(self.end_master, master)
        master_pid = int(master.stdout.readline())
        record = subprocess.Popen([FRONT_END, "record", "--pid", str(master_pid), "-s", "-d", "4",
                                   "-o", "t.%p.txt"], cwd=self.tmp, stderr=subprocess.PIPE,
                                  env=clean_env(PYSAMPLE_LIB=self.library))
        first = record.stderr.readline().decode()
        self.assertIn("recording process %d" % master_pid, first)
        self.write("fork-now", "")
        child = int(master.stdout.readline())
        err = first + record.communicate(timeout=120)[1].decode()
        self.assertEqual(record.returncode, 0, err)
        self.write("stop", "")
        master.stdout.close()
        self.assertEqual(sorted(n for n in os.listdir(self.tmp) if n.startswith("t.") and n.endswith(".txt")),
                         sorted("t.%d.txt" % p for p in (master_pid, child)), err)
        self.assertIn("master_after_fork", self.functions("t.%d.txt" % master_pid))
        self.assertIn("child_after_start", self.functions("t.%d.txt" % child))
        self.assertNotIn("master_after_fork", self.functions("t.%d.txt" % child))
        self.assertRegex(err, r"pysample: pid %d \(`python[^`]* .*master\.py`\), \d s: \d+ samples" % child)
        self.assertIn("(all 2 processes)", err)

    def test_old_python_named(self):
        """A Python the library refuses: the tool's note names its version
        (the library's own line said why) instead of asking whether it is
        a Python program at all."""
        import glob
        olds = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8.*/bin/python3")) +
                      glob.glob(os.path.expanduser("~/.pyenv/versions/2.7.*/bin/python2")))
        if not olds:
            self.skipTest("no Python 3.8 or 2.7 in ~/.pyenv")
        for old in olds:
            code, out, err = self.record("--", old, "-c", "import sys")
            version = os.path.basename(os.path.dirname(os.path.dirname(old)))[:3]
            self.assertEqual(code, 0, err)
            self.assertIn("runs Python %s, which libpysample does not profile" % version, err)
            self.assertNotIn("Python program", err)


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

# total before, after, change, [interval low, high], self before, after,
# verdict, function.
DIFF_ROW_RE = re.compile(r"^ *(\d+\.\d\d)% +(\d+\.\d\d)% +([-+]\d+\.\d\d)  \[([-+]\d+\.\d\d), ([-+]\d+\.\d\d)\] +"
                         r"(\d+\.\d\d)% +(\d+\.\d\d)%  (\S+) +(.*)$")


# A row of diff --time's table: base, head, verdict and function.
TIME_ROW_RE = re.compile(r"^ *(\d+\.\d+)s +(\d+\.\d+)s +[-+]\d+\.\d+s +\[[^]]*\] +(grew|shrank|unchanged) +(.*)$")


def diff_table(out):
    """{function: (total before, after, change, self before, after)} and
    {function: (interval low, high, verdict)} of diff's text table."""
    rows, verdicts = {}, {}
    for line in (out.decode() if isinstance(out, bytes) else out).splitlines():
        m = DIFF_ROW_RE.match(line)
        if m:
            g = m.groups()
            rows[g[8]] = (float(g[0]), float(g[1]), float(g[2]), float(g[5]), float(g[6]))
            verdicts[g[8]] = (float(g[3]), float(g[4]), g[7])
    return rows, verdicts


def function_shares(path, function):
    """(total %, self %) of a function (name, file) of a profile, counted
    here, independently of the tool: a stack counts for total when the
    function is on it once or more, for self when it is the innermost."""
    stacks = read_stacks(path)
    all_samples = sum(stacks.values())
    on = sum(n for (_, frames), n in stacks.items() if any(split_frame(f)[:2] == function for f in frames))
    top = sum(n for (_, frames), n in stacks.items() if frames and split_frame(frames[-1])[:2] == function)
    return 100.0 * on / all_samples, 100.0 * top / all_samples


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


class DiffTests(RecordedPairTestCase):
    def diff(self, *args):
        return pysample("diff", *args, cwd=self.dir)

    def table(self, out):
        return diff_table(out)[0]

    def test_table_numbers_are_the_shares_of_both_profiles(self):
        code, out, err = self.diff(self.base, self.head, "--top", "0")
        self.assertEqual(code, 0, err)
        rows = self.table(out)
        for name in ("render", "parse", "main", "spin_until_sampled", "<module>"):
            base_total, base_self = function_shares(self.base, self.function(name))
            head_total, head_self = function_shares(self.head, self.function(name))
            row = rows[self.label(name)]
            self.assertEqual(row, (round(base_total, 2), round(head_total, 2), round(head_total - base_total, 2),
                                   round(base_self, 2), round(head_self, 2)),
                             "%s: %r" % (name, row))
        # What the program did: render went from half to three quarters.
        # What the program did: render went from half to three quarters,
        # parse from half to a quarter, less the share start-up takes
        # (a loaded machine stretches it).
        self.assertGreater(rows[self.label("render")][2], 15.0, out.decode())
        self.assertLess(rows[self.label("parse")][2], -12.0, out.decode())
        # render grew; parse's share fell only because render's grew: its
        # share of the samples outside render is the same, so it is not
        # said to have shrunk.
        verdicts = diff_table(out)[1]
        self.assertEqual(verdicts[self.label("render")][2], "grew", out.decode())
        self.assertEqual(verdicts[self.label("parse")][2], "unchanged*", out.decode())
        self.assertEqual(out.decode().splitlines()[2].split("  ")[-1], self.label("render"),
                         "what grew comes first: %s" % out.decode())

    def test_top_limits_the_rows(self):
        code, out, err = self.diff(self.base, self.head, "--top", "2")
        self.assertEqual(code, 0, err)
        lines = out.decode().splitlines()
        self.assertEqual(len(self.table(out)), 2, out.decode())
        self.assertRegex(out.decode(), r"(?m)^\.\.\. \d+ more functions")
        self.assertTrue(lines[-1].startswith("verdict: "), lines[-1])

    def test_fail_over_is_the_ci_gate(self):
        code, out, err = self.diff(self.base, self.head, "--fail-over", "5")
        self.assertEqual(code, 1, err)
        lines = err.splitlines()
        low, high, verdict = diff_table(out)[1][self.label("render")]
        growth = self.table(out)[self.label("render")][2]
        self.assertEqual(len(lines), 1, "render alone grew by more than 5 points: %r" % err)
        self.assertTrue(lines[0].startswith("pysample: %s: total share grew by %.2f points" % (self.label("render"), growth)),
                        lines[0])
        self.assertIn("at least %.2f points at 99%% confidence, more than 5 points" % low, lines[0])
        self.assertIn("verdict: FAIL: 1 function grew by more than 5 points at 99% confidence", out.decode())
        # Over the interval's lower end, the gate passes.
        code, out, err = self.diff(self.base, self.head, "--fail-over", "%.2f" % (low + 0.1))
        self.assertEqual((code, err), (0, ""))
        self.assertIn("verdict: pass: no function grew by more than", out.decode())
        # The other way round, parse grew.
        code, out, err = self.diff(self.head, self.base, "--fail-over", "5")
        self.assertEqual(code, 1, err)
        self.assertEqual([l.split(": ")[1] for l in err.splitlines()], [self.label("parse")])

    def svg_boxes(self, root):
        """[(depth, title's first line, (fill rgb, title lines, samples))]"""
        group = root.find(SVG_NS + "g[@id='frames']")
        ys = sorted(set(float(g.find(SVG_NS + "rect").get("y")) for g in group), reverse=True)
        boxes = []
        for g in group.findall(SVG_NS + "g"):
            rect = g.find(SVG_NS + "rect")
            title = g.find(SVG_NS + "title").text.split("\n")
            depth = ys.index(float(rect.get("y")))
            rgb = tuple(int(v) for v in re.findall(r"\d+", rect.get("fill")))
            boxes.append((depth, title[0], (rgb, title, int(g.get(FG_NS + "w")))))
        return boxes

    def test_flame_graph_is_heads_shape_coloured_by_change(self):
        code, out, err = self.diff(self.base, self.head, "-o", "diff.svg")
        self.assertEqual(code, 0, err)
        root = ET.parse(os.path.join(self.dir, "diff.svg")).getroot()
        boxes = self.svg_boxes(root)
        head_total = sum(read_stacks(self.head).values())
        self.assertEqual(int(root.get(FG_NS + "total")), head_total, "HEAD's samples are the width")
        label = self.label
        render = [v for d, t, v in boxes if t == label("render")]
        parse = [v for d, t, v in boxes if t == label("parse")]
        self.assertEqual((len(render), len(parse)), (1, 1), sorted(boxes))
        (render_rgb, render_title, render_w), (parse_rgb, parse_title, _) = render[0], parse[0]
        self.assertGreater(render_rgb[0], render_rgb[2] + 100, "render grew: red, %r" % (render_rgb,))
        # parse's share fell because render's grew, not because it changed:
        # the neutral colour, never blue.
        self.assertEqual(parse_rgb, (235, 232, 225), "parse is unchanged: %r" % (parse_title,))
        for name, title in (("render", render_title), ("parse", parse_title)):
            base_total, base_self = function_shares(self.base, self.function(name))
            head_total, head_self = function_shares(self.head, self.function(name))
            self.assertTrue(title[1].startswith("total %.2f%% -> %.2f%% (%+.2f, 99%% interval ["
                                                % (base_total, head_total, head_total - base_total)), title)
        self.assertEqual(render_title[2], "grew", render_title)
        self.assertTrue(parse_title[2].startswith("unchanged (its share of the samples outside what grew"),
                        parse_title)
        # One function, two call paths, two colours: spin_until_sampled
        # above render grew, above parse did not change.
        spins = sorted((v for d, t, v in boxes if t == label("spin_until_sampled")),
                       key=lambda v: v[2])
        self.assertEqual(len(spins), 2, sorted(boxes))
        self.assertEqual(spins[0][0], (235, 232, 225), "under parse: unchanged")
        self.assertGreater(spins[1][0][0], spins[1][0][2], "under render: red")
        self.assertEqual(render_w, sum(n for (_, frames), n in read_stacks(self.head).items()
                                       if any(split_frame(f)[0] == "render" for f in frames)))
        self.assertIn("base.txt", root.find(SVG_NS + "text[@id='subtitle']").text)

    def test_the_same_profile_is_no_change(self):
        code, out, err = self.diff(self.head, self.head, "--fail-over", "0", "-o", "same.svg")
        self.assertEqual((code, err), (0, ""))
        for row in self.table(out).values():
            self.assertEqual(row[2], 0.0)
        self.assertEqual(set(v[2] for v in diff_table(out)[1].values()), {"unchanged"})
        boxes = self.svg_boxes(ET.parse(os.path.join(self.dir, "same.svg")).getroot())
        self.assertEqual(set(v[0] for d, t, v in boxes), {(235, 232, 225)}, "no change, one neutral colour")

    def test_per_thread_matches_threads_by_name(self):
        base = self.write("base.txt", "thread 10 (MainThread);main (/a.py:1);work (/a.py:5) 30\n"
                                      "thread 10 (MainThread);main (/a.py:1);idle (/a.py:9) 10\n"
                                      "thread 11 (Worker);run (/w.py:1) 60\n")
        head = self.write("head.txt", "thread 20 (MainThread);main (/a.py:2);work (/a.py:6) 10\n"
                                      "thread 20 (MainThread);main (/a.py:2);idle (/a.py:9) 10\n"
                                      "thread 21 (Worker);run (/w.py:1) 20\n")
        code, out, err = pysample("diff", base, head, "--per-thread", "--top", "0")
        self.assertEqual(code, 0, err)
        rows = self.table(out)
        # MainThread: work 75% of its 40 samples, then 50% of its 20.
        self.assertEqual(rows["work (/a.py) [MainThread]"], (75.0, 50.0, -25.0, 75.0, 50.0))
        self.assertEqual(rows["idle (/a.py) [MainThread]"], (25.0, 50.0, 25.0, 25.0, 50.0))
        self.assertEqual(rows["run (/w.py) [Worker]"], (100.0, 100.0, 0.0, 100.0, 100.0))
        # Merged, work is a share of everything: 30% of 100, 25% of 40.
        code, out, err = pysample("diff", base, head, "--top", "0")
        self.assertEqual(self.table(out)["work (/a.py)"][:3], (30.0, 25.0, -5.0))

    def test_native_addresses_are_merged_per_object(self):
        # A rebuilt extension's code moves: by address nothing would match.
        base = self.write("nbase.txt", "thread 1;main (/a.py:1);libx.so+0x10 5\n"
                                       "thread 1;main (/a.py:1);libx.so+0x20 5\n")
        head = self.write("nhead.txt", "thread 1;main (/a.py:1);libx.so+0x30 10\n")
        code, out, err = pysample("diff", base, head, "--top", "0")
        self.assertEqual(code, 0, err)
        self.assertEqual(self.table(out)["[libx.so] (libx.so)"], (100.0, 100.0, 0.0, 100.0, 100.0))
        code, out, err = pysample("diff", base, head, "--top", "0", "--addresses")
        rows = self.table(out)
        self.assertEqual(rows["libx.so+0x30 (libx.so)"][:3], (0.0, 100.0, 100.0))
        self.assertEqual(rows["libx.so+0x10 (libx.so)"][:3], (50.0, 0.0, -50.0))

    def test_bad_input_is_one_line(self):
        for args, words in (((self.base, "missing.txt"), ("missing.txt", "No such file")),
                            ((fixture("empty.txt"), self.head), ("empty.txt", "empty profile")),
                            ((self.base, self.head, "--fail-over", "lots"), ("--fail-over",)),
                            ((self.base, self.head, "--fail-over", "-1"), ("--fail-over",))):
            with self.subTest(args=args):
                code, out, err = self.diff(*args)
                self.assertEqual(code, 2, err)
                self.assertEqual(len(err.splitlines()), 1, err)
                self.assertTrue(err.startswith("pysample: "), err)
                for word in words:
                    self.assertIn(word, err)
                self.assertEqual(out, b"")


# diff's statistics on synthetic profiles: counts chosen so that the answer
# is known, checked against the formulas computed here.

def wilson(k, n, z):
    p = float(k) / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * (p * (1 - p) / n + z * z / (4.0 * n * n)) ** 0.5
    return centre - half, centre + half


def newcombe(kb, nb, kh, nh, z):
    """Newcombe's hybrid score interval of kh/nh - kb/nb, in points."""
    pb, ph = float(kb) / nb, float(kh) / nh
    (lb, ub), (lh, uh) = wilson(kb, nb, z), wilson(kh, nh, z)
    d = ph - pb
    return (100 * (d - ((ph - lh) ** 2 + (ub - pb) ** 2) ** 0.5), 100 * (d + ((uh - ph) ** 2 + (pb - lb) ** 2) ** 0.5))


def folded(**counts):
    """A profile of one thread: name=samples, each `main;name`; names that
    start with imp_ are imports (under <frozen importlib._bootstrap>)."""
    lines = []
    for name, n in sorted(counts.items()):
        if name.startswith("imp_"):
            lines.append("thread 1 (MainThread);<module> (/a.py:1);_find_and_load (<frozen importlib._bootstrap>:1);"
                         "<module> (/lib/%s.py:1) %d" % (name, n))
        elif n:
            lines.append("thread 1 (MainThread);<module> (/a.py:1);main (/a.py:2);%s (/a.py:3) %d" % (name, n))
    return "\n".join(lines) + "\n"


Z99 = 2.5758293035489


def read_text(path):
    with open(path) as f:
        return f.read()


class GateStatsTests(TempDirTestCase):
    def diff(self, *args):
        code, out, err = pysample("diff", *args, cwd=self.tmp)
        return code, out.decode(), err

    def verdicts(self, *args):
        code, out, err = self.diff(*(args + ("--top", "0")))
        self.assertIn(code, (0, 1), err)
        return diff_table(out)

    def test_counting_noise_is_inside_the_interval(self):
        # work: 20% -> 30% of 200 samples is within what counting explains
        # at 99%; at ten times the samples it is not.
        for scale, verdict in ((1, "unchanged"), (10, "grew")):
            base = self.write("b%d.txt" % scale, folded(work=40 * scale, rest=160 * scale))
            head = self.write("h%d.txt" % scale, folded(work=60 * scale, rest=140 * scale))
            rows, verdicts = self.verdicts(base, head)
            low, high, said = verdicts["work (/a.py)"]
            want = newcombe(40 * scale, 200 * scale, 60 * scale, 200 * scale, Z99)
            self.assertAlmostEqual(low, want[0], delta=0.006)
            self.assertAlmostEqual(high, want[1], delta=0.006)
            self.assertEqual(said, verdict, (scale, low, high))
            self.assertEqual(rows["work (/a.py)"][:3], (20.0, 30.0, 10.0))
        # A lower confidence, a narrower interval: 80% calls the small run's
        # change a change.
        rows, verdicts = self.verdicts(os.path.join(self.tmp, "b1.txt"), os.path.join(self.tmp, "h1.txt"),
                                       "--confidence", "80")
        self.assertEqual(verdicts["work (/a.py)"][2], "grew")
        # A function seen in neither: 0 of 200 against 3 of 200 is nothing.
        rows, verdicts = self.verdicts(self.write("z0.txt", folded(work=200)),
                                       self.write("z3.txt", folded(work=197, rare=3)))
        self.assertEqual(verdicts["rare (/a.py)"][2], "unchanged")

    def test_others_growing_is_not_shrinking(self):
        # render three times slower; parse and the imports took as long.
        base = self.write("base.txt", folded(render=500, parse=500, imp_json=100))
        head = self.write("head.txt", folded(render=1500, parse=500, imp_json=100))
        code, out, err = self.diff(base, head, "--top", "0", "-o", "d.svg", "--fail-over", "5")
        self.assertEqual(code, 1, err)
        rows, verdicts = diff_table(out)
        self.assertLess(rows["parse (/a.py)"][2], -20, "parse's share fell by a lot: %r" % rows)
        self.assertEqual(verdicts["render (/a.py)"][2], "grew")
        for name in ("parse (/a.py)", "<module> (/lib/imp_json.py)", "_find_and_load (<frozen importlib._bootstrap>)"):
            self.assertEqual(verdicts[name][2], "unchanged*", out)
        self.assertIn("* judged on its share of the samples outside the call paths that grew (600 -> 600 samples)",
                      out)
        self.assertEqual([l.split(": ")[1] for l in err.splitlines()], ["render (/a.py)"])
        root = ET.parse(os.path.join(self.tmp, "d.svg")).getroot()
        fills = {}
        for g in root.find(SVG_NS + "g[@id='frames']").findall(SVG_NS + "g"):
            fills[g.find(SVG_NS + "title").text.split("\n")[0]] = g.find(SVG_NS + "rect").get("fill")
        self.assertEqual(fills["parse (/a.py)"], "rgb(235,232,225)", "parse is not painted shrank")
        self.assertNotEqual(fills["render (/a.py)"], "rgb(235,232,225)")
        # parse really twice as fast, render unchanged... and then render
        # three times slower: parse's share of the rest halved.
        head = self.write("head2.txt", folded(render=1500, parse=250, imp_json=100))
        rows, verdicts = self.verdicts(base, head)
        self.assertEqual(verdicts["parse (/a.py)"][2], "shrank*")

    def test_several_runs_spread_widens_the_interval(self):
        runs = [self.write("b%d.txt" % i, folded(work=w, rest=1000 - w)) for i, w in enumerate((200, 300, 400))]
        head = self.write("h.txt", folded(work=300, rest=700))
        pooled = self.write("pooled.txt", "".join(read_text(p) for p in runs))
        _, one = self.verdicts(pooled, head)
        _, three = self.verdicts(*(runs + ["--", head]))
        self.assertGreater(three["work (/a.py)"][1] - three["work (/a.py)"][0],
                           2 * (one["work (/a.py)"][1] - one["work (/a.py)"][0]),
                           "runs 10 points apart: the interval is wider than counting's (%r, %r)" % (one, three))
        # Runs that agree exactly have no spread: the same as one pooled run.
        same = [self.write("s%d.txt" % i, folded(work=300, rest=700)) for i in range(3)]
        pooled = self.write("spooled.txt", "".join(read_text(p) for p in same))
        _, one = self.verdicts(pooled, head)
        _, three = self.verdicts("--base", same[0], "--base", same[1], "--base", same[2], head)
        self.assertEqual(one["work (/a.py)"], three["work (/a.py)"])
        code, out, err = self.diff(*(same + ["--", head, "--top", "1"]))
        self.assertEqual(code, 0, err)
        self.assertTrue(out.startswith("3 runs (s0.txt, s1.txt, s2.txt) -> %s: 3,000 -> 1,000 samples" % head), out)

    def test_run_arguments(self):
        a, b, c = (self.write(n, folded(work=10)) for n in ("a.txt", "b.txt", "c.txt"))
        for args in ((a, b, c), (a,), ("--base", a)):
            code, out, err = self.diff(*args)
            self.assertEqual((code, out, len(err.splitlines())), (2, "", 1), err)
            self.assertTrue(err.startswith("pysample: "), err)
        code, out, err = self.diff(a, "--", b, c, "--top", "1", "--format", "markdown")
        self.assertEqual(code, 0, err)
        self.assertIn("a.txt -&gt; 2 runs (b.txt, c.txt)", out)

    def test_focus_and_exclude_come_before_the_shares(self):
        base = self.write("base.txt", folded(work=50, idle=25, imp_json=25))
        head = self.write("head.txt", folded(work=50, idle=50, imp_json=100))
        rows, _ = self.verdicts(base, head, "--exclude", "<frozen importlib")
        self.assertEqual(rows["work (/a.py)"][:2], (66.67, 50.0))
        self.assertNotIn("_find_and_load (<frozen importlib._bootstrap>)", rows)
        rows, _ = self.verdicts(base, head, "--focus", r"^(work|idle) ")
        self.assertEqual(rows["idle (/a.py)"][:2], (33.33, 50.0))
        self.assertEqual(rows["main (/a.py)"][:2], (100.0, 100.0))
        rows, _ = self.verdicts(base, head, "--focus", "work", "--focus", "idle", "--exclude", "idle")
        self.assertEqual(list(rows.keys()).count("idle (/a.py)"), 0)
        self.assertEqual(rows["work (/a.py)"][:2], (100.0, 100.0))
        for args, word in ((("--focus", "("), "--focus"), (("--focus", "nothing-here"), "no samples left")):
            code, out, err = self.diff(base, head, *args)
            self.assertEqual((code, out, len(err.splitlines())), (2, "", 1), err)
            self.assertIn(word, err)

    def test_markdown_is_a_table_and_a_verdict(self):
        base = self.write("base.txt", folded(render=500, parse=500, **{"a|b": 20}))
        head = self.write("head.txt", folded(render=1500, parse=500, **{"a|b": 20}))
        code, out, err = self.diff(base, head, "--format", "markdown", "--fail-over", "5", "--top", "0")
        self.assertEqual(code, 1, err)
        lines = out.splitlines()
        self.assertIn("Verdict: **FAIL**: 1 function grew by more than 5 points at 99% confidence: render (/a.py)",
                      lines)
        table = [l for l in lines if l.startswith("|")]
        cells = [[c.strip() for c in re.split(r"(?<!\\)\|", l)[1:-1]] for l in table]
        self.assertEqual(cells[0], ["Function", "Base", "Head", "Change", "99% interval", "Verdict"])
        self.assertTrue(all(re.match(r"^-+:?$|^---$", c) for c in cells[1]), cells[1])
        self.assertTrue(all(len(row) == 6 for row in cells), cells)
        by_name = dict((row[0], row) for row in cells[2:])
        self.assertEqual(by_name["`render (/a.py)`"][5], "**grew (over 5 points)**")
        self.assertEqual(by_name["`a\\|b (/a.py)`"][5], "unchanged*")
        self.assertEqual(by_name["`<module> (/a.py)`"][1:4], ["100.00%", "100.00%", "+0.00"])
        self.assertEqual(len(by_name), 5, by_name)   # render, parse, a|b, main, <module>, and nothing more
        self.assertRegex(by_name["`render (/a.py)`"][4], r"^\[\+\d+\.\d\d, \+\d+\.\d\d\]$")

    def test_time_from_the_quality_figures(self):
        base = self.write("base.txt", folded(work=100, other=100))
        head = self.write("head.txt", folded(work=300, other=100))
        for path in (base, head):
            self.write(os.path.basename(path) + ".quality.json",
                       json.dumps({"mode": "wall", "requested_rate_hz": 100, "achieved_rate_hz": 100.0}))
        code, out, err = self.diff(base, head, "--time", "--top", "0", "--fail-over", "1s")
        self.assertEqual(code, 1, err)
        rows = {}
        for line in out.splitlines()[1:]:
            m = re.match(r"^ +(\d+\.\d+)s +(\d+\.\d+)s +([-+]\d+\.\d+)s  \[([-+]\d+\.\d+)s, ([-+]\d+\.\d+)s\] +(\S+) +(.*)$",
                         line)
            if m:
                rows[m.group(7)] = m.groups()[:6]
        self.assertEqual(rows["work (/a.py)"][:3], ("1.000", "3.000", "+2.000"))
        self.assertEqual(rows["work (/a.py)"][5], "grew")
        # other's share fell from 50% to 25%; its time did not move.
        self.assertEqual(rows["other (/a.py)"][:3], ("1.000", "1.000", "+0.000"))
        self.assertEqual(rows["other (/a.py)"][5], "unchanged")
        self.assertIn("work (/a.py): time grew by 2.000s (1.000s -> 3.000s), at least", err)
        # cpu mode: a sample is 1/requested rate of CPU time; a seconds
        # limit implies --time; --rate stands in for a missing sidecar.
        self.write("head.txt.quality.json", json.dumps({"mode": "cpu", "requested_rate_hz": 50}))
        code, out, err = self.diff(base, head, "--top", "0", "--fail-over", "3500ms")
        self.assertEqual(code, 1, err)
        self.assertIn("1.000s -> 6.000s", err)
        os.unlink(head + ".quality.json")
        code, out, err = self.diff(base, head, "--time")
        self.assertEqual((code, out, len(err.splitlines())), (2, b"".decode(), 1), err)
        self.assertIn("--rate", err)
        code, out, err = self.diff(base, head, "--time", "--rate", "200", "--top", "1")
        self.assertEqual(code, 0, err)
        self.assertIn("   0.500s    1.500s   +1.000s", out)
        code, out, err = self.diff(base, head, "--time", "--fail-over", "5")
        self.assertEqual(code, 2, err)


# A program of the standard library's: five functions called in turn for a
# number of rounds, recorded in CPU time (which a loaded machine does not
# stretch, unlike wall-clock time) so that its shares and seconds hold.
# SLOW=2 makes tables() do twice the work per call: a real 2x slowdown of
# one function.  A round takes about 6 ms of CPU.
STDLIB_PROGRAM = (
    "import io, sys\n"
    "import csv, difflib, fractions, json, statistics\n"
    "SLOW = int(sys.argv[2])\n"
    "DATA = [{'id': i, 'name': 'item%d' % i, 'tags': ['a', 'b'], 'price': i * 1.5} for i in range(300)]\n"
    "TEXT = json.dumps(DATA)\n"
    "def encode():\n"
    "    json.dumps(DATA)\n"
    "def decode():\n"
    "    json.loads(TEXT)\n"
    "def tables():\n"
    "    for _ in range(2 * SLOW):\n"
    "        out = io.StringIO()\n"
    "        w = csv.writer(out)\n"
    "        for row in DATA:\n"
    "            w.writerow(row.values())\n"
    "def maths():\n"
    "    statistics.mean(fractions.Fraction(i, 7) for i in range(60))\n"
    "def text():\n"
    "    difflib.SequenceMatcher(None, 'abcdefghij' * 12, 'abcdxfghij' * 12).ratio()\n"
    "def main(rounds):\n"
    "    for _ in range(rounds):\n"
    "        encode(); decode(); tables(); maths(); text()\n"
    "main(int(sys.argv[1]))\n")

# The imports and the interpreter's start-up: what varies most between two
# runs of one program, and what a gate on the program's work leaves out.
NO_IMPORTS = "<frozen "


class GateTests(TempDirTestCase):
    """diff's gate on real recordings of one standard-library program: runs
    of ~100 samples (200 Hz) and ~1,200 (1 kHz), and a run with tables()
    twice as slow.  With ~550 samples a run (235 rounds on this machine
    kind when idle) tables' growth, 11-17 points, had a 99 % interval
    reaching below 5 points in 1 run of 4: 500 rounds."""

    RUNS = (("small1", 200, 170, 1), ("small2", 200, 170, 1), ("big1", 1000, 500, 1),
            ("big2", 1000, 500, 1), ("slow", 1000, 500, 2))

    @classmethod
    def setUpClass(cls):
        library = built_library()
        cls.dir = tempfile.mkdtemp(prefix="pysample-gate-")
        with open(os.path.join(cls.dir, "prog.py"), "w") as f:
            f.write(STDLIB_PROGRAM)
        for name, rate, rounds, slow in cls.RUNS:
            # CPU time, as docs/ci.md's gate: a wall-clock sample of a thread
            # the kernel preempted falls where it stopped for as long as it
            # waits, so on a loaded machine samples come in clumps and vary
            # more than counting says.
            code, out, err = pysample("record", "-q", "--mode", "cpu", "--rate", str(rate), "-o", name + ".txt",
                                      "--", PYTHON, "prog.py", str(rounds), str(slow), cwd=cls.dir,
                                      env=clean_env(PYSAMPLE_LIB=library))
            if code != 0:
                raise AssertionError("record %s: %s" % (name, err))
        cls.path = dict((name, os.path.join(cls.dir, name + ".txt")) for name, _, _, _ in cls.RUNS)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(getattr(cls, "dir", ""), True)

    def diff(self, *args):
        code, out, err = pysample("diff", *args, cwd=self.dir)
        return code, out.decode(), err

    def tables(self):
        return "tables (%s)" % os.path.join(self.dir, "prog.py")

    def test_two_runs_of_the_same_program_pass(self):
        for a, b in (("small1", "small2"), ("big1", "big2")):
            with self.subTest(runs=(a, b)):
                code, out, err = self.diff(self.path[a], self.path[b], "--fail-over", "5", "--exclude", NO_IMPORTS)
                self.assertEqual((code, err), (0, ""), out)
                self.assertIn("verdict: pass: no function grew by more than 5 points at 99% confidence", out)

    def test_a_function_twice_as_slow_is_flagged(self):
        code, out, err = self.diff(self.path["big1"], self.path["slow"], "--fail-over", "5", "--exclude", NO_IMPORTS)
        self.assertEqual(code, 1, out)
        self.assertEqual([l.split(": ")[1] for l in err.splitlines()], [self.tables()], err)
        rows, verdicts = diff_table(out)
        before, after = rows[self.tables()][:2]
        # Twice the work in one of five parts: its share goes from s to
        # 2s/(1+s).
        self.assertAlmostEqual(after, 100 * 2 * before / (100 + before), delta=8, msg=out)
        self.assertGreater(verdicts[self.tables()][0], 5)

    def test_several_base_runs(self):
        code, out, err = self.diff(self.path["big1"], self.path["big2"], "--", self.path["slow"], "--fail-over", "5",
                                   "--exclude", NO_IMPORTS)
        self.assertEqual(code, 1, out)
        self.assertEqual([l.split(": ")[1] for l in err.splitlines()], [self.tables()], err)
        self.assertTrue(out.startswith("2 runs (big1.txt, big2.txt) -> %s" % self.path["slow"]), out)
        code, out, err = self.diff("--base", self.path["big1"], "--base", self.path["small1"], self.path["big2"],
                                   self.path["small2"], "--fail-over", "5", "--exclude", NO_IMPORTS)
        self.assertEqual((code, err), (0, ""), out)

    def test_time_where_the_profiles_carry_it(self):
        # record keeps the library's .quality.json beside each profile.
        with open(self.path["big1"] + ".quality.json") as f:
            self.assertGreater(json.load(f)["achieved_rate_hz"], 0)
        # HEAD is big1 with tables' samples doubled and the same sidecar:
        # what two runs would give if only tables changed.  Two real runs
        # are no test of seconds: a whole run's CPU time varies more than
        # counting says on a shared machine (seen: 1,160 and 2,071 samples
        # for 1.4x the work; text "shrank" 0.331s -> 0.248s in CI), which
        # is what several runs a side are for (docs/tools.md).
        prog = os.path.join(self.dir, "prog.py")
        doubled = os.path.join(self.dir, "doubled.txt")
        with open(self.path["big1"]) as src, open(doubled, "w") as dst:
            for line in src:
                stack, count = line.rstrip("\n").rsplit(" ", 1)
                if ";tables (%s:" % prog in stack:
                    count = str(2 * int(count))
                dst.write("%s %s\n" % (stack, count))
        shutil.copy(self.path["big1"] + ".quality.json", doubled + ".quality.json")
        code, out, err = self.diff(self.path["big1"], doubled, "--fail-over", "100ms", "--exclude", NO_IMPORTS,
                                   "--top", "0")
        # tables, and maybe its callers, which grew by as much in seconds
        # but whose intervals are wider.
        flagged = set(l.split(": ")[1] for l in err.splitlines())
        self.assertIn(self.tables(), flagged, err)
        self.assertLessEqual(flagged, {self.tables(), "main (%s)" % prog, "<module> (%s)" % prog}, err)
        self.assertEqual(code, 1, out)
        rows = dict((m.group(4), (float(m.group(1)), float(m.group(2)), m.group(3)))
                    for m in map(TIME_ROW_RE.match, out.splitlines()) if m)
        # A side's seconds are the function's samples times the length of
        # a sample, counted here: in cpu mode 1/the rate asked of CPU time.
        with open(self.path["big1"] + ".quality.json") as f:
            period = 1.0 / json.load(f)["requested_rate_hz"]
        for function in ("text", "tables"):
            for side, path in ((0, self.path["big1"]), (1, doubled)):
                on = sum(n for (_, frames), n in read_stacks(path).items()
                         if any(split_frame(fr)[:2] == (function, prog) for fr in frames)
                         and not any(NO_IMPORTS in fr for fr in frames))
                self.assertAlmostEqual(rows["%s (%s)" % (function, prog)][side], on * period, delta=0.0006,
                                       msg=out)
        # In seconds, what did not change did not change, although its share
        # fell.
        self.assertEqual(rows["text (%s)" % prog][2], "unchanged", out)
        self.assertLess(function_shares(doubled, ("text", prog))[0], function_shares(self.path["big1"],
                                                                                     ("text", prog))[0] - 3)


class LinesTests(RecordedPairTestCase):
    def lines(self, *args):
        code, out, err = pysample("lines", *args, cwd=self.dir)
        return code, out.decode(), err

    def test_samples_per_line_of_a_recorded_profile(self):
        code, out, err = self.lines(self.head, "prog.py")
        self.assertEqual(code, 0, err)
        stacks = read_stacks(self.head)
        total = sum(stacks.values())
        rows = {}
        for text in out.splitlines()[2:]:
            m = re.match(r"^ {0,6}(\d+)? +(?:(\d+\.\d)%)? +(\d+)? +(?:(\d+\.\d)%)? +(\d+)  (.*)$", text)
            self.assertIsNotNone(m, text)
            rows[int(m.group(5))] = (m.group(1), m.group(3), m.group(6))
        source = DIFF_HEAD.splitlines()
        self.assertEqual(sorted(rows), list(range(1, len(source) + 1)), "every line of the file, in order")
        for number, (own, on, text) in rows.items():
            self.assertEqual(text, source[number - 1])
            here = (self.program, number)
            expect_self = sum(n for (_, fr), n in stacks.items() if split_frame(fr[-1])[1:] == here)
            expect_total = sum(n for (_, fr), n in stacks.items() if any(split_frame(f)[1:] == here for f in fr))
            if expect_total:
                self.assertEqual((int(own), int(on)), (expect_self, expect_total), "line %d" % number)
            else:
                self.assertEqual((own, on), (None, None), "line %d has no samples" % number)
        # The slow call's line has three times the fast one's samples
        # (start-up, whose length a loaded machine stretches, has neither).
        slow = source.index("    spin_until_sampled(180)") + 1
        fast = source.index("    spin_until_sampled(60)") + 1
        self.assertGreater(int(rows[slow][1]), 2.5 * int(rows[fast][1]), out)
        self.assertGreater(int(rows[fast][1]), 30, out)
        self.assertLessEqual(int(rows[slow][1]), total, out)

    def test_sampled_only_and_a_path_that_ends_with_the_frames_file(self):
        code, out, err = self.lines(self.head, self.program, "--sampled")
        self.assertEqual(code, 0, err)
        numbers = [int(l.split()[4]) for l in out.splitlines()[2:]]
        self.assertTrue(numbers and numbers == sorted(numbers), out)
        for text in out.splitlines()[2:]:
            self.assertRegex(text, r"^ *\d+ +\d+\.\d% +\d+ +\d+\.\d% ")

    def test_without_the_source_the_sampled_lines_are_listed(self):
        path = self.write("p.txt", "thread 1;main (/gone/app.py:3);f (/gone/app.py:7) 3\nthread 1;main (/gone/app.py:4) 1\n")
        code, out, err = pysample("lines", path, "app.py")
        self.assertEqual(code, 0, err)
        lines = out.decode().splitlines()
        self.assertIn("source not found", lines[1])
        self.assertEqual([l.split() for l in lines[3:]],
                         [["0", "0.0%", "3", "75.0%", "3"], ["1", "25.0%", "1", "25.0%", "4"],
                          ["3", "75.0%", "3", "75.0%", "7"]])

    def test_bad_input_is_one_line(self):
        two = self.write("two.txt", "thread 1;f (/x/app.py:1) 1\nthread 1;g (/y/app.py:1) 1\n")
        for args, words in (((self.head, "nothere.py"), ("nothere.py", "no samples", "prog.py")),
                            ((two, "app.py"), ("matches 2 files", "/x/app.py", "/y/app.py")),
                            ((fixture("nolines.txt"), "main.py"), ("no line numbers",)),
                            (("missing.txt", "prog.py"), ("missing.txt", "No such file")),
                            ((fixture("empty.txt"), "prog.py"), ("empty profile",))):
            with self.subTest(args=args):
                code, out, err = self.lines(*args)
                self.assertEqual((code, out), (2, ""), err)
                self.assertEqual(len(err.splitlines()), 1, err)
                self.assertTrue(err.startswith("pysample: "), err)
                for word in words:
                    self.assertIn(word, err)


# ---------------------------------------------------------------------------
# meson install
# ---------------------------------------------------------------------------

class InstallTests(TempDirTestCase):
    def setUp(self):
        if not (BUILD_ROOT and CONFIG.get("PYSAMPLE_TEST_MESON") and CONFIG.get("PYSAMPLE_TEST_PREFIX")):
            self.skipTest("run through meson test: the build dir and install layout are not known")
        TempDirTestCase.setUp(self)

    def installed(self, option):
        """DESTDIR + prefix + an install dir option."""
        path = os.path.join(CONFIG["PYSAMPLE_TEST_PREFIX"], CONFIG[option])
        return os.path.join(self.destdir, path.lstrip("/"))

    def test_install_and_run_the_installed_command(self):
        self.destdir = os.path.join(self.tmp, "dest")
        code, out, err = run([CONFIG["PYSAMPLE_TEST_MESON"], "install", "-C", BUILD_ROOT, "--destdir",
                              self.destdir, "--quiet"], timeout=600)
        self.assertEqual(code, 0, "meson install failed (does the whole project build?):\n%s%s"
                         % (out.decode("utf-8", "replace"), err))

        bindir = self.installed("PYSAMPLE_TEST_BINDIR")
        tooldir = os.path.join(self.installed("PYSAMPLE_TEST_DATADIR"), "pysample")
        mandir = self.installed("PYSAMPLE_TEST_MANDIR")
        libdir = self.installed("PYSAMPLE_TEST_LIBDIR")
        script = os.path.join(bindir, "pysample")
        self.assertTrue(os.access(script, os.X_OK), "%s installed and executable" % script)
        for path in (os.path.join(tooldir, "pysample_tool", "__main__.py"), os.path.join(tooldir, "demo.py"),
                     os.path.join(mandir, "man1", "pysample.1"), os.path.join(mandir, "man7", "libpysample.7")):
            self.assertTrue(os.path.isfile(path), "%s installed" % path)
        # Every file of the package (the modules, flamegraph.js and .css), and
        # nothing else: no __pycache__ from runs in the source tree.
        package = os.path.join(SCRIPTS, "pysample_tool")
        self.assertEqual(sorted(os.listdir(os.path.join(tooldir, "pysample_tool"))),
                         sorted(n for n in os.listdir(package) if n != "__pycache__"))

        # The installed command runs its installed module, not the source tree's.
        work = os.path.join(self.tmp, "work")
        os.mkdir(work)
        code, out, err = pysample("info", front_end=script, cwd=work)
        self.assertEqual(code, 0, err)
        self.assertIn("tool module: %s\n" % os.path.join(tooldir, "pysample_tool"), out.decode())
        code, out, err = pysample("top", fixture("basic.txt"), "-n", "3", front_end=script, cwd=work)
        self.assertEqual(code, 0, err)
        self.assertIn("compute (/srv/app/work.py)", out.decode())
        code, out, err = pysample("convert", fixture("basic.txt"), "--to", "pprof", "-o", "p.pb",
                                  front_end=script, cwd=work)
        self.assertEqual(code, 0, err)
        with open(os.path.join(work, "p.pb"), "rb") as f:
            self.assertEqual(sum(v[0] for _, v, _ in decode_pprof(f.read())["samples"]), 100)
        code, out, err = pysample("convert", fixture("basic.txt"), "--to", "speedscope", front_end=script)
        self.assertEqual(code, 0, err)
        json.loads(out.decode())

        library = real_library(libdir)
        if not library:
            sys.stderr.write("InstallTests: no libpysample in %s: pkg-config and installed record not checked "
                             "(the library target is not built yet)\n" % libdir)
            return
        with open(os.path.join(libdir, "pkgconfig", "pysample.pc")) as f:
            pc = f.read()
        self.assertIn("-lpysample", pc)
        self.assertRegex(pc, r"(?m)^Version: %s$" % re.escape(CONFIG.get("PYSAMPLE_TEST_VERSION", "")))
        code, out, err = pysample("info", front_end=script, cwd=work)
        self.assertIn("library:     %s" % library, out.decode(), "the installed library is found")
        code, out, err = pysample("record", "-o", "prof.txt", "--", PYTHON, "-c", SPIN, front_end=script, cwd=work)
        self.assertEqual(code, 0, err)
        profile = pysample_tool.parse_collapsed(os.path.join(work, "prof.txt"))
        self.assertIn("spin", set(f.name for _, stack, _ in profile.stacks for f in stack))


class ThreadFilterTests(TempDirTestCase):
    """--thread NAME|TID and --active in top, flamegraph, diff and lines
    (issue #35 item 3): which threads count."""

    T = "/usr/lib/python3.12/threading.py"
    BOOT = "Thread._bootstrap (%s:1030)" % T
    PROFILE = "".join(line + "\n" for line in sorted([
        # waits in the standard library's Python code: not active
        "thread 10 (MainThread);<module> (/srv/app.py:3);Thread.join (%s:1147);"
        "Thread._wait_for_tstate_lock (%s:1167) 40" % (T, T),
        "thread 12 (pool-2);%s;consume (/srv/app.py:20);Condition.wait (%s:359) 50" % (BOOT, T),
        "thread 13 (io);%s;serve (/srv/app.py:30);EpollSelector.select "
        "(/usr/lib/python3.12/selectors.py:468) 20" % BOOT,
        # running Python code: active
        "thread 11 (pool-1);%s;work (/srv/app.py:9);burn (/srv/app.py:4) 30" % BOOT,
        "thread 12 (pool-2);%s;work (/srv/app.py:9);burn (/srv/app.py:4) 10" % BOOT,
        # native stacks: a sleep and a lock are waits, the GIL is not
        "thread 14 (nat);%s;handle (/srv/app.py:40);time_sleep (libpython3.12.so.1.0);"
        "clock_nanosleep (libc.so.6) 25" % BOOT,
        "thread 14 (nat);%s;handle (/srv/app.py:41);take_gil (libpython3.12.so.1.0);"
        "pthread_cond_timedwait (libc.so.6) 7" % BOOT,
        "thread 14 (nat);%s;handle (/srv/app.py:42);pthread_cond_wait (libc.so.6);libc.so.6+0x85f16 3" % BOOT,
        "thread 15 (lock);%s;f (/srv/app.py:50);lock_PyThread_acquire_lock (libpython3.12.so.1.0);"
        "PyThread_acquire_lock_timed (libpython3.12.so.1.0);libc.so.6+0x90d8f 5" % BOOT,
        "thread 15 (lock);%s;f (/srv/app.py:51);[gc] 2" % BOOT,
    ]))

    def top(self, *args):
        code, out, err = pysample("top", self.write("p.txt", self.PROFILE), "-n", "0", *args)
        self.assertEqual(code, 0, err)
        text = out.decode("utf-8")
        return int(re.search(r"([\d,]+) samples in", text).group(1).replace(",", "")), top_rows(text)

    def test_active_keeps_running_and_gil_waiting_samples(self):
        total, rows = self.top("--active")
        self.assertEqual(total, 30 + 10 + 7 + 3 + 2)
        self.assertEqual(rows["burn (/srv/app.py)"][0], 40)
        self.assertNotIn("Condition.wait (%s)" % self.T, rows)
        self.assertNotIn("EpollSelector.select (/usr/lib/python3.12/selectors.py)", rows)
        self.assertNotIn("clock_nanosleep (libc.so.6)", rows, "a sleep is a wait")
        # (Their native frames show as one [waiting for the GIL] frame.)
        self.assertEqual(rows["[waiting for the GIL]"][0], 7 + 3,
                         "waiting for the GIL counts, and a condition wait right under a Python frame is the GIL's")
        self.assertEqual(rows["[gc]"][0], 2)

    def test_thread_by_name_wildcard_and_tid(self):
        total, rows = self.top("--thread", "pool-*")
        self.assertEqual(total, 90)
        total, rows = self.top("--thread", "13", "--thread", "MainThread")
        self.assertEqual(total, 60)
        total, rows = self.top("--thread", "pool-2", "--active")
        self.assertEqual((total, rows["burn (/srv/app.py)"][0]), (10, 10))

    def test_nothing_left_is_one_line_naming_the_threads(self):
        code, out, err = pysample("top", self.write("p.txt", self.PROFILE), "--thread", "io", "--active")
        self.assertEqual(code, 2)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("no samples left after --thread io --active", err)
        self.assertIn("thread 13 (io)", err)

    def test_flamegraph_diff_and_lines_filter_too(self):
        path = self.write("p.txt", self.PROFILE)
        svg = os.path.join(self.tmp, "f.svg")
        code, _, err = pysample("flamegraph", path, "-o", svg, "--thread", "pool-1")
        self.assertEqual(code, 0, err)
        with open(svg, encoding="utf-8") as f:
            text = f.read()
        self.assertIn("pool-1", text)
        self.assertNotIn("pool-2", text)
        self.assertNotIn("MainThread", text)
        head = self.write("h.txt", self.PROFILE.replace("burn (/srv/app.py:4) 30", "burn (/srv/app.py:4) 130"))
        code, out, err = pysample("diff", path, head, "--active")
        self.assertEqual(code, 0, err)
        self.assertIn("52 -> 152 samples", out.decode())
        self.assertNotIn("Condition.wait", out.decode())
        code, out, err = pysample("lines", path, "/srv/app.py", "--sampled", "--thread", "nat", "--active")
        self.assertEqual(code, 0, err)
        self.assertIn("10 samples", out.decode())


class PySpyFileTests(TempDirTestCase):
    """py-spy's collapsed output (`record --format raw`) in top, flamegraph,
    diff and lines (issue #35 item 5): fixtures/pyspy/, written by py-spy."""

    def path(self, name):
        return os.path.join(FIXTURES, "pyspy", name)

    def total_of(self, name):
        return sum(count for count in read_stacks(self.path(name)).values())

    def top(self, *args):
        code, out, err = pysample("top", *args)
        self.assertEqual(code, 0, err)
        return out.decode("utf-8")

    def test_every_kind_of_py_spy_file_reads_whole(self):
        for name in ("plain.txt", "threads.txt", "native.txt", "subprocesses.txt"):
            with self.subTest(name=name):
                text = self.top(self.path(name), "-n", "0")
                self.assertIn("%s samples" % "{:,}".format(self.total_of(name)), text.splitlines()[0])
                self.assertIn("py-spy's format", text.splitlines()[0])
                rows = top_rows(text)
                self.assertEqual(sum(r[0] for r in rows.values()), self.total_of(name))
                self.assertIn("burn (prog.py)", rows)

    def test_threads_processes_and_native_addresses(self):
        profile = pysample_tool.parse_collapsed(self.path("threads.txt"))
        self.assertIn("busy", set(t.name for t, _ in profile.threads()))
        self.assertEqual(self.top(self.path("threads.txt"), "--thread", "busy").splitlines()[0].split(": ")[1]
                         .split()[0], str(sum(c for (t, _), c in read_stacks(self.path("threads.txt")).items()
                                               if t.endswith(": busy"))))
        profile = pysample_tool.parse_collapsed(self.path("subprocesses.txt"))
        self.assertTrue(all(frames and frames[0].name.startswith("[process ") for _, frames, _ in profile.stacks))
        rows = top_rows(self.top(self.path("native.txt"), "-n", "0"))
        self.assertIn("[libc.so.6]", rows, "py-spy's unnamed native frames are grouped per object")
        self.assertFalse([r for r in rows if r.startswith("0x")], rows)
        active = top_rows(self.top(self.path("native.txt"), "-n", "0", "--active"))
        self.assertIn("burn (prog.py)", active)
        self.assertNotIn("clock_nanosleep (libc.so.6)", active)

    def test_flamegraph_diff_and_lines(self):
        svg = os.path.join(self.tmp, "f.svg")
        code, _, err = pysample("flamegraph", self.path("threads.txt"), "-o", svg)
        self.assertEqual(code, 0, err)
        ET.parse(svg)
        code, out, err = pysample("diff", self.path("plain.txt"), self.path("threads.txt"))
        self.assertEqual(code, 0, err)
        self.assertIn("burn (prog.py)", out.decode())
        code, out, err = pysample("lines", self.path("plain.txt"), self.path("prog.py"), "--sampled")
        self.assertEqual(code, 0, err)
        self.assertRegex(out.decode(), r"\n\s+\d+\s+[\d.]+%\s+\d+\s+[\d.]+%\s+4\s+for i in range")

    def test_our_files_stay_strict(self):
        """A file that starts as ours is ours to the end: a py-spy line in it
        is an error, not a thread-less stack."""
        path = self.write("mixed.txt", "thread 1;f (/a.py:1) 3\nf (/a.py:1) 2\n")
        code, _, err = pysample("top", path)
        self.assertEqual(code, 2)
        self.assertIn("mixed.txt:2: malformed line", err)


class ManPageTests(unittest.TestCase):
    def test_man_pages_render_without_warnings(self):
        groff = shutil.which("groff")
        if not groff:
            self.skipTest("groff is not installed")
        for page in ("pysample.1", "libpysample.7"):
            with self.subTest(page=page):
                code, out, err = run([groff, "-man", "-ww", "-z", os.path.join(SOURCE_ROOT, "docs", "man", page)])
                self.assertEqual((code, err), (0, ""))

    def test_man_page_lists_every_library_variable(self):
        with open(os.path.join(SOURCE_ROOT, "docs", "man", "libpysample.7")) as f:
            page = f.read()
        for name in ("PYSAMPLE_OUTPUT", "PYSAMPLE_RATE", "PYSAMPLE_MODE", "PYSAMPLE_LINES", "PYSAMPLE_MAX_DEPTH",
                     "PYSAMPLE_FLUSH_INTERVAL", "PYSAMPLE_FORMAT"):
            self.assertIn(".B %s\n" % name, page)


if __name__ == "__main__":
    unittest.main()
