# targets.py - the armed processes `pysample serve` can see, and one scrape
# of them: a record session of N seconds in each, run side by side, turned
# into one pprof whose samples carry the process's labels.
#
# Discovery reads only what the control sockets' names say (ctlsock.h:
# pysample.<uid>.<pidns>.<pid>, abstract in this network namespace, or files
# in a control directory) and matches them with /proc: a process is a
# target when the name of its PID namespace and its own pid is there.  Who
# answers is still checked by remote.Connection (SO_PEERCRED), as for every
# --pid command.
#
# SPDX-License-Identifier: MIT

import os
import re
import threading
import time

from . import remote
from .collapsed import parse_collapsed
from .common import VERSION, ToolError
from .pprof import to_pprof_parts

# The labels a target's environment (or serve's own) gives every sample:
# set them in the pod spec, e.g. from the Downward API (docs/kubernetes.md).
ENV_LABELS = (
    ("service", "PYSAMPLE_SERVICE"),
    ("namespace", "PYSAMPLE_NAMESPACE"),
    ("pod", "PYSAMPLE_POD"),
    ("container", "PYSAMPLE_CONTAINER"),
    ("version", "PYSAMPLE_VERSION"),
)

_NAME_RE = re.compile(r"^pysample\.(\d+)\.(\d+)\.(\d+)(?:\.sock)?$")
_LABEL_VALUE_MAX = 128
CACHE_SECONDS = 1.0


class Target(object):
    def __init__(self, pid, labels):
        self.pid = pid
        self.labels = labels          # [(key, value)], pid first
        self.lock = threading.Lock()  # one scrape at a time
        self.last = None              # what its last scrape cost it (note_costs)


def _listening(control_dirs):
    """{(pidns inode, pid in it)} of every control name that exists."""
    found = set()
    for directory in [None] + list(control_dirs):
        for name in remote._listed_names(directory):
            m = _NAME_RE.match(name)
            if m:
                found.add((int(m.group(2)), int(m.group(3))))
    return found


def _command(pid):
    """The program and its first argument that is not an option, base names
    only: enough to tell gunicorn from celery, and no argument that may
    hold a secret (a token, a password on the command line)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            words = [w.decode("utf-8", "replace") for w in f.read().split(b"\0") if w]
    except OSError:
        return "?"
    if not words:
        return "?"
    shown = [os.path.basename(words[0])]
    for word in words[1:]:
        if not word.startswith("-"):
            shown.append(os.path.basename(word))
            break
    return " ".join(shown)[:_LABEL_VALUE_MAX]


def _env_labels(pid, static):
    """The pod labels: the target's environment first (each container its
    own), then serve's, then --label."""
    env = remote._target_environ(pid)
    labels = []
    for key, var in ENV_LABELS:
        value = env.get(var) or os.environ.get(var)
        if value:
            labels.append((key, value[:_LABEL_VALUE_MAX]))
    have = set(k for k, _ in labels)
    labels += [(k, v) for k, v in static if k not in have]
    return labels


class Registry(object):
    """The targets, found again at each look (processes come and go); a
    target keeps its lock while its pid lives."""

    def __init__(self, control_dirs=(), static_labels=(), select=()):
        self.control_dirs = [d for d in control_dirs if d]
        self.static = list(static_labels)
        self.select = list(select)    # [(key, value)] a target's labels must all have
        self.cached = (None, [])      # (monotonic time, targets) of the last look
        self.known = {}
        self.mutex = threading.Lock()

    def discover(self):
        """The targets now.  A look reads /proc (tens of ms with a few
        hundred processes), so one look serves every request of the next
        CACHE_SECONDS: a burst of scrapes costs one look, not one each."""
        with self.mutex:
            when, found = self.cached
            if when is not None and time.monotonic() - when < CACHE_SECONDS:
                return list(found)
        found = self._look()
        with self.mutex:
            self.cached = (time.monotonic(), found)
        return list(found)

    def _look(self):
        listening = _listening(self.control_dirs)
        namespaces = set(ns for ns, _ in listening)
        me = os.getpid()
        found = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            pid = int(entry)
            ns = remote._ns(pid, "pid")
            if ns not in namespaces or (ns, remote._own_pid(pid)) not in listening:
                continue
            found[pid] = None
        with self.mutex:
            for pid in found:
                if pid not in self.known:
                    labels = [("pid", str(pid)), ("process", _command(pid))] + _env_labels(pid, self.static)
                    self.known[pid] = Target(pid, labels)
            for pid in list(self.known):
                if pid not in found and not self.known[pid].lock.locked():
                    del self.known[pid]
            chosen = [self.known[p] for p in found if self._selected(self.known[p])]
            return sorted(chosen, key=lambda t: t.pid)

    def _selected(self, target):
        labels = set(target.labels)
        return all(item in labels for item in self.select)

    def take(self, targets):
        """Locks the targets no other scrape holds, at once (so that of
        simultaneous scrapes one gets them all): the ones taken."""
        with self.mutex:
            return [t for t in targets if t.lock.acquire(False)]


