#!/usr/bin/env python3
"""Tests of the command line as a whole: error messages and exit status 2, the
build-dir script, meson install and the installed command, the man pages.

Run by Meson (test/tools/meson.build, suite 'tools'), one test case class per
Meson test, e.g.  python3 test_cli.py ErrorTests -v
What they share is in helpers.py.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import unittest
import xml.etree.ElementTree as ET

from helpers import (BUILD_ROOT, CONFIG, FRONT_END, PYTHON, SCRIPTS, SOURCE_ROOT, SPIN_UNTIL_SAMPLED,
                     TempDirTestCase, clean_env, decode_pprof, fixture, pysample, real_library, run)

import pysample_tool  # noqa: E402  (the package under test; helpers put it on sys.path)


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

    def test_a_long_wait_looks_at_the_target_less_and_less(self):
        """An answer that takes 3 s (a record's duration) is waited for
        with a few looks at the target's state, not 4 a second: serve waits
        so on each of its targets, and its CPU grew with the scrape's length
        (docs/performance.md).  A target seen stopped is still looked at
        every SLICE_S, and given up on after STOPPED_S."""
        import socket
        import threading
        from pysample_tool import deadline
        from pysample_tool.common import ToolError
        looks, why = [], []
        real = deadline.stopped
        deadline.stopped = lambda pid: looks.append(pid) or (why[0] if why else None)
        a, b = socket.socketpair()
        timer = threading.Timer(3.0, b.send, [b"done"])
        try:
            timer.start()
            got = deadline.call(a, deadline.Wait(os.getpid(), 30, "answer", "x"), a.recv, 16)
            self.assertEqual(got, b"done")
            # 0.25, 0.75 and 1.75 s (was every 0.25 s: 11 looks)
            self.assertLessEqual(len(looks), 5, "%d looks at the target in a 3 s wait" % len(looks))
            del looks[:]
            why.append("is stopped (a test)")
            with self.assertRaises(ToolError) as raised:
                deadline.call(a, deadline.Wait(os.getpid(), 30, "answer", "x"), a.recv, 16)
            self.assertIn("is stopped (a test)", str(raised.exception))
            # STOPPED_S / SLICE_S + 1 = 9 looks, fewer if the machine is slow
            self.assertGreaterEqual(len(looks), 6, "a stopped target looked at only %d times" % len(looks))
        finally:
            timer.cancel()
            deadline.stopped = real
            a.close()
            b.close()

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


def needs_build_root(test):
    return unittest.skipUnless(BUILD_ROOT, "PYSAMPLE_TEST_BUILD_ROOT is not set (run through meson test)")(test)


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


class ManPageTests(unittest.TestCase):
    def test_man_pages_render_without_warnings(self):
        groff = shutil.which("groff")
        if not groff:
            self.skipTest("groff is not installed")
        for page in ("pysample.1", "libpysample.7"):
            with self.subTest(page=page):
                code, out, err = run([groff, "-man", "-ww", "-z", os.path.join(SOURCE_ROOT, "docs", "man", page)])
                self.assertEqual((code, err), (0, ""))

    def test_man_page_describes_every_diff_option(self):
        """pysample.1's diff (synopsis and section) was written before
        --base, --confidence, --time, --focus ... : each option diff --help
        lists must appear there."""
        code, out, err = run([FRONT_END, "diff", "--help"])
        self.assertEqual(code, 0, err)
        options = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", out.decode())) - {"--help"}
        self.assertGreater(len(options), 10, out)
        with open(os.path.join(SOURCE_ROOT, "docs", "man", "pysample.1")) as f:
            page = f.read()
        missing = sorted(o for o in options if o.replace("-", "\\-") not in page)
        self.assertEqual(missing, [], "diff options missing from docs/man/pysample.1")

    def test_man_page_lists_every_library_variable(self):
        with open(os.path.join(SOURCE_ROOT, "docs", "man", "libpysample.7")) as f:
            page = f.read()
        for name in ("PYSAMPLE_OUTPUT", "PYSAMPLE_RATE", "PYSAMPLE_MODE", "PYSAMPLE_LINES", "PYSAMPLE_MAX_DEPTH",
                     "PYSAMPLE_FLUSH_INTERVAL", "PYSAMPLE_FORMAT"):
            self.assertIn(".B %s\n" % name, page)


if __name__ == "__main__":
    unittest.main()
