# deliver.py - record's profiles after the run: every profile the library
# wrote in record's private directory (collect), where each goes (-o, %p,
# plan_outputs), converted or moved there with its quality figures or
# timeline, and the summary that names them.
#
# The library is the only owner of profile names.  record gives it a template
# in a private temporary directory (PRIVATE_TEMPLATE) and afterwards takes
# every profile found there, whatever the library called it: a forked child's
# pysample-<pid>.txt, the image an exec started in the same process
# (pysample-<pid>.1.txt, docs/processes.md), names a later library may use.
# The only part of a name record reads is the %p it put in the template.
#
# SPDX-License-Identifier: MIT

import collections
import json
import os
import re
import shutil
import sys

from . import options, remote, timeline
from .collapsed import describe, parse_collapsed
from .common import PROG, ToolError, file_mode, write_output
from .convert import convert_bytes, is_binary
from .launch import describe_command
from .quality import SIDECAR_SUFFIX, read_sidecar
from .top import format_top

EXTENSIONS = {"collapsed": ".txt", "svg": ".svg", "speedscope": ".json", "pprof": ".pb"}
FORMAT_HINTS = {
    "collapsed": "pysample flamegraph %s -o flame.svg",
    "svg": "open %s in a web browser",
    "speedscope": "load %s at https://www.speedscope.app",
    "pprof": "go tool pprof -http=: %s",
}

PRIVATE_TEMPLATE = "pysample-%p.txt"
TIMELINE_FORMATS = ("speedscope", "collapsed")
_PRIVATE_NAME_RE = re.compile(r"^pysample-(\d+)(.*?)(?:\.txt)?$", re.S)


class Written(collections.namedtuple("Written", "pid extra stem path command")):
    """A profile the library wrote in record's private directory.

    pid: the process, from the %p of the template (None for a name without
    one); extra: whatever else the library put in the name (".1" for the
    image an exec started), "" for a process's first profile; stem: the
    library's name without ".txt"; path: where it is; command: what the
    process ran (tree.py), None when record did not see it run."""

    __slots__ = ()

    @property
    def who(self):
        """The process as the summary names it."""
        return "pid %s" % (self.pid if self.pid is not None else "? (%s)" % self.stem)

    @property
    def named(self):
        """The process and the command it ran, for the summary."""
        return "%s (`%s`)" % (self.who, self.command) if self.command else self.who

    @property
    def image(self):
        """0 for a process's first profile, n for its .n (the n-th exec)."""
        m = re.match(r"^\.(\d+)$", self.extra)
        return int(m.group(1)) if m else 0

    def sort_key(self, main_pid):
        numbers = [int(n) for n in re.findall(r"\d+", self.extra)]
        return (self.pid != main_pid, self.pid is None, self.pid or 0, numbers, self.extra, self.stem)


def collect(workdir):
    """Every profile in the private directory.  Names starting with a dot
    are the library's temporary files (a process killed while writing)."""
    written = []
    for name in os.listdir(workdir):
        path = os.path.join(workdir, name)
        if name.startswith(".") or not os.path.isfile(path) or name.endswith(SIDECAR_SUFFIX) \
                or name.endswith(timeline.SUFFIX):
            continue
        stem = name[:-len(".txt")] if name.endswith(".txt") else name
        m = _PRIVATE_NAME_RE.match(name)
        if m:
            written.append(Written(int(m.group(1)), m.group(2), stem, path, None))
        else:
            written.append(Written(None, "." + stem, stem, path, None))
    return written


def only_started_process(written, main_pid, quiet):
    """--no-subprocesses: the profiles of the process record started (its
    first image and those of Pythons it exec'd), not its children's."""
    kept = [w for w in written if w.pid == main_pid]
    if len(kept) < len(written) and not quiet:
        others = len(set(w.pid if w.pid is not None else w.stem for w in written if w.pid != main_pid))
        sys.stderr.write("%s: --no-subprocesses: left out the profiles of %d other process%s\n"
                         % (PROG, others, "" if others == 1 else "es"))
    return kept


def host_component(hostname):
    """%h as the library writes it: one file name component (a '/' becomes
    '_', a name of only dots '_'s), so that no host name moves a profile to
    another directory (lib/profile/output.c)."""
    if hostname.strip(".") == "":
        return "_" * max(len(hostname), 1)
    return hostname.replace("/", "_")