class Result(object):
    def __init__(self, target):
        self.target = target
        self.reply = None
        self.error = None


def _record_one(result, seconds, rate, mode, control_dir):
    keys = {"duration": seconds, "rate": rate}
    if mode is not None:
        keys["cpu"] = 1 if mode == "cpu" else 0
    try:
        conn = remote.Connection(result.target.pid, control_dir, timeout=seconds + 15)
        result.reply = conn.request("record", **keys)
    except ToolError as e:
        result.error = str(e)
    except OSError as e:
        result.error = "process %d: %s" % (result.target.pid, e.strerror or e)


def record(targets, seconds, rate=None, mode=None, control_dir=None):
    """Records every target for seconds, side by side: [Result]."""
    results = [Result(t) for t in targets]
    threads = [threading.Thread(target=_record_one, args=(r, seconds, rate, mode, control_dir))
               for r in results]
    for t in threads:
        t.daemon = True
        t.start()
    for t in threads:
        t.join()
    return results


def _cost(meta):
    """What a session cost the process, from the library's own figures
    (docs/format.md, quality figures): its sampler's CPU as a share of one
    core over the session, against PYSAMPLE_CPU_BUDGET (0: none)."""
    duration = remote.meta_number(meta, "duration_s", 0.0, float)
    cpu = remote.meta_number(meta, "sampler_cpu_s", 0.0, float)
    budget = remote.meta_number(meta, "budget_pct", 0.0, float)
    share = 100.0 * cpu / duration if duration > 0 else 0.0
    return {"duration_s": duration, "sampler_cpu_s": cpu, "sampler_cpu_pct": round(share, 3),
            "budget_pct": budget, "over_budget": bool(budget) and share > budget * 1.2,
            "requested_rate_hz": remote.meta_number(meta, "requested_rate_hz", 0),
            "achieved_rate_hz": remote.meta_number(meta, "achieved_rate_hz", 0.0, float),
            "rate_now_hz": remote.meta_number(meta, "rate_now_hz", 0),
            "budget_adjustments": remote.meta_number(meta, "budget_adjustments", 0),
            "samples": remote.meta_number(meta, "samples", 0)}


def note_costs(results):
    """Keeps each answered target's cost for /targets: the pids whose
    sampler went over its budget (20 % slack: the budget is kept per window
    of 200 ms, a session's first window costs more)."""
    over = []
    for r in results:
        if r.reply is None:
            continue
        r.target.last = _cost(r.reply.meta)
        if r.target.last["over_budget"]:
            over.append(r.target.pid)
    return over


def merge(results, end_ns=None):
    """One pprof of the results that have samples: (bytes, samples)."""
    parts = []
    rate, mode, samples = None, None, 0
    for r in results:
        if r.reply is None or not (r.reply.data or b"").strip():
            continue
        meta = r.reply.meta
        try:
            profile = parse_collapsed("process %d" % r.target.pid, data=r.reply.data)
        except ToolError:
            r.error = "process %d sent a profile that does not parse" % r.target.pid
            continue
        rate = rate or remote.meta_number(meta, "requested_rate_hz", 100) or 100
        mode = mode or meta.get("mode") or "wall"
        samples += profile.total
        parts.append((profile, r.target.labels))
    if end_ns is None:
        end_ns = int(time.time() * 1e9)
    duration = 0
    for r in results:
        if r.reply is not None:
            seconds = remote.meta_number(r.reply.meta, "duration_s", 0.0, float)
            duration = max(duration, int(min(seconds, 1e7) * 1e9))
    comment = "pysample %s serve: %d processes" % (VERSION, len(parts))
    return to_pprof_parts(parts, rate or 100, mode or "wall", end_ns, comment, duration), samples
