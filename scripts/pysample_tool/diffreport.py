# diffreport.py - what `pysample diff` prints: the table (text or Markdown
# for a CI job summary), the verdict line, and the gate's lines on stderr.
#
# SPDX-License-Identifier: MIT

import os

from .common import printable, thousands

_ORDER = {"grew": 0, "shrank": 1, "unchanged": 2}


def judged(row):
    """The change a row's verdict rests on: its share of the rest when the
    growth of others was taken out, else its own."""
    return row.rest if row.rest is not None else row.change


def _sort_key(row):
    """Grew first (surest first), then shrank, then unchanged (largest
    change first)."""
    c = judged(row)
    strength = -c.low if row.verdict == "grew" else (c.high if row.verdict == "shrank" else -abs(row.change.delta))
    return (_ORDER[row.verdict], strength, row.group or "", row.function[1], row.function[2] or "")


def function_text(row):
    _kind, name, filename = row.function
    text = printable(name) + ("" if filename is None else " (%s)" % printable(filename))
    if row.group is not None:
        text += " [%s]" % printable(row.group)
    return text


def _side(runs):
    if len(runs) == 1:
        return runs[0].path
    names = [os.path.basename(r.path) for r in runs]
    return "%d runs (%s)" % (len(runs), ", ".join(names if len(names) <= 4 else names[:3] + ["..."]))


