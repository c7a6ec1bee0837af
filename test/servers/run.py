#!/usr/bin/env python3
"""uWSGI and gunicorn under load, stopped and reloaded (issue #13).

    run.py --lib LIBPYSAMPLE [--only NAME,...] [--bench SECONDS]

Each scenario starts the server twice at the same time on random free
loopback ports, once with the library preloaded (PYSAMPLE_OUTPUT=prof.%p.txt)
and once without, drives both the same way (wrk load, signals), and checks:
  - the exit status is the same with and without the library;
  - no request failed (wrk: no socket error, no non-2xx answer), except
    while uWSGI workers retire after --max-requests: each drops the
    connections it had already accepted, with or without the library, so
    there up to 8 % may fail in either run (the counts are printed);
  - every process the server's log names (master, each worker, each
    respawned worker, the master again after a reload) left exactly one
    profile (the master one per image), each parseable, and no temporary
    file; nothing else was written;
  - every worker that served 8 requests or more (the app counts them in
    served.<pid>) shows the app's request handler at its exact line (at
    least two do); the master shows the
    app's import-time warm-up;
  - the server logged no worker death by signal that it did not log
    without the library.
uWSGI is Debian's, with its python3 plugin: the uwsgi binary is not Python
and loads libpython3.11 through the plugin (the late-load path).  gunicorn
is Debian's too, running on /usr/bin/python3.

--bench SECONDS measures throughput instead (wrk, one server at a time,
with and without the library) and prints it; nothing is asserted.

Exit status 0 if all passed, 1 if any failed, 77 (meson: skipped) if
uwsgi, its python3 plugin, gunicorn or wrk is missing.
"""
import argparse
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
from harness import RATE_NOTE, Profile, program_lines  # noqa: E402

APP = os.path.join(HERE, "wsgi_app.py")
TEMP_RE = re.compile(r"^\..*\.tmp$")
# A worker that served this many requests (~6 ms each) must show the
# handler: ~10 samples expected at 200 Hz.  One that served fewer (a worker
# respawned just before the end) may not have been sampled in it.
MIN_SERVED = 8
WRK_THREADS, WRK_CONNS = 2, 6


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def default_signals():
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)