def expand_template(template, pid, hostname, start):
    """Expands %p %h %t %% the way the library expands PYSAMPLE_OUTPUT,
    which refuses any other %-placeholder (and a lone % at the end): so
    does this, with the library's words."""
    host = host_component(hostname)
    known = {"p": str(pid), "h": host, "t": str(start), "%": "%"}

    def sub(m):
        if m.group(1) not in known:
            raise ToolError("-o '%s' has an unknown %%-placeholder (known: %%p %%h %%t %%%%)" % template)
        return known[m.group(1)]
    return re.sub(r"%(.?)", sub, template)


def _insert_before_ext(path, text):
    stem, ext = os.path.splitext(path)
    return stem + text + ext


def plan_outputs(written, main_pid, output, fmt, hostname, start):
    """{Written: destination}.  Without -o a profile keeps the library's
    name; a template with %p gets each process's pid, and the library's
    extra part before the extension; a name without %p goes to the started
    process's first profile, the others insert .<pid><extra> before the
    extension."""
    ext = EXTENSIONS[fmt]
    plan = {}
    if output is None:
        for w in written:
            plan[w] = os.path.abspath(w.stem + ext)
        return plan
    if re.search(r"%p", output.replace("%%", "")):
        for w in written:
            pid = w.pid if w.pid is not None else w.stem
            plan[w] = os.path.abspath(_insert_before_ext(expand_template(output, pid, hostname, start),
                                                         w.extra if w.pid is not None else ""))
        return plan
    single = expand_template(output, 0, hostname, start)
    for w in written:
        if len(written) == 1 or (w.pid == main_pid and w.extra == ""):
            plan[w] = os.path.abspath(single)
        else:
            pid = "" if w.pid is None else ".%d" % w.pid
            plan[w] = os.path.abspath(_insert_before_ext(single, pid + w.extra))
    return plan


def deliver(rec, written, main_pid):
    """Converts or moves every profile written to its destination and
    prints the summary.  rec is the Recording (record.py): its args,
    command, rate, mode, hostname, start and objects.  Returns True when
    every profile reached its destination."""
    plan = plan_outputs(written, main_pid, rec.args.output, rec.args.format, rec.hostname, rec.start)
    delivered = []
    problems = []
    undelivered = 0
    for w in sorted(written, key=lambda w: w.sort_key(main_pid)):
        done = _deliver_one(rec, w, plan[w], problems)
        if done is _UNDELIVERED:
            undelivered += 1
        elif done is not None:
            delivered.append(done)
    _summarise(rec, delivered, problems)
    return undelivered == 0


# _deliver_one's answer for a profile that stays in the private directory.
_UNDELIVERED = object()


def _deliver_one(rec, w, destination, problems):
    """One profile to its destination: (w, destination, profile) once there
    (profile None for a collapsed profile moved unread), None when it was
    not readable (said in problems), _UNDELIVERED when it could not be
    written (said too)."""
    fmt = rec.args.format
    try:
        profile = options.grouped(parse_collapsed(w.path), rec.args, rec.objects.resolve)
    except ToolError as e:
        problems.append("%s: %s" % (w.who, str(e).replace(w.path + ": ", "").replace(w.path, "profile")))
        profile = None
        if fmt != "collapsed":
            return None
    permissions = file_mode(os.environ)
    try:
        if rec.args.timeline and profile is not None:
            problems.extend(_deliver_timeline(w, destination, fmt, permissions))
        else:
            _convert_or_move(rec, w, profile, destination, permissions)
    except (ToolError, OSError) as e:
        reason = str(e) if isinstance(e, ToolError) else "cannot write %s: %s" % (destination, e.strerror or e)
        problems.append("%s: %s; its profile is kept at %s" % (w.who, reason, w.path))
        return _UNDELIVERED
    if profile is not None:
        profile.path = destination
    return (w, destination, profile)