class Report(object):
    def __init__(self, analysis, args):
        self.a = analysis
        self.args = args
        self.time = analysis.by_time
        self.rows = sorted(analysis.rows, key=_sort_key)
        self.limit = None if args.fail_over is None else args.fail_over[1]
        self.flagged = [] if self.limit is None else [
            r for r in self.rows if r.verdict == "grew" and judged(r).low > self.limit]

    # Units --------------------------------------------------------------

    def value(self, v):
        return ("%.3fs" % v) if self.time else ("%.2f%%" % (100 * v))

    def delta(self, v):
        return ("%+.3fs" % v) if self.time else ("%+.2f" % (100 * v))

    def interval(self, c):
        return "[%s, %s]" % (self.delta(c.low), self.delta(c.high))

    def limit_text(self):
        return ("%gs" % self.limit) if self.time else ("%g points" % (100 * self.limit))

    def verdict_text(self, row):
        return row.verdict + ("*" if row.rest is not None else "")

    # Text ---------------------------------------------------------------

    def header(self):
        a = self.a
        what = ("seconds per run" if self.time else
                "shares of each thread's samples" if self.args.per_thread else "shares of all samples")
        return "%s -> %s: %s -> %s samples, %s, %g%% confidence" % (
            _side(a.base_runs), _side(a.head_runs), thousands(sum(r.total for r in a.base_runs)),
            thousands(sum(r.total for r in a.head_runs)), what, self.args.confidence)

    def shown(self):
        limit = self.args.top
        return self.rows if limit <= 0 else self.rows[:limit]

    def text(self):
        conf = "%g%% INTERVAL" % self.args.confidence
        out = [self.header()]
        if self.time:
            out += ["%9s %9s %9s  %-22s  %-11s %s" % ("BASE", "HEAD", "CHANGE", conf, "VERDICT", "FUNCTION (FILE)")]
        else:
            out += ["%7s %7s %8s  %-18s  %7s %7s  %-11s %s" % ("TOTAL%", "->", "CHANGE", conf, "SELF%", "->",
                                                             "VERDICT", "FUNCTION (FILE)")]
        for row in self.shown():
            c = row.change
            if self.time:
                out.append("%9s %9s %9s  %-22s  %-11s %s" % (self.value(c.before), self.value(c.after),
                                                             self.delta(c.delta), self.interval(c),
                                                             self.verdict_text(row), function_text(row)))
            else:
                out.append("%7s %7s %8s  %-18s  %6.2f%% %6.2f%%  %-11s %s" % (
                    self.value(c.before), self.value(c.after), self.delta(c.delta), self.interval(c),
                    100 * row.base_self, 100 * row.head_self, self.verdict_text(row), function_text(row)))
        if len(self.rows) > len(self.shown()):
            out.append("... %d more functions (use --top 0 to list all)" % (len(self.rows) - len(self.shown())))
        out.extend(self.footnote())
        out.append("verdict: " + self.verdict_line())
        return "\n".join(out) + "\n"

    def footnote(self):
        if not any(r.rest is not None for r in self.shown()):
            return []
        base, head = self.a.rest_totals
        return ["* judged on its share of the samples outside the call paths that grew (%s -> %s samples): "
                "its own share moves when theirs does" % (thousands(base), thousands(head))]

    def counts(self):
        n = dict((v, sum(1 for r in self.rows if r.verdict == v)) for v in _ORDER)
        return "%d grew, %d shrank, %d unchanged" % (n["grew"], n["shrank"], n["unchanged"])

    def verdict_line(self):
        conf = "%g%% confidence" % self.args.confidence
        if self.limit is None:
            return "%s at %s" % (self.counts(), conf)
        if self.flagged:
            return "FAIL: %d function%s grew by more than %s at %s: %s" % (
                len(self.flagged), "" if len(self.flagged) == 1 else "s", self.limit_text(), conf,
                ", ".join(function_text(r) for r in self.flagged[:5]) + (", ..." if len(self.flagged) > 5 else ""))
        return "pass: no function grew by more than %s at %s (%s)" % (self.limit_text(), conf, self.counts())

    def flagged_lines(self):
        lines = []
        for row in self.flagged:
            c = judged(row)
            what = "its share of the rest" if row.rest is not None else "total share"
            lines.append("%s: %s grew by %s (%s -> %s), at least %s at %g%% confidence, more than %s"
                         % (function_text(row), "time" if self.time else what,
                            self.delta(c.delta).lstrip("+") + ("" if self.time else " points"),
                            self.value(c.before), self.value(c.after),
                            self.delta(c.low).lstrip("+") + ("" if self.time else " points"),
                            self.args.confidence, self.limit_text()))
        return lines

    # Markdown -----------------------------------------------------------

    def markdown(self):
        conf = "%g%% interval" % self.args.confidence
        verdict = self.verdict_line()
        if verdict.startswith("FAIL"):
            verdict = "**FAIL**" + verdict[4:]
        elif verdict.startswith("pass"):
            verdict = "**pass**" + verdict[4:]
        out = ["### pysample diff", "", _md_text(self.header()), "", "Verdict: " + _md_text(verdict), "",
               "| Function | Base | Head | Change | %s | Verdict |" % conf, "|---|---:|---:|---:|---|---|"]
        for row in self.shown():
            c = row.change
            verdict = self.verdict_text(row)
            if row in self.flagged:
                verdict = "**%s (over %s)**" % (verdict, self.limit_text())
            out.append("| %s | %s | %s | %s | %s | %s |" % (_md_code(function_text(row)), self.value(c.before),
                                                         self.value(c.after), self.delta(c.delta),
                                                         self.interval(c), _md_text(verdict)))
        more = len(self.rows) - len(self.shown())
        if more > 0:
            out += ["", "%d more functions (`--top 0` lists all)." % more]
        for line in self.footnote():
            out += ["", _md_text(line.replace("* ", "\\* ", 1))]
        return "\n".join(out).rstrip("\n") + "\n"


def _md_text(text):
    """Text for a Markdown paragraph or cell: no HTML, no cell break."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def _md_code(text):
    """A code span (so that `<module>` is not taken for HTML), its `|`
    escaped for the table."""
    fence = "``" if "`" in text else "`"
    return "%s %s %s" % (fence, text.replace("|", "\\|"), fence) if fence == "``" else \
        "`%s`" % text.replace("|", "\\|")
