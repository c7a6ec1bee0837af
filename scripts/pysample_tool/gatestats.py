# gatestats.py - the statistics behind `pysample diff`'s verdicts and its CI
# gate (docs/tools.md#how-sure-the-gate-is).
#
# A sampling profile measures a function's share of the run with the
# noise of counting: k of n samples.  Two runs of the same program differ
# by that noise, and by what varies from run to run (imports, caches, the
# machine): a change is only a change when it is outside both.
#
#   one side's share   Wilson's score interval for k/n at confidence C;
#                      with several runs of a side, k and n are their sums.
#   the change         Newcombe's hybrid score interval for the difference
#                      of two proportions (method 10 of Newcombe 1998): the
#                      two Wilson intervals' distances, added in quadrature,
#                      which keeps its coverage for small shares and small
#                      counts where p +- z*sqrt(p(1-p)/n) does not.
#   run-to-run spread  with two or more runs of a side, the variance of the
#                      function's share between those runs, less what
#                      counting alone explains, is the spread of a run; the
#                      mean of B runs carries spread/B of it, the other side
#                      spread/H, and both widen the interval in quadrature.
#   seconds            (--time) the same with the sample count as a Poisson
#                      count (its score interval) times seconds per sample.
#
# SPDX-License-Identifier: MIT

import math
import statistics

_NORMAL = statistics.NormalDist()


def z_of(confidence):
    """The two-sided normal quantile of a confidence in percent: 99 -> 2.576."""
    return _NORMAL.inv_cdf(0.5 + confidence / 200.0)


def wilson(k, n, z):
    """(low, high) of the share k/n at z, in fractions; (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    p = float(k) / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4.0 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def poisson(k, z):
    """(low, high) of the mean of a Poisson count k at z (score interval)."""
    root = z * math.sqrt(k + z * z / 4.0)
    centre = k + z * z / 2.0
    return max(0.0, centre - root), centre + root


def _excess_variance(values, expected):
    """The variance of values beyond expected (what counting explains),
    with its degrees of freedom; (0, 0) for fewer than two values."""
    if len(values) < 2:
        return 0.0, 0
    mean = sum(values) / len(values)
    ss = sum((v - mean) ** 2 for v in values)
    return max(0.0, ss / (len(values) - 1) - expected), len(values) - 1


def spread(base_values, base_expected, head_values, head_expected):
    """The run-to-run variance of one run's value, pooled over the sides
    that have two or more runs (0 when neither has)."""
    vb, db = _excess_variance(base_values, base_expected)
    vh, dh = _excess_variance(head_values, head_expected)
    if db + dh == 0:
        return 0.0
    return (vb * db + vh * dh) / (db + dh)


class Change(object):
    """A change of one measure from BASE to HEAD: before, after, delta and
    the interval (low, high) of delta, all in the measure's unit (fractions
    of samples, or seconds)."""

    __slots__ = ("before", "after", "low", "high")

    def __init__(self, before, after, low, high):
        self.before, self.after, self.low, self.high = before, after, low, high

    @property
    def delta(self):
        return self.after - self.before

    def verdict(self, margin=0.0):
        """"grew" when the whole interval is above margin, "shrank" when it is
        below -margin, else "unchanged"."""
        if self.low > margin:
            return "grew"
        if self.high < -margin:
            return "shrank"
        return "unchanged"


def _combine(before, b_lo, b_hi, after, h_lo, h_hi, extra):
    """Newcombe's interval of after - before from each side's interval, with
    extra (a variance, already scaled by z*z) added in quadrature."""
    d = after - before
    low = d - math.sqrt((after - h_lo) ** 2 + (b_hi - before) ** 2 + extra)
    high = d + math.sqrt((h_hi - after) ** 2 + (before - b_lo) ** 2 + extra)
    return Change(before, after, low, high)


def share_change(base_runs, head_runs, z):
    """The change of a share: base_runs and head_runs are [(k, n)], one per
    run (k samples of the function among n)."""
    kb, nb = sum(k for k, _ in base_runs), sum(n for _, n in base_runs)
    kh, nh = sum(k for k, _ in head_runs), sum(n for _, n in head_runs)
    pb = float(kb) / nb if nb else 0.0
    ph = float(kh) / nh if nh else 0.0
    b_lo, b_hi = wilson(kb, nb, z)
    h_lo, h_hi = wilson(kh, nh, z)
    var = spread([float(k) / n for k, n in base_runs if n],
                 _mean(pb * (1 - pb) / n for _, n in base_runs if n),
                 [float(k) / n for k, n in head_runs if n],
                 _mean(ph * (1 - ph) / n for _, n in head_runs if n))
    extra = z * z * var * (1.0 / len(base_runs) + 1.0 / len(head_runs))
    return _combine(pb, b_lo, b_hi, ph, h_lo, h_hi, extra)


def time_change(base_runs, head_runs, z):
    """The change of a function's seconds per run: base_runs and head_runs
    are [(k, seconds per sample)], one per run."""
    def side(runs):
        count = sum(k for k, _ in runs)
        period = (sum(k * t for k, t in runs) / count) if count else _mean(t for _, t in runs)
        lo, hi = poisson(count, z)
        scale = period / len(runs)
        return count * scale, lo * scale, hi * scale, [k * t for k, t in runs], _mean(k * t * t for k, t in runs)

    before, b_lo, b_hi, b_values, b_expected = side(base_runs)
    after, h_lo, h_hi, h_values, h_expected = side(head_runs)
    var = spread(b_values, b_expected, h_values, h_expected)
    extra = z * z * var * (1.0 / len(base_runs) + 1.0 / len(head_runs))
    return _combine(before, b_lo, b_hi, after, h_lo, h_hi, extra)


def _mean(values):
    values = list(values)
    return sum(values) / len(values) if values else 0.0

