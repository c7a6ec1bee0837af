#!/usr/bin/env python3
"""Tests of `pysample serve` (issue #38) with the real library: the pull
endpoint's answer and labels, its answers to bad input, one scrape at a
time per target, a target that exits mid-scrape, and --push against an
ingest server that is down or never answers.

Each test starts its own armed programs with a service label unique to the
test and runs serve with --select service=THAT, so that the armed
processes of other tests on the machine are neither seen nor disturbed.

Run by Meson (test/tools/meson.build), e.g.  python3 test_serve.py ServeTests -v
"""

import gzip
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from helpers import (BUILD_ROOT, FRONT_END, PYTHON, TempDirTestCase, clean_env,  # noqa: E402
                     decode_pprof, real_library)
import waiting  # noqa: E402

GIVE_UP = 60   # seconds any wait of these tests may take on a loaded machine

# An armed program: hot_function() forever (until killed, or GIVE_UP*2 s).
APP = """\
import sys, time
def hot_function():
    return sum(range(2000))
def main():
    end = time.time() + %d
    while time.time() < end:
        hot_function()
main()
""" % (GIVE_UP * 2)


def wait_for(what, predicate, timeout=GIVE_UP):
    return waiting.wait_for(what, predicate, timeout)


class ServeCase(TempDirTestCase):
    def setUp(self):
        self.library = real_library(os.path.join(BUILD_ROOT, "lib")) if BUILD_ROOT else None
        if not self.library:
            self.skipTest("the real library is not built (run through meson test)")
        TempDirTestCase.setUp(self)
        self.service = "serve-test-%d-%s" % (os.getpid(), self.id().rsplit(".", 1)[-1][-20:])
        self.procs = []

    def tearDown(self):
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for f in (proc.stdout, proc.stderr):
                if f:
                    f.close()

    def start_app(self, armed=True, **env):
        path = self.write("app.py", APP)
        extra = dict(PYSAMPLE_SERVICE=self.service, **env)
        if armed:
            extra.update(LD_PRELOAD=self.library, PYSAMPLE_ARM="1")
        proc = subprocess.Popen([PYTHON, path], cwd=self.tmp, env=clean_env(**extra),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        self.procs.append(proc)
        return proc

    SERVE_ENV = {}

    def start_serve(self, *args):
        """serve on a free port: (process, base URL); its log lines are
        collected in self.log (a list), read by a thread."""
        cmd = [FRONT_END, "serve", "--listen", "127.0.0.1:0", "--select", "service=" + self.service]
        proc = subprocess.Popen(cmd + list(args), cwd=self.tmp, env=clean_env(**self.SERVE_ENV),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        self.procs.append(proc)
        self.log = []
        first = proc.stderr.readline().decode("utf-8", "replace")
        self.log.append(first.rstrip("\n"))
        reader = threading.Thread(target=self._read_log, args=(proc,))
        reader.daemon = True
        reader.start()
        if "--push" in args:
            return proc, None
        m = re.search(r"on http://127\.0\.0\.1:(\d+)/", first)
        self.assertTrue(m, "serve did not say where it listens: %r" % first)
        return proc, "http://127.0.0.1:%s" % m.group(1)

    def _read_log(self, proc):
        for line in proc.stderr:
            self.log.append(line.decode("utf-8", "replace").rstrip("\n"))

    def get(self, url, timeout=GIVE_UP):
        """(status, headers, body bytes) of GET url."""
        try:
            with urllib.request.urlopen(url, timeout=timeout) as answer:
                return answer.status, answer.headers, answer.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def targets(self, base):
        status, _, body = self.get(base + "/targets")
        self.assertEqual(status, 200, body)
        return json.loads(body.decode("utf-8"))

    def wait_armed(self, base, pids):
        """Until /targets lists exactly these pids (the control socket of a
        just-started program appears when its library has loaded)."""
        want = sorted(str(p) for p in pids)
        wait_for("/targets to list %s" % want,
                 lambda: sorted(t["pid"] for t in self.targets(base)) == want)

    def log_lines(self, needle):
        return [line for line in self.log if needle in line]

    def logged(self, needle, wait=10.0):
        """log_lines, waiting up to `wait` s for a first: serve logs a
        request after its answer is sent, and the reader thread takes the
        line a moment later (on a busy machine, after the test read the
        answer)."""
        give_up = time.monotonic() + wait
        while not self.log_lines(needle) and time.monotonic() < give_up:
            time.sleep(0.05)
        return self.log_lines(needle)


class ServeTests(ServeCase):
    def test_scrape_is_one_gzipped_pprof_with_labels_per_sample(self):
        pod = dict(PYSAMPLE_NAMESPACE="shop", PYSAMPLE_POD="web-7d9f", PYSAMPLE_CONTAINER="app",
                   PYSAMPLE_VERSION="1.2.3")
        apps = [self.start_app(**pod), self.start_app(**pod)]
        _, base = self.start_serve()
        self.wait_armed(base, [a.pid for a in apps])
        self.assertEqual(self.get(base + "/healthz")[:3:2], (200, b"ok\n"))
        status, headers, body = self.get(base + "/debug/pprof/profile?seconds=1")
        self.assertEqual(status, 200, body[:200])
        profile = decode_pprof(gzip.decompress(body))
        self.assertEqual(int(headers["X-Pysample-Samples"]),
                         sum(values[0] for _, values, _ in profile["samples"]))
        pids = set()
        hot = 0
        for ids, values, labels in profile["samples"]:
            pids.add(labels["pid"])
            self.assertTrue(labels["process"].endswith(" app.py"), labels)
            for key, value in (("service", self.service), ("namespace", "shop"), ("pod", "web-7d9f"),
                               ("container", "app"), ("version", "1.2.3")):
                self.assertEqual(labels.get(key), value, labels)
            self.assertIn("thread_id", labels)
            names = [profile["functions"][fid][0]
                     for lid in ids for fid, _ in profile["locations"][lid][1]]
            if "hot_function" in names:
                hot += values[0]
        self.assertEqual(pids, set(str(a.pid) for a in apps))
        # 1 s at 100 Hz in two processes: ~200 samples, most in hot_function.
        self.assertGreater(hot, 50, profile["samples"][:3])
        self.assertEqual(len(self.logged("GET /debug/pprof/profile?seconds=1: 200")), 1, self.log)
        for app in apps:
            self.assertIsNone(app.poll(), "a scraped program ended")

    def test_bad_input_gets_a_status_and_one_log_line(self):
        app = self.start_app()
        plain = self.start_app(armed=False)
        _, base = self.start_serve("--max-seconds", "30")
        self.wait_armed(base, [app.pid])
        cases = [("seconds=0", 400), ("seconds=-1", 400), ("seconds=1e9", 400), ("seconds=31", 400),
                 ("seconds=abc", 400), ("seconds=", 400), ("seconds=1&pid=abc", 400),
                 ("seconds=1&pid=%d" % plain.pid, 409), ("seconds=1&pid=999999999", 404)]
        for query, want in cases:
            status, _, body = self.get(base + "/debug/pprof/profile?" + query)
            self.assertEqual(status, want, (query, body))
            wait_for("the log line of " + query, lambda: self.log_lines("GET /debug/pprof/profile?%s: %d"
                                                                        % (query, want)))
            self.assertEqual(len(self.logged("?%s:" % query)), 1, self.log)
        status, _, body = self.get(base + "/nothing/here")
        self.assertEqual(status, 404, body)
        self.assertIn(b"/debug/pprof/profile", body)
        self.assertIn("seconds must be a whole number from 1 to 30", self.logged("seconds=1e9")[0])
        self.assertIn("PYSAMPLE_ARM=1", self.logged("pid=%d" % plain.pid)[0])
        self.assertEqual(self.get(base + "/healthz")[0], 200)
        self.assertIsNone(app.poll())
        self.assertIsNone(plain.poll())

    def test_no_target_and_a_peer_not_allowed(self):
        _, base = self.start_serve()
        status, _, body = self.get(base + "/debug/pprof/profile?seconds=1")
        self.assertEqual(status, 503, body)
        self.assertIn(b"no armed process", body)
        _, base2 = self.start_serve("--allow", "10.0.0.0/8")
        status, _, body = self.get(base2 + "/targets")
        self.assertEqual(status, 403, body)
        wait_for("the 403's log line",
                 lambda: self.log_lines("GET /targets: 403 forbidden: 127.0.0.1 is not in --allow"))

    def test_one_scrape_at_a_time_per_target_and_many_at_once(self):
        app = self.start_app()
        _, base = self.start_serve()
        self.wait_armed(base, [app.pid])
        answers = []
        lock = threading.Lock()

        def scrape(seconds):
            answer = self.get(base + "/debug/pprof/profile?seconds=%d" % seconds)
            with lock:
                answers.append(answer[0])
        first = threading.Thread(target=scrape, args=(6,))
        first.start()
        wait_for("the first scrape to hold the target", lambda: self.targets(base)[0]["busy"])
        # 100 more while it runs: each gets 429 (the target is busy) or 503
        # (more connections than serve handles at once) at once, none waits
        # for the first to end.
        others = [threading.Thread(target=scrape, args=(1,)) for _ in range(100)]
        for t in others:
            t.start()
        for t in others:
            t.join(GIVE_UP)
        self.assertTrue(first.is_alive(), "the 100 refusals took as long as a 6 s scrape")
        self.assertEqual(len(answers), 100)
        self.assertEqual(set(answers) - {429, 503}, set(), answers)
        self.assertGreater(answers.count(429), 0, answers)
        self.assertEqual(self.get(base + "/healthz")[0], 200)
        first.join(GIVE_UP)
        self.assertEqual(answers[-1], 200)
        # One line per request: the refused ones too.
        wait_for("101 log lines", lambda: len(self.log_lines(": 429 ")) + len(self.log_lines(": 503 "))
                 + len(self.log_lines("seconds=6: 200")) == 101)
        self.assertIsNone(app.poll())

    def test_target_exiting_mid_scrape(self):
        app = self.start_app()
        _, base = self.start_serve()
        self.wait_armed(base, [app.pid])
        answer = []
        scrape = threading.Thread(target=lambda: answer.append(
            self.get(base + "/debug/pprof/profile?seconds=20")))
        scrape.start()
        wait_for("the scrape to hold the target", lambda: self.targets(base)[0]["busy"])
        started = time.time()
        # Not reaped until serve has answered: a killed worker is a zombie
        # until its master waits for it, and it is gone all the same (kill(0)
        # still finds it: serve answered 502 "closed the connection" when
        # the test's wait() came after serve's look).
        app.send_signal(signal.SIGKILL)
        scrape.join(GIVE_UP)
        app.wait()
        status, _, body = answer[0]
        self.assertEqual(status, 410, body)
        self.assertLess(time.time() - started, 15, "the scrape waited for its whole duration")
        self.assertEqual(len(self.logged("seconds=20: 410")), 1, self.log)
        self.assertEqual(self.get(base + "/healthz")[0], 200)


# A small armed program for the fleet test: mostly asleep (32 of them share
# 2 loaded cores), a few frames when awake.
SMALL_APP = """\
import time
def hot_function():
    return sum(range(500))
end = time.time() + %d
while time.time() < end:
    hot_function()
    time.sleep(0.005)
""" % (GIVE_UP * 3)


class FleetTests(ServeCase):
    """One serve for many armed processes (issue #38 item 4): every scrape
    has every pid as its own label, every sampler held its CPU budget (the
    library's own figures, in /targets), and serve's memory does not grow
    from one scrape to the next.  PYSAMPLE_TEST_SERVE_FLEET processes
    (default 32), SECONDS per scrape (default 3; test/bench/bench_fleet.py: 10)."""

    PROCESSES = int(os.environ.get("PYSAMPLE_TEST_SERVE_FLEET") or 32)
    SECONDS = int(os.environ.get("PYSAMPLE_TEST_SERVE_SECONDS") or 3)
    SCRAPES = int(os.environ.get("PYSAMPLE_TEST_SERVE_SCRAPES") or 3)
    BUDGET = 1.0    # PYSAMPLE_CPU_BUDGET, % of one core
    RATE = 1000     # per scrape: dear enough that the budget, not the rate, bounds the sampler
    # glibc gives each thread that allocates an arena of its own, up to 8
    # per core, and serve's per-target threads touched new ones scrape after
    # scrape (RSS 29, 36, 39 MB: a failure 2 runs in 4), which is the
    # allocator's, not what serve keeps; two arenas leave what it keeps.
    # A fixed mmap threshold too: glibc raises it after the first large
    # free, so a later scrape's large buffers come from the heap and stay
    # (RSS 26.6, 26.6, 31.7 MB in a full run, failed twice in a row).
    SERVE_ENV = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "131072"}

    def test_one_serve_many_processes_within_budget(self):
        path = self.write("small.py", SMALL_APP)
        env = clean_env(PYSAMPLE_SERVICE=self.service, LD_PRELOAD=self.library, PYSAMPLE_ARM="1",
                        PYSAMPLE_CPU_BUDGET="%g%%" % self.BUDGET)
        apps = []
        for _ in range(self.PROCESSES):
            apps.append(subprocess.Popen([PYTHON, path], cwd=self.tmp, env=env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
            self.procs.append(apps[-1])
        proc, base = self.start_serve("--rate", str(self.RATE), "--max-seconds", str(max(60, self.SECONDS)))
        self.wait_armed(base, [a.pid for a in apps])
        want = set(str(a.pid) for a in apps)
        rss, cpu, sizes = [], [], []
        for n in range(self.SCRAPES):
            ticks = _cpu_ticks(proc.pid)
            status, headers, body = self.get(base + "/debug/pprof/profile?seconds=%d" % self.SECONDS,
                                             GIVE_UP + self.SECONDS)
            self.assertEqual(status, 200, body[:300])
            cpu.append(_cpu_ticks(proc.pid) - ticks)
            rss.append(_rss_kb(proc.pid))
            pprof = gzip.decompress(body)
            sizes.append((len(body), len(pprof)))
            profile = decode_pprof(pprof)
            pids = set(labels["pid"] for _, _, labels in profile["samples"])
            self.assertEqual(pids, want, "scrape %d: the pids labelled are not the processes" % n)
        costs = [(t["pid"], t.get("last_scrape")) for t in self.targets(base)]
        self.assertEqual(sorted(pid for pid, _ in costs), sorted(want))
        for pid, cost in costs:
            self.assertTrue(cost, "no cost reported for pid %s" % pid)
            self.assertEqual(cost["budget_pct"], self.BUDGET, cost)
            self.assertGreater(cost["samples"], 0, cost)
            # The library keeps the budget per 200 ms window: 20 % slack
            # for a session's first, as test_control.py allows.
            self.assertLessEqual(cost["sampler_cpu_pct"], 1.2 * self.BUDGET, (pid, cost))
            self.assertFalse(cost["over_budget"], cost)
        self.assertEqual(self.log_lines("over their CPU budget"), [])
        # serve holds one scrape's profiles at a time: after the first
        # scrape (imports, threads' stacks, allocator arenas) it must not
        # grow by more than one scrape's text again.
        growth = rss[-1] - rss[0]
        self.assertLess(growth, 4096, "serve's RSS grew %d kB over %d scrapes: %r" % (growth, self.SCRAPES, rss))
        for app in apps:
            self.assertIsNone(app.poll(), "a scraped program ended")
        shares = sorted(c["sampler_cpu_pct"] for _, c in costs)
        rates = sorted(c["achieved_rate_hz"] for _, c in costs)
        tick_ms = 1000.0 / os.sysconf("SC_CLK_TCK")
        sys.stderr.write(
            "\n    fleet: %d processes, %d scrapes of %d s at %d Hz, budget %g%%: sampler CPU %.2f-%.2f%% of one "
            "core (median %.2f%%), achieved %.0f-%.0f Hz; profile %.1f-%.1f kB gzipped (%.1f-%.1f kB pprof); "
            "serve CPU %s ms per scrape, RSS %s kB\n" % (
                self.PROCESSES, self.SCRAPES, self.SECONDS, self.RATE, self.BUDGET, shares[0], shares[-1],
                shares[len(shares) // 2], rates[0], rates[-1], min(s[0] for s in sizes) / 1e3,
                max(s[0] for s in sizes) / 1e3, min(s[1] for s in sizes) / 1e3, max(s[1] for s in sizes) / 1e3,
                "/".join("%.0f" % (c * tick_ms) for c in cpu), "/".join(str(r) for r in rss)))


def _read_all(sock, timeout):
    """What the server sends until it closes, or None if it has not closed
    within timeout s."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                return data
            data += chunk
    except socket.timeout:
        return None
    except OSError:
        return data


class ClientTests(ServeCase):
    """Clients that stall: serve drops them at a deadline with one status
    and one log line, and answers the others meanwhile."""

    def dribbling(self, dribble):
        """Runs dribble(stop) on a daemon thread until stop is set (at the
        test's end at the latest); returns stop."""
        stop = threading.Event()
        thread = threading.Thread(target=dribble, args=(stop,))
        thread.daemon = True
        thread.start()
        self.addCleanup(stop.set)
        return stop

    def connect(self, base, first=b""):
        sock = socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])), GIVE_UP)
        self.addCleanup(sock.close)
        if first:
            sock.sendall(first)
        return sock

    def test_slow_clients_get_408_at_the_deadline(self):
        _, base = self.start_serve("--client-timeout", "2")
        silent = self.connect(base)                       # connects, sends nothing
        half = self.connect(base, b"GET /debug/pprof/pro")  # half a request line, then stalls
        trickle = self.connect(base, b"G")                # slowloris: a byte every 0.3 s

        def dribble(stop):
            for byte in b"ET /healthz HTTP/1.0\r\nX-A: " + b"a" * 1000:
                if stop.wait(0.3):
                    return
                try:
                    trickle.send(bytes([byte]))
                except OSError:
                    return
        stop = self.dribbling(dribble)
        # Others are answered while the three hold their connections.
        self.assertEqual(self.get(base + "/healthz")[:3:2], (200, b"ok\n"))
        for name, sock in (("silent", silent), ("half", half), ("trickle", trickle)):
            answer = _read_all(sock, 20)
            self.assertIsNotNone(answer, "serve kept the %s client's connection open" % name)
            self.assertTrue(answer.startswith(b"HTTP/1.0 408 "), (name, answer[:100]))
        stop.set()
        wait_for("three 408 log lines", lambda: len(self.log_lines(": 408 request timeout")) >= 3)
        time.sleep(0.2)
        self.assertEqual(len(self.log_lines(": 408 request timeout")), 3, self.log)
        self.assertEqual(len([line for line in self.log if "timed out" in line]), 0, self.log)

    def test_a_crowd_of_slow_clients_does_not_lock_scrapers_out(self):
        """100 slowloris clients: those past serve's 64 connections get 503
        at once, the others 408 at the deadline; then /healthz is answered
        again, and serve has not grown."""
        proc, base = self.start_serve("--client-timeout", "2")
        self.get(base + "/healthz")
        before = _rss_kb(proc.pid)
        crowd = [self.connect(base, b"G") for _ in range(100)]

        def dribble(stop):
            while not stop.wait(0.3):
                for sock in crowd:
                    try:
                        sock.send(b"E")
                    except OSError:
                        pass
        stop = self.dribbling(dribble)
        statuses = []
        for sock in crowd:
            answer = _read_all(sock, 20)
            self.assertIsNotNone(answer, "serve kept a slow client's connection open")
            statuses.append(answer[:12].decode("ascii", "replace"))
        stop.set()
        self.assertEqual(set(statuses), {"HTTP/1.0 408", "HTTP/1.0 503"}, statuses)
        wait_for("/healthz answered again", lambda: self.get(base + "/healthz")[0] == 200)
        self.assertLess(_rss_kb(proc.pid) - before, 4096, "serve grew with the slow clients")
        wait_for("100 log lines", lambda: len(self.log_lines(": 408 request timeout"))
                 + len(self.log_lines(": 503 too many connections")) == 100)

    def test_a_client_that_never_reads_the_answer(self):
        app = self.start_app()
        _, base = self.start_serve("--client-timeout", "2")
        self.wait_armed(base, [app.pid])
        stalled = socket.socket()
        self.addCleanup(stalled.close)
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        stalled.connect(("127.0.0.1", int(base.rsplit(":", 1)[1])))
        stalled.sendall(b"GET /debug/pprof/profile?seconds=1&stalled=1 HTTP/1.0\r\n\r\n")
        wait_for("the stalled client's scrape to hold the target", lambda: self.targets(base)[0]["busy"])
        wait_for("the target to be free again", lambda: not self.targets(base)[0]["busy"])
        # The stalled client has not read a byte: the next scrape goes on.
        status, _, body = self.get(base + "/debug/pprof/profile?seconds=1")
        self.assertEqual(status, 200, body[:200])
        wait_for("the stalled scrape's log line", lambda: self.log_lines("stalled=1: "))
        self.assertEqual(len(self.log_lines("stalled=1: ")), 1, self.log)
        self.assertIsNone(app.poll())


class _Ingest(http.server.BaseHTTPRequestHandler):
    """A stand-in for Pyroscope's /ingest: keeps what it gets, or (stall)
    reads the request and never answers."""

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.got.append((self.path, self.headers["Content-Type"], body))
        if self.server.stall:
            self.server.release.wait(GIVE_UP)
            return
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class PushTests(ServeCase):
    def ingest(self, stall=False):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ingest)
        server.daemon_threads = True
        server.got, server.stall, server.release = [], stall, threading.Event()
        thread = threading.Thread(target=server.serve_forever)
        thread.daemon = True
        thread.start()

        def stop():
            server.release.set()
            server.shutdown()
            server.server_close()
        self.addCleanup(stop)
        return server, "http://127.0.0.1:%d" % server.server_address[1]

    def test_push_sends_pprof_named_service_with_labels(self):
        app = self.start_app(PYSAMPLE_NAMESPACE="shop")
        server, url = self.ingest()
        self.start_serve("--push", url, "--every", "1")
        wait_for("two pushes", lambda: len(server.got) >= 2)
        path, ctype, body = server.got[0]
        self.assertTrue(path.startswith("/ingest?name=%s%%7Bnamespace%%3Dshop%%7D&" % self.service), path)
        self.assertIn("spyName=pysample", path)
        self.assertTrue(ctype.startswith("multipart/form-data; boundary="), ctype)
        boundary = ctype.split("boundary=", 1)[1].encode("ascii")
        part = body.split(b"--" + boundary)[1]
        self.assertIn(b'name="profile"', part)
        profile = decode_pprof(part.split(b"\r\n\r\n", 1)[1][:-2])
        self.assertEqual(set(labels["pid"] for _, _, labels in profile["samples"]), {str(app.pid)})
        self.assertIsNone(app.poll())

    def push_against(self, url, pushes, *extra):
        """serve --push url --every 1 until it has recorded `pushes` times:
        the number of log lines saying a push failed, and serve's RSS
        growth in kB between the 2nd and the last."""
        self.start_app()
        proc, _ = self.start_serve("--push", url, "--every", "1", *extra)
        rss = []
        for n in range(2, pushes + 1):
            wait_for("push %d" % n, lambda: len(self.log_lines("push: %s{}" % self.service)) >= n)
            rss.append(_rss_kb(proc.pid))
        return self.log_lines("push: %s{}" % self.service), rss[-1] - rss[0]

    def test_a_server_that_is_down_costs_nothing(self):
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        url = "http://127.0.0.1:%d" % closed.getsockname()[1]
        closed.close()    # nobody listens there: each push is refused at once
        lines, growth = self.push_against(url, 5)
        self.assertTrue(all("failed" in line and "this profile is lost" in line for line in lines), lines)
        self.assertLess(growth, 2048, "serve grew while its pushes failed")

    def test_a_server_that_never_answers_does_not_hold_recording(self):
        """The ingest server reads each push and never answers: each push
        gives up after --push-timeout 2, the queue drops the oldest, and
        the records go on every second meanwhile."""
        server, url = self.ingest(stall=True)
        self.start_app()
        proc, _ = self.start_serve("--push", url, "--every", "1", "--push-timeout", "2")
        wait_for("a dropped profile", lambda: self.log_lines("dropped the oldest profile"))
        wait_for("a push that timed out", lambda: self.log_lines("this profile is lost"))
        before = _rss_kb(proc.pid)
        dropped = len(self.log_lines("dropped the oldest profile"))
        wait_for("more dropped profiles", lambda: len(self.log_lines("dropped the oldest profile")) >= dropped + 4)
        self.assertLess(_rss_kb(proc.pid) - before, 2048)
        self.assertLessEqual(len(server.got), len(self.log_lines("this profile is lost")) + 1)


def _cpu_ticks(pid):
    """utime + stime of a process, in clock ticks."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


if __name__ == "__main__":
    unittest.main()
