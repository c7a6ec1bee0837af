#!/usr/bin/env python3
"""Tests of the collapsed-format reader, the --thread and --active filters, and
py-spy's collapsed files in every reading command.

Run by Meson (test/tools/meson.build, suite 'tools'), one test case class per
Meson test, e.g.  python3 test_collapsed.py ParseTests -v
What they share is in helpers.py.
"""

import json
import os
import re
import unittest
import xml.etree.ElementTree as ET

from helpers import (FIXTURES, TempDirTestCase, fixture, pysample, read_stacks, top_rows)

import pysample_tool  # noqa: E402  (the package under test; helpers put it on sys.path)


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


if __name__ == "__main__":
    unittest.main()
