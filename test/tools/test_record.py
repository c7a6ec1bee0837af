#!/usr/bin/env python3
"""Tests of `pysample record` with a stand-in library (fake_libpysample.c).

Run by Meson (test/tools/meson.build, suite 'tools'), one test case class per
Meson test, e.g.  python3 test_record.py RecordTests -v
What they share is in helpers.py.
"""

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

from helpers import (CONFIG, FRONT_END, HERE, PYTHON, SCRIPTS, SVG_NS, TempDirTestCase, clean_env,
                     decode_pprof, pysample, run, summary_lines)


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


if __name__ == "__main__":
    unittest.main()