def _summarise(rec, delivered, problems):
    """The summary on stderr: what was profiled, each profile and where it
    went, the problems, the top functions and what to do next.  With
    --quiet, only the problems."""
    err = sys.stderr
    if rec.args.quiet:
        for problem in problems:
            err.write("%s: %s\n" % (PROG, problem))
        return
    err.write("%s: profiled `%s` at %d Hz (%s-clock time)\n"
              % (PROG, describe_command(rec.command), rec.rate, "CPU" if rec.mode == "cpu" else "wall"))
    for w, path, profile in delivered:
        what = describe(profile) if profile else "no samples"
        quality = remote.describe_quality(read_sidecar(w.path)) if profile else ""
        if quality:
            what += " (%s)" % quality
        err.write("%s: %s: %s -> %s\n" % (PROG, w.named, what, path))
    for problem in problems:
        err.write("%s: %s\n" % (PROG, problem))
    profiles = [(w, p) for w, _, p in delivered if p]
    if profiles:
        err.write("%s: top functions by self samples%s:\n" % (PROG, _scope(w for w, _ in profiles)))
        err.write(format_top([p for _, p in profiles], 10, indent="  "))
        # The busiest process's: a server's master mostly waits for its workers.
        busiest = max((p.total, -i, path) for i, (_, path, p) in enumerate(delivered) if p)[2]
        err.write("%s: next: %s\n" % (PROG, FORMAT_HINTS[rec.args.format]
                                       % _shell_quote(os.path.relpath(busiest))))


def _convert_or_move(rec, w, profile, destination, permissions):
    """Moves or converts one profile to its destination, with the
    permissions PYSAMPLE_FILE_MODE gives the library's own files.  It stays
    in the private directory if this fails."""
    fmt = rec.args.format
    if fmt == "collapsed":
        os.chmod(w.path, permissions)
        shutil.move(w.path, destination)
        _copy_sidecar(w.path, destination, permissions)
        return
    source = profile.path
    profile.path = destination      # speedscope's name for it
    try:
        data = convert_bytes(profile, fmt, rate=rec.rate, mode="cpu" if rec.mode == "cpu" else "wall",
                             quality=read_sidecar(w.path),
                             title="pysample: %s" % describe_command(rec.command),
                             source="the profile of %s" % w.who)
    finally:
        profile.path = source
    write_output(destination, data, binary=is_binary(fmt), mode=permissions)


def _copy_sidecar(source, destination, permissions):
    """The quality figures go beside a collapsed profile (<profile>.quality.json):
    `diff --time` reads the length of a sample from them.  A copy: the
    summary still reads them where the library wrote them."""
    side = source + SIDECAR_SUFFIX
    if os.path.isfile(side):
        shutil.copyfile(side, destination + SIDECAR_SUFFIX)
        os.chmod(destination + SIDECAR_SUFFIX, permissions)


def _deliver_timeline(w, destination, fmt, permissions):
    """record --timeline: the profile and its .timeline beside it
    (collapsed), or speedscope's time-ordered profiles of the timeline.
    Returns what the summary should say; raises ToolError when there is
    nothing to deliver (the profile then stays in the private directory)."""
    side = w.path + timeline.SUFFIX
    if fmt == "collapsed":
        os.chmod(w.path, permissions)
        shutil.move(w.path, destination)
        if not os.path.isfile(side):
            return ["%s: no timeline was written beside the profile" % w.who]
        os.chmod(side, permissions)
        shutil.move(side, destination + timeline.SUFFIX)
        return []
    tl = timeline.parse_timeline(side)
    doc = timeline.to_speedscope_timeline(tl, name=os.path.basename(destination),
                                          quality=read_sidecar(w.path))
    write_output(destination, (json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n")
                 .encode("utf-8"), binary=False, mode=permissions)
    if not tl.header.get("dropped_records"):
        return []
    return ["%s: the timeline met its bound (PYSAMPLE_TIMELINE_MAX=%d records): the last %d samples, "
            "from %.3f s on, are in the totals but not in time order"
            % (w.who, tl.header.get("max_records", 0), tl.header.get("dropped_samples", 0),
               tl.header.get("first_dropped_us", 0) / 1e6)]


def _scope(written):
    """What the top table sums: one profile, every process, or the profiles
    of fewer processes (an exec gives one process a second profile)."""
    written = list(written)
    processes = len(set(w.pid if w.pid is not None else w.stem for w in written))
    if len(written) == 1:
        return ""
    if processes == len(written):
        return " (all %d processes)" % processes
    return " (all %d profiles of %d process%s)" % (len(written), processes, "" if processes == 1 else "es")



def _shell_quote(text):
    if re.match(r"^[A-Za-z0-9_./=:,+-]+$", text):
        return text
    return "'" + text.replace("'", "'\"'\"'") + "'"