class Server:
    """One server process tree: uWSGI or gunicorn, with the library or not."""

    def __init__(self, kind, lib, libpath, extra, root):
        self.kind = kind
        self.lib = lib
        self.dir = tempfile.mkdtemp(dir=root, prefix="%s-%s-" % (kind, "lib" if lib else "plain"))
        self.out = os.path.join(self.dir, "profiles")
        self.served = os.path.join(self.dir, "served")
        os.mkdir(self.out)
        os.mkdir(self.served)
        self.port = free_port()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PYSAMPLE_") and k not in ("LD_PRELOAD", "PYTHONPATH")}
        env["SERVED_DIR"] = self.served
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        if lib:
            env["LD_PRELOAD"] = libpath
            env["PYSAMPLE_OUTPUT"] = os.path.join(self.out, "prof.%p.txt")
            env["PYSAMPLE_RATE"] = "200"
        if kind == "uwsgi":
            cmd = ["uwsgi", "--plugin", "python3", "--http11-socket", "127.0.0.1:%d" % self.port,
                   "--wsgi-file", APP, "--master", "--processes", "3", "--disable-logging",
                   "--chdir", HERE] + extra
        else:
            cmd = ["/usr/bin/python3", "/usr/bin/gunicorn", "--workers", "3", "--bind",
                   "127.0.0.1:%d" % self.port, "--chdir", HERE, "--log-level", "info",
                   "wsgi_app:application"] + extra
        self.log_path = os.path.join(self.dir, "server.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, preexec_fn=default_signals,
                                     cwd=HERE)
        self.rc = None

    def text(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def wait_ready(self, timeout=60, after=None):
        """Until a request is answered (and the log has `after`, if given)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("%s exited early (rc %s):\n%s"
                                     % (self.name(), self.proc.returncode, self.text()[-3000:]))
            if after is None or after(self.text()):
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d/" % self.port,
                                                timeout=5) as r:
                        if r.status == 200:
                            return
                except OSError:
                    pass
            time.sleep(0.1)
        raise AssertionError("%s not ready after %d s:\n%s" % (self.name(), timeout,
                                                             self.text()[-3000:]))

    def name(self):
        return "%s (%s)" % (self.kind, "with the library" if self.lib else "without")

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout=60):
        try:
            self.rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill_tree()
            raise AssertionError("%s did not exit within %d s:\n%s"
                                 % (self.name(), timeout, self.text()[-3000:]))
        self.log.close()
        return self.rc

    def kill_tree(self):
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            self.proc.kill()
            self.proc.wait(10)
        except Exception:
            pass

    def pids(self):
        """Every process the log names: {pid: role}."""
        t = self.text()
        out = {self.proc.pid: "master"}
        if self.kind == "uwsgi":
            for m in re.finditer(r"spawned uWSGI worker \d+ \(pid: (\d+)", t):
                out[int(m.group(1))] = "worker"
            for m in re.finditer(r"Respawned uWSGI worker \d+ \(new pid: (\d+)\)", t):
                out[int(m.group(1))] = "worker"
        else:
            for m in re.finditer(r"Booting worker with pid: (\d+)", t):
                out[int(m.group(1))] = "worker"
        return out

    def deaths(self):
        """Crashes the server reported (a worker dead of SIGSEGV, SIGBUS,
        SIGABRT, SIGILL or SIGFPE, a core dump, a timed-out worker), as
        comparable text.  Deaths by SIGTERM/SIGQUIT/SIGKILL are the
        servers' own way of stopping workers, and their number depends on
        timing (a worker already exiting when the signal comes)."""
        t = self.text()
        out = [m.group(0) for m in re.finditer(
            r"(killed by|due to) signal (4|6|7|8|11)\b", t)]
        out += [m.group(0) for m in re.finditer(
            r"core dumped|Segmentation fault|WORKER TIMEOUT|was sent SIGKILL", t)]
        return sorted(out)


def parse_wrk(out):
    """(requests, errors, requests per second) from wrk's report; errors are
    socket errors plus non-2xx/3xx answers."""
    m = re.search(r"(\d+) requests in", out)
    reqs = int(m.group(1)) if m else 0
    errs = 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        errs += sum(int(x) for x in m.groups())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        errs += int(m.group(1))
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    return reqs, errs, float(rps.group(1)) if rps else 0.0


def wrk(port, seconds):
    """(requests, errors, requests per second, wrk's report)."""
    out = subprocess.run(["wrk", "-t%d" % WRK_THREADS, "-c%d" % WRK_CONNS, "-d%ds" % seconds,
                          "http://127.0.0.1:%d/" % port], capture_output=True, text=True,
                         timeout=seconds + 60).stdout
    return parse_wrk(out) + (out,)


def load_both(servers, seconds, respawning=False):
    """wrk against every server at the same time.  respawning: uWSGI
    workers retire after --max-requests during the load, and each drops
    the connections it had already accepted, library or not (seen: 3 and
    7 failed requests out of ~170 without the library); up to 8 % of the
    requests may fail then, in both runs alike, and the counts are
    reported."""
    # One connection per request: a worker that retires (--max-requests)
    # closes its keep-alive connections, and wrk counts a request it had
    # just sent on one as a read error, with or without the library.
    procs = [subprocess.Popen(["wrk", "-t%d" % WRK_THREADS, "-c%d" % WRK_CONNS,
                               "-d%ds" % seconds, "--timeout", "10s", "-H", "Connection: close",
                               "http://127.0.0.1:%d/" % s.port],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for s in servers]
    for s, p in zip(servers, procs):
        out, _ = p.communicate(timeout=seconds + 60)
        reqs, errs, _ = parse_wrk(out)
        allowed = 0.08 * reqs if respawning else 0
        if reqs == 0 or errs > allowed:
            raise AssertionError("%s: %d requests, %d failed\n%s\nserver log:\n%s"
                                 % (s.name(), reqs, errs, out, s.text()[-2000:]))
        s.requests = getattr(s, "requests", 0) + reqs
        s.failed = getattr(s, "failed", 0) + errs


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def check_pair(lib, plain, reexecs=0, min_workers=3):
    """The assertions of the module docstring, for one finished pair."""
    check(lib.rc == plain.rc, "exit status %s with the library, %s without\nwith:\n%s\nwithout:\n%s"
          % (lib.rc, plain.rc, lib.text()[-2000:], plain.text()[-2000:]))
    check(lib.deaths() == plain.deaths(), "worker deaths differ: with %r, without %r\n%s"
          % (lib.deaths(), plain.deaths(), lib.text()[-3000:]))
    # Any line of ours but the note that the achieved rate fell under 90 %
    # of the requested one, which a loaded machine brings (issue #17).
    ours = [l for l in lib.text().splitlines() if "pysample:" in l and not RATE_NOTE.match(l)]
    check(not ours, "message of ours in the log: %s\n%s" % (ours[:3], lib.text()[-3000:]))
    check(os.listdir(plain.out) == [], "profiles without the library?")
    files = sorted(os.listdir(lib.out))
    temps = [f for f in files if TEMP_RE.match(f)]
    check(not temps, "temporary files left behind: %r" % temps)
    pids = lib.pids()
    master = lib.proc.pid
    expected = {"prof.%d.txt" % p for p in pids}
    for k in range(1, reexecs + 1):
        expected.add("prof.%d.%d.txt" % (master, k))
    check(set(files) == expected, "profiles %r, expected one per process %r (pids %r)\nlog:\n%s"
          % (files, sorted(expected), pids, lib.text()[-3000:]))
    handler_line = program_lines(APP, "handler-loop")
    warm_line = program_lines(APP, "warm-up")
    served = {int(f.split(".")[1]): os.path.getsize(os.path.join(lib.served, f))
              for f in os.listdir(lib.served)}
    busy = [p for p, n in served.items() if n >= MIN_SERVED]
    check(len(busy) >= 2, "only %d workers served %d requests or more: %r"
          % (len(busy), MIN_SERVED, served))
    workers = [p for p, role in pids.items() if role == "worker"]
    check(len(workers) >= min_workers, "only %d workers seen, expected %d or more (respawns)\n%s"
          % (len(workers), min_workers, lib.text()[-3000:]))
    for p in workers:
        prof = Profile(os.path.join(lib.out, "prof.%d.txt" % p))
        if served.get(p, 0) >= MIN_SERVED:
            n = prof.count_where(lambda s: s.frames and s.frames[-1].name == "handle_request"
                                 and s.frames[-1].line in (handler_line, handler_line + 1))
            check(n > 0, "worker %d served requests but its profile has no handle_request "
                  "at wsgi_app.py:%d\n%s" % (p, handler_line, prof.dump()))
            check(all(t.split()[1] != str(master) for t in prof.threads()),
                  "worker %d's stacks are on the master's thread id: %r" % (p, prof.threads()))
    if lib.kind == "uwsgi":
        for name in ["prof.%d.txt" % master] + ["prof.%d.%d.txt" % (master, k)
                                                for k in range(1, reexecs + 1)]:
            prof = Profile(os.path.join(lib.out, name))
            n = prof.count_where(lambda s: any(f.name == "warm_up" and f.line in
                                               (warm_line, warm_line + 1) for f in s.frames))
            check(n > 0, "the master's %s lacks the app's warm_up\n%s" % (name, prof.dump()))
    return (len(files), len(workers), len(busy), getattr(lib, "failed", 0),
            getattr(plain, "failed", 0))


def start_pair(kind, libpath, extra, root):
    servers = [Server(kind, True, libpath, extra, root), Server(kind, False, libpath, extra, root)]
    try:
        for s in servers:
            s.wait_ready()
    except Exception:
        for s in servers:
            s.kill_tree()
        raise
    return servers


def workers_ready(n):
    return lambda t: len(re.findall(r"spawned uWSGI worker", t)) >= n


def scenario(kind, extra, steps, reexecs=0, min_workers=3):
    def run(libpath, root):
        pair = start_pair(kind, libpath, extra, root)
        try:
            for step in steps:
                step(pair)
            for s in pair:
                s.wait(90)
        except Exception:
            for s in pair:
                s.kill_tree()
            raise
        return check_pair(pair[0], pair[1], reexecs, min_workers)
    return run


def load(seconds, respawning=False):
    return lambda pair: load_both(pair, seconds, respawning)


def send(sig):
    def step(pair):
        for s in pair:
            s.signal(sig)
    return step


def uwsgi_reloaded(pair):
    for s in pair:
        s.wait_ready(after=workers_ready(6))


def gunicorn_reloaded(pair):
    for s in pair:
        s.wait_ready(after=lambda t: len(re.findall(r"Booting worker", t)) >= 6)


def uwsgi_respawned(pair):
    """Every worker that retired has its successor, and the master is out
    of its 'respawning too fast' pause: uWSGI 2.0 (without the library)
    was seen not to exit when SIGINT came during that pause."""
    def settled(t):
        return (len(re.findall(r"The work of process \d+ is done", t))
                <= len(re.findall(r"Respawned uWSGI worker", t)))
    for s in pair:
        s.wait_ready(after=settled, timeout=90)
    time.sleep(2.5)
    for s in pair:
        s.wait_ready(after=settled, timeout=90)


def gunicorn_respawned(pair):
    """At least one worker retired (--max-requests) after the reload and
    three workers are alive again: every retired one has its successor."""
    def settled(t):
        booted = set(re.findall(r"Booting worker with pid: (\d+)", t))
        gone = set(re.findall(r"Worker exiting \(pid: (\d+)\)", t))
        gone |= set(re.findall(r"Worker with pid (\d+) was terminated", t))
        return len(booted) >= 7 and len(booted - gone) >= 3
    for s in pair:
        s.wait_ready(after=settled, timeout=90)


SCENARIOS = [
    ("uwsgi_sigterm_die_on_term", scenario(
        "uwsgi", ["--die-on-term"], [load(3), send(signal.SIGTERM)])),
    ("uwsgi_max_requests_sigint", scenario(
        "uwsgi", ["--max-requests", "20", "--min-worker-lifetime", "1"],
        [load(4, respawning=True), uwsgi_respawned, send(signal.SIGINT)], min_workers=4)),
    ("uwsgi_sighup_reload_sigquit", scenario(
        "uwsgi", ["--reload-mercy", "8", "--worker-reload-mercy", "8"],
        [load(2), send(signal.SIGHUP), uwsgi_reloaded, load(2), send(signal.SIGQUIT)],
        reexecs=1, min_workers=6)),
    ("gunicorn_sigterm", scenario(
        "gunicorn", [], [load(3), send(signal.SIGTERM)])),
    ("gunicorn_max_requests_hup_sigquit", scenario(
        "gunicorn", ["--max-requests", "10", "--max-requests-jitter", "0"],
        [load(2), send(signal.SIGHUP), gunicorn_reloaded, load(3), gunicorn_respawned,
         send(signal.SIGQUIT)],
        min_workers=7)),
    ("gunicorn_sigint", scenario(
        "gunicorn", [], [load(2), send(signal.SIGINT)])),
]


def missing():
    need = [("uwsgi", shutil.which("uwsgi")), ("gunicorn", shutil.which("gunicorn")),
            ("wrk", shutil.which("wrk")),
            ("uwsgi-plugin-python3", glob.glob("/usr/lib/uwsgi/plugins/python3*_plugin.so"))]
    return [n for n, ok in need if not ok]


def bench(libpath, seconds, root):
    """Throughput of each server alone, without and with the library."""
    for kind in ("uwsgi", "gunicorn"):
        for lib in (False, True, False, True):
            s = Server(kind, lib, libpath, ["--die-on-term"] if kind == "uwsgi" else [], root)
            s.wait_ready()
            wrk(s.port, 1)
            reqs, errs, rps, _ = wrk(s.port, seconds)
            s.signal(signal.SIGTERM)
            s.wait(60)
            print("%-8s %-7s %8.1f req/s  (%d requests, %d errors, %d profiles)"
                  % (kind, "lib" if lib else "plain", rps, reqs, errs, len(os.listdir(s.out))),
                  flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--only", default=None)
    ap.add_argument("--bench", type=int, default=0)
    a = ap.parse_args()
    lack = missing()
    if lack:
        print("skip: not installed: %s (.ci/run installs them)" % " ".join(lack))
        return 77
    root = tempfile.mkdtemp(prefix="pysample-servers-")
    libpath = os.path.abspath(a.lib)
    if a.bench:
        bench(libpath, a.bench, root)
        shutil.rmtree(root, ignore_errors=True)
        return 0
    failed = passed = 0
    for name, fn in SCENARIOS:
        if a.only and name not in a.only.split(","):
            continue
        t0 = time.monotonic()
        try:
            files, workers, served, failed_lib, failed_plain = fn(libpath, root)
        except Exception as e:
            failed += 1
            import traceback
            detail = str(e) if isinstance(e, AssertionError) else traceback.format_exc()
            print("FAIL %-36s (%.1fs)\n    %s" % (name, time.monotonic() - t0,
                                                 detail.replace("\n", "\n    ")), flush=True)
            continue
        passed += 1
        print("ok   %-36s (%.1fs) %d profiles, %d workers, %d checked for the handler, "
              "failed requests "
              "%d with / %d without" % (name, time.monotonic() - t0, files, workers, served,
                                        failed_lib, failed_plain), flush=True)
    shutil.rmtree(root, ignore_errors=True)
    print("servers: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
