#!/usr/bin/env python3
"""Tests of `pysample record` with the real library: exec images and forked
children.

Run by Meson (test/tools/meson.build, suite 'tools'), one test case class per
Meson test, e.g.  python3 test_record_real.py RealRecordTests -v
What they share is in helpers.py.
"""

import os
import re
import subprocess
import unittest

from helpers import (BUILD_ROOT, FRONT_END, PYTHON, SOURCE_ROOT, SPIN_UNTIL_SAMPLED, TempDirTestCase,
                     clean_env, pysample, real_library, summary_lines)

import pysample_tool  # noqa: E402  (the package under test; helpers put it on sys.path)


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


if __name__ == "__main__":
    unittest.main()
