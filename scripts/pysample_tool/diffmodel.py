# diffmodel.py - what `pysample diff` concludes from the runs of each side:
# every function's share (or seconds) before and after, the interval of
# its change (gatestats.py), and a verdict: grew, shrank or unchanged.
#
# Shares add up to 100 %, so when one function grows every other one's
# share falls, however long it took: render going from 50 % to 75 % of a
# run takes parse from 50 % to 25 % without parse changing at all.  So a
# function is said to have grown when its share's interval is above zero;
# the others are then judged on the samples outside what grew (the rest):
# the deepest call paths that grew are taken out of both sides, and a
# function shrank only when its share of the rest did.  parse's share of
# the samples outside render is the same before and after: unchanged.
# With --time the measure is seconds, which do not move with the others,
# and each function is judged on its own.
#
# SPDX-License-Identifier: MIT

import collections

from .gatestats import share_change, time_change
from .top import NO_FRAMES, function_key


def thread_key(thread):
    """Threads are matched by name: their ids differ from run to run.  A
    thread without a name can only be its id."""
    return thread.name if thread.name is not None else thread.label


class Run(object):
    """One profile's stacks as functions: [(group, function keys root
    first, count)], the samples per group, and seconds per sample (None
    when not known).  Without per_thread the group is None."""

    def __init__(self, profile, per_thread, period=None):
        self.path = profile.path
        self.period = period
        self.total = profile.total
        self.stacks = []
        self.totals = collections.Counter()
        for thread, frames, count in profile.stacks:
            group = thread_key(thread) if per_thread else None
            keys = tuple(function_key(f) for f in (frames or (NO_FRAMES,)))
            self.stacks.append((group, keys, count))
            self.totals[group] += count

    def counts(self, leaves=frozenset()):
        """(totals, on-stack counts, self counts, path counts) of the samples
        under none of the call paths leaves ((group, path) tuples)."""
        totals, on, own, paths = collections.Counter(), collections.Counter(), collections.Counter(), \
            collections.Counter()
        for group, keys, count in self.stacks:
            if leaves and any((group, keys[:d]) in leaves for d in range(1, len(keys) + 1)):
                continue
            totals[group] += count
            own[(group, keys[-1])] += count
            for key in set(keys):
                on[(group, key)] += count
            for d in range(1, len(keys) + 1):
                paths[(group, keys[:d])] += count
        return totals, on, own, paths


Row = collections.namedtuple("Row", "group function change base_self head_self verdict rest")


class Analysis(object):
    """Both sides compared at z.  rows: one Row per function; path_verdicts:
    {(group, path): (plain Change, judged Change, verdict, judged on the
    rest)} for the flame graph; grown_paths: the
    deepest call paths that grew (what the rest leaves out); rest_totals:
    the samples of the rest (BASE, HEAD), None when nothing grew."""

    def __init__(self, base_runs, head_runs, z, by_time=False):
        self.z, self.by_time = z, by_time
        self.base_runs, self.head_runs = base_runs, head_runs
        base = self.base_counts = [r.counts() for r in base_runs]
        head = self.head_counts = [r.counts() for r in head_runs]
        functions = _union(c[1] for c in base + head)
        paths = _union(c[3] for c in base + head)
        plain = dict((key, self._change(base, head, 1, key)) for key in functions)
        plain_paths = dict((key, self._change(base, head, 3, key)) for key in paths)
        self.grown_paths = frozenset() if by_time else _deepest_grown(plain_paths)
        rest = None
        if self.grown_paths:
            rest = ([r.counts(self.grown_paths) for r in base_runs], [r.counts(self.grown_paths) for r in head_runs])
        self.rest_totals = None
        if rest is not None:
            self.rest_totals = (sum(sum(c[0].values()) for c in rest[0]), sum(sum(c[0].values()) for c in rest[1]))
        self.rows = [self._row(key, plain[key], base, head, rest) for key in functions]
        self.path_verdicts = dict((key, (plain_paths[key],) + self._judge(plain_paths[key], 3, key, rest))
                                  for key in paths)

    def _change(self, base, head, which, key):
        """The Change of a function (which=1) or path (which=3) key."""
        group = key[0]
        if self.by_time:
            return time_change([(c[which].get(key, 0), r.period) for c, r in zip(base, self.base_runs)],
                               [(c[which].get(key, 0), r.period) for c, r in zip(head, self.head_runs)], self.z)
        return share_change([(c[which].get(key, 0), c[0].get(group, 0)) for c in base],
                            [(c[which].get(key, 0), c[0].get(group, 0)) for c in head], self.z)

    def _judge(self, change, which, key, rest):
        """(the change the verdict rests on, verdict, judged on the rest).
        Only a function (or path) wholly outside what grew is judged on the
        rest: one with samples under it (a caller, or a callee it shares)
        grew with it, and is judged on its own share."""
        verdict = change.verdict()
        if verdict == "grew" or rest is None or not self._outside(rest, which, key):
            return change, verdict, False
        in_rest = self._change(rest[0], rest[1], which, key)
        return in_rest, in_rest.verdict(), True

    def _outside(self, rest, which, key):
        """True when no sample of key is under the call paths that grew:
        the rest keeps all of them, in every run."""
        for runs, rest_runs in ((self.base_counts, rest[0]), (self.head_counts, rest[1])):
            for c, r in zip(runs, rest_runs):
                if c[which].get(key, 0) != r[which].get(key, 0):
                    return False
        return True

    def _row(self, key, change, base, head, rest):
        judged, verdict, on_rest = self._judge(change, 1, key, rest)
        return Row(key[0], key[1], change, _pooled(base, 2, key), _pooled(head, 2, key), verdict,
                   judged if on_rest else None)


def _union(counters):
    keys = set()
    for c in counters:
        keys.update(c)
    return keys


def _pooled(counts, which, key):
    k = sum(c[which].get(key, 0) for c in counts)
    n = sum(c[0].get(key[0], 0) for c in counts)
    return float(k) / n if n else 0.0


def _deepest_grown(plain_paths):
    """The call paths whose share grew and none of whose callees' did: where
    the growth is.  Their callers grew because of them."""
    grown = set(key for key, change in plain_paths.items() if change.verdict() == "grew")
    callers = set((group, path[:d]) for group, path in grown for d in range(1, len(path)))
    return frozenset(grown - callers)
