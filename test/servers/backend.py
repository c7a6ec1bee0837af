#!/usr/bin/env python3
"""`pysample serve` against a real Pyroscope server (issue #38).

    backend.py --lib LIBPYSAMPLE [--pyroscope BINARY] [--keep]

gunicorn serves backend_app.py with 2 workers, armed (PYSAMPLE_ARM=1,
libpysample preloaded), under load from wrk (a Python load loop where wrk
is missing).  Then, one after the other, in the same run:
  1. pull: Pyroscope scrapes `pysample serve --select service=S` (its
     scrape config: /debug/pprof/profile?seconds=4 every 5 s) until two
     scrapes or more have brought MIN_SAMPLES samples;
  2. push: `pysample serve --push URL --every 3` sends to its /ingest
     until two pushes have brought MIN_SAMPLES samples;
  3. record: `pysample record --pid W` of each worker, 4 s at a time,
     until MIN_SAMPLES samples;
and then asks the server's own API (/label-values, /render) for the merged
profile of 1 and of 2, and checks for each:
  - slow_function has the most self samples;
  - each worker is its own `pid` label, with samples of its own;
  - slow_function's share of the handler's samples agrees with the
    record's within 5 points.
All sessions are CPU mode at 400 Hz: idle time between requests is then not
in any profile, and the share is a property of the app.

The server binary: --pyroscope, $PYSAMPLE_PYROSCOPE, or what
test/servers/build-pyroscope.sh built into ~/.cache/pysample/backend
(.ci/run builds it in the background; while its .pending marker names a
live process this test waits for it).  Exit status 0 if all passed, 1 if
any failed, 77 (meson: skipped, with one line saying why) without the
server binary or gunicorn.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from pysample_tool.collapsed import parse_collapsed  # noqa: E402
from run import free_port  # noqa: E402  (test/servers/run.py, beside this file)
sys.path.insert(0, os.path.join(ROOT, "test", "tools"))
import waiting  # noqa: E402  (test/tools/waiting.py: wait_for, shared with test_serve.py)

PYSAMPLE = os.path.join(ROOT, "scripts", "pysample")
CACHE = os.path.join(os.environ.get("PYSAMPLE_BACKEND_CACHE") or
                     os.path.join(os.path.expanduser("~"), ".cache", "pysample", "backend"), "pyroscope")
RATE = 400
MIN_SAMPLES = 1500       # per phase: the share's standard error is then about 1 point
AGREE_POINTS = 5.0
GIVE_UP = 180            # seconds any one phase may take on a loaded machine
BUILD_WAIT = 1500        # seconds to wait for a build still under way
SLOW, HANDLER = "slow_function", "application"


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def find_pyroscope(given):
    """The server binary, waiting for a build under way; skips without."""
    path = given or os.environ.get("PYSAMPLE_PYROSCOPE") or os.path.join(CACHE, "pyroscope")
    pending = os.path.join(CACHE, "pyroscope.pending")
    end = time.time() + BUILD_WAIT
    while not os.access(path, os.X_OK) and time.time() < end:
        try:
            with open(pending) as f:
                builder = int(f.read().strip() or 0)
        except (OSError, ValueError):
            break
        if not builder or not _alive(builder):
            break
        time.sleep(5)
    if os.access(path, os.X_OK):
        return path
    why = "no Pyroscope server at %s" % path
    try:
        with open(os.path.join(CACHE, "pyroscope.failed")) as f:
            why += " (its build failed: %s)" % f.read().strip()
    except OSError:
        why += " (build it with: sh test/servers/build-pyroscope.sh)"
    skip(why)


def get(url, timeout=30):
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return answer.read()


def wait_for(what, predicate, timeout=GIVE_UP):
    return waiting.wait_for(what, predicate, timeout, 0.25)


class Run(object):
    """The processes of one run, each with its log in the run's directory."""

    def __init__(self, root, lib):
        self.root = root
        self.lib = lib
        self.procs = []
        self.service = "e2e%d" % os.getpid()

    def start(self, name, cmd, env=None, cwd=None):
        log = open(os.path.join(self.root, name + ".log"), "wb")
        proc = subprocess.Popen(cmd, cwd=cwd or self.root, env=env, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        proc.name = name
        self.procs.append(proc)
        return proc

    def log(self, name):
        with open(os.path.join(self.root, name + ".log"), "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self, proc, sig=signal.SIGTERM):
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def stop_all(self):
        for proc in reversed(self.procs):
            self.stop(proc)


def tool_env(**extra):
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("PYSAMPLE_") and k != "LD_PRELOAD")
    env.update(extra)
    return env


def start_app(run):
    """gunicorn with 2 armed workers: (port, [worker pids])."""
    port = free_port()
    env = tool_env(LD_PRELOAD=run.lib, PYSAMPLE_ARM="1", PYSAMPLE_SERVICE=run.service,
                   PYSAMPLE_NAMESPACE="e2e", PYSAMPLE_POD="web-0")
    gunicorn = run.start("gunicorn", [shutil.which("gunicorn"), "--workers", "2", "--bind",
                                      "127.0.0.1:%d" % port, "--chdir", HERE, "backend_app:application"],
                         env=env)

    def workers():
        pids = [int(line.rsplit(":", 1)[1]) for line in run.log("gunicorn").splitlines()
                if "Booting worker with pid:" in line]
        return pids if len(pids) >= 2 else None
    pids = wait_for("gunicorn's 2 workers", workers, 60)
    wait_for("gunicorn to answer", lambda: _answers(port), 60)
    assert gunicorn.poll() is None, run.log("gunicorn")
    return port, pids[:2]


def _answers(port):
    try:
        return get("http://127.0.0.1:%d/" % port, 5) == b"ok\n"
    except OSError:
        return False


def start_load(run, port):
    """wrk for as long as the run lasts, or a Python loop without it."""
    url = "http://127.0.0.1:%d/" % port
    wrk = shutil.which("wrk")
    if wrk:
        return run.start("wrk", [wrk, "-t2", "-c4", "-d600s", url])
    print("backend: wrk is missing: a Python load loop instead")
    code = ("import urllib.request, threading\n"
            "def go():\n"
            "    while True:\n"
            "        urllib.request.urlopen(%r, timeout=30).read()\n"
            "for _ in range(4): threading.Thread(target=go, daemon=True).start()\n"
            "threading.Event().wait(600)\n" % url)
    return run.start("load", [sys.executable, "-c", code])


def start_pyroscope(run, serve_port):
    """The server, scraping serve_port: its API base URL."""
    api = free_port()
    config = os.path.join(run.root, "server.yml")
    with open(config, "w") as f:
        f.write("scrape-configs:\n"
                "  - job-name: pysample\n"
                "    scrape-interval: 5s\n"
                "    scrape-timeout: 15s\n"
                "    enabled-profiles: [cpu]\n"
                "    profiles:\n"
                "      cpu:\n"
                "        path: /debug/pprof/profile\n"
                "        params:\n"
                "          seconds: [\"4\"]\n"
                "    static-configs:\n"
                "      - application: pull-%s\n"
                "        targets: [127.0.0.1:%d]\n" % (run.service, serve_port))
    run.start("pyroscope", [run.pyroscope, "server", "--config", config,
                            "--storage-path", os.path.join(run.root, "data"),
                            "--api-bind-addr", "127.0.0.1:%d" % api,
                            "--admin-socket-path", os.path.join(run.root, "admin.sock"),
                            "--analytics-opt-out", "--no-self-profiling", "--log-level", "warn"])
    base = "http://127.0.0.1:%d" % api

    def up():
        try:
            return get(base + "/healthz", 5) is not None
        except OSError:
            return False
    wait_for("pyroscope to answer", up, 90)
    return base


def served_samples(run, name, needle):
    """The samples serve's log lines containing needle reported."""
    total, count = 0, 0
    for line in run.log(name).splitlines():
        if needle in line and " samples" in line:
            total += int(line.split(" samples")[0].rsplit(" ", 1)[1])
            count += 1
    return count, total


def pull_phase(run):
    """Pyroscope scrapes serve until 2 scrapes and MIN_SAMPLES samples."""
    port = free_port()
    serve = run.start("serve-pull", [PYSAMPLE, "serve", "--listen", "127.0.0.1:%d" % port,
                                     "--select", "service=" + run.service, "--mode", "cpu",
                                     "--rate", str(RATE)], env=tool_env())
    base = start_pyroscope(run, port)
    wait_for("two scrapes of %d samples" % MIN_SAMPLES,
             lambda: _enough(served_samples(run, "serve-pull", "?seconds=4: 200 ")))
    run.stop(serve)      # no more scrapes: the server keeps what it has
    print("backend: pull: %d scrapes, %d samples" % served_samples(run, "serve-pull", "?seconds=4: 200 "))
    return base


def push_phase(run, base):
    serve = run.start("serve-push", [PYSAMPLE, "serve", "--push", base, "--every", "3",
                                     "--select", "service=" + run.service, "--mode", "cpu",
                                     "--rate", str(RATE)], env=tool_env())
    wait_for("two pushes of %d samples" % MIN_SAMPLES,
             lambda: _enough(_pushed(run)))
    run.stop(serve)
    print("backend: push: %d pushes, %d samples" % _pushed(run))


def _pushed(run):
    return served_samples(run, "serve-push", "push: %s{" % run.service)


def _enough(scrapes_samples):
    scrapes, samples = scrapes_samples
    return scrapes >= 2 and samples >= MIN_SAMPLES


def record_phase(run, workers):
    """`pysample record --pid W` of each worker, 4 s at a time, side by
    side, until MIN_SAMPLES samples: {pid: [profile]}."""
    profiles = dict((w, []) for w in workers)
    total, rounds = 0, 0
    end = time.time() + GIVE_UP
    while total < MIN_SAMPLES and time.time() < end:
        rounds += 1
        procs = {}
        for w in workers:
            out = os.path.join(run.root, "record.%d.%d.txt" % (w, rounds))
            procs[w] = (out, subprocess.Popen([PYSAMPLE, "record", "--pid", str(w), "-d", "4", "--mode", "cpu",
                                               "--rate", str(RATE), "-q", "-o", out], env=tool_env(),
                                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        for w, (out, proc) in procs.items():
            err = proc.communicate(60)[1].decode("utf-8", "replace")
            if proc.returncode != 0:
                # a session of the serve just stopped may still be ending
                print("backend: record of %d: %s" % (w, err.strip().splitlines()[-1:]))
                continue
            profile = parse_collapsed(out)
            profiles[w].append(profile)
            total += profile.total
    print("backend: record: %d rounds, %d samples" % (rounds, total))
    assert total >= MIN_SAMPLES, "pysample record got %d samples in %d s" % (total, GIVE_UP)
    return profiles


def record_share(profiles):
    """slow_function's share of the handler's samples, in per cent, and of
    all samples (printed only: the time in gunicorn's socket writes varies
    with the machine's load from one phase to the next, the app's own 4:1
    split does not)."""
    slow = handler = total = 0
    for profile in (p for ps in profiles.values() for p in ps):
        for _, frames, count in profile.stacks:
            names = set(f.name for f in frames)
            total += count
            handler += count if HANDLER in names else 0
            slow += count if SLOW in names else 0
    print("backend: record: %s %.1f %% of all samples" % (SLOW, 100.0 * slow / total))
    return 100.0 * slow / handler


def render(base, query):
    """The server's merged profile for query: {name: [self, total]}, ticks."""
    url = "%s/render?%s" % (base, urllib.parse.urlencode(
        {"query": query, "from": "now-1h", "until": "now", "format": "json"}))
    fb = json.loads(get(url).decode("utf-8"))["flamebearer"]
    names = fb["names"]
    functions = {}
    for level in fb["levels"]:
        # "single" format: [x offset delta, total, self, name index] per node
        for i in range(0, len(level), 4):
            entry = functions.setdefault(names[level[i + 3]], [0, 0])
            entry[0] += level[i + 2]
            entry[1] += level[i + 1]
    return functions, fb["numTicks"]


def label_values(base, app, label):
    url = "%s/label-values?%s" % (base, urllib.parse.urlencode({"label": label, "query": app}))
    return set(json.loads(get(url).decode("utf-8")))


def check(base, app, workers, want_share, failures):
    """The server's profile of app: slow on top, a pid label per worker,
    the share within AGREE_POINTS of want_share."""
    def merged():
        functions, ticks = render(base, app + "{}")
        return (functions, ticks) if ticks >= MIN_SAMPLES else None
    functions, ticks = wait_for("%s to hold %d samples" % (app, MIN_SAMPLES), merged, 60)
    top = max((f for f in functions if f != "total"), key=lambda f: functions[f][0])
    share = 100.0 * functions.get(SLOW, [0, 0])[1] / max(1, functions.get(HANDLER, [0, 0])[1])
    print("backend: %s: %d samples, top by self: %s, %s %.1f %% of all, %.1f %% of %s's (record: %.1f %%)"
          % (app, ticks, top, SLOW, 100.0 * functions.get(SLOW, [0, 0])[1] / ticks, share, HANDLER,
             want_share))
    if top != SLOW:
        failures.append("%s: %s is not on top but %s" % (app, SLOW, top))
    pids = label_values(base, app, "pid")
    for w in workers:
        if str(w) not in pids:
            failures.append("%s: worker %d is not a pid label (%s)" % (app, w, sorted(pids)))
            continue
        _, own = render(base, '%s{pid="%d"}' % (app, w))
        print("backend: %s{pid=%d}: %d samples" % (app, w, own))
        if own <= 0 or own >= ticks:
            failures.append("%s: worker %d has %d of %d samples" % (app, w, own, ticks))
    if abs(share - want_share) > AGREE_POINTS:
        failures.append("%s: %s is %.1f %% of %s's samples, pysample record says %.1f %%"
                        % (app, SLOW, share, HANDLER, want_share))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", required=True)
    parser.add_argument("--pyroscope")
    parser.add_argument("--keep", action="store_true", help="keep the run's directory")
    args = parser.parse_args()
    if not shutil.which("gunicorn"):
        skip("gunicorn is not installed")
    root = tempfile.mkdtemp(prefix="pysample-backend-")
    run = Run(root, os.path.abspath(args.lib))
    run.pyroscope = find_pyroscope(args.pyroscope)
    failures = []
    try:
        port, workers = start_app(run)
        print("backend: gunicorn workers %s, service %s, in %s" % (workers, run.service, root))
        start_load(run, port)
        base = pull_phase(run)
        push_phase(run, base)
        want = record_share(record_phase(run, workers))
        check(base, "pull-%s.cpu" % run.service, workers, want, failures)
        check(base, "%s.cpu" % run.service, workers, want, failures)
    except AssertionError as e:
        failures.append(str(e))
    finally:
        run.stop_all()
    for f in failures:
        print("FAIL: " + f)
    if failures:
        for name in ("serve-pull", "serve-push", "pyroscope", "gunicorn"):
            try:
                print("--- %s.log (last lines)\n%s" % (name, "\n".join(run.log(name).splitlines()[-15:])))
            except OSError:
                pass
    if not args.keep:
        shutil.rmtree(root, True)
    print("backend: %s" % ("FAILED" if failures else "passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
