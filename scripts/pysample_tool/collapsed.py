# collapsed.py - the reader of the collapsed format that libpysample writes
# (docs/format.md): the reference reader, shared by every command.
#
# SPDX-License-Identifier: MIT

import collections
import os
import re

from .common import ToolError, printable, thousands

# The collapsed format (docs/format.md)
#
#   thread 4242 (MainThread);main (/srv/app.py:10);Worker.run (/srv/w.py:42) 17
#
# One line per distinct stack, root first, frames separated by ';', then one
# space and a positive sample count.  The first frame names the thread.  A
# Python frame is `qualname (filename:line)`, or `qualname (filename)` when
# the library ran with PYSAMPLE_LINES=0.  Frames the profiler adds itself look
# like `[pysample: ...]`.  Inside names '%', ';', CR, LF and other control
# bytes are written as %XX.

KIND_PY = "py"
KIND_MARKER = "marker"
KIND_NATIVE = "native"

_THREAD_RE = re.compile(r"^thread (\d+|\?)(?: \((.*)\))?$")
_PYFRAME_LINE_RE = re.compile(r"^(.+?) \((.*):(-?\d+)\)$")
_PYFRAME_NOLINE_RE = re.compile(r"^(.+?) \((.+)\)$")
_COUNT_RE = re.compile(r"^[0-9]+$")
# PYSAMPLE_NATIVE frames with no symbol: "libz.so.1+0x5e03", "[unknown]+0x7f..."
# (docs/format.md).  Named native frames, "deflate (libz.so.1)", read as
# "name (file)" frames whose file is the library.
_NATIVE_ADDR_RE = re.compile(r"^(.+)\+0x([0-9a-fA-F]+)$")
# A sub-interpreter's stacks: "interp <id>" right after the thread.
_INTERP_RE = re.compile(r"^interp -?[0-9]+$")
_ESCAPE_RE = re.compile(r"%([0-9A-Fa-f]{2})")


def unescape(text):
    """Undoes the %XX escaping of names and paths."""
    if "%" not in text:
        return text
    return _ESCAPE_RE.sub(lambda m: chr(int(m.group(1), 16)), text)


class Frame(collections.namedtuple("Frame", "kind name file line")):
    """One stack frame.  kind is KIND_PY, KIND_MARKER or KIND_NATIVE.  For
    markers (`[pysample: ...]`, `[native: ...]`, `[task ...]`, `interp <id>`)
    name is the whole text and file and line are None; for an unsymbolised
    native frame name is the whole `library+0x1234` text and file the library.  line is None
    for profiles written with PYSAMPLE_LINES=0."""

    __slots__ = ()

    @property
    def label(self):
        """The frame as the collapsed format shows it, unescaped."""
        if self.kind in (KIND_MARKER, KIND_NATIVE):
            return self.name
        if self.line is None:
            return "%s (%s)" % (self.name, self.file)
        return "%s (%s:%d)" % (self.name, self.file, self.line)

    @property
    def short_label(self):
        """qualname (basename:line): what a flame graph box shows."""
        if self.kind in (KIND_MARKER, KIND_NATIVE):
            return self.name
        base = os.path.basename(self.file) or self.file
        if self.line is None:
            return "%s (%s)" % (self.name, base)
        return "%s (%s:%d)" % (self.name, base, self.line)


class Thread(collections.namedtuple("Thread", "tid name")):
    """tid is None for `thread ?`: a thread whose id the library never saw."""

    __slots__ = ()

    @property
    def tid_text(self):
        return "?" if self.tid is None else str(self.tid)

    @property
    def label(self):
        if self.name is None:
            return "thread %s" % self.tid_text
        return "thread %s (%s)" % (self.tid_text, self.name)

    def sort_key(self):
        return (self.tid is None, self.tid or 0, self.name or "")


class Profile(object):
    """A parsed collapsed profile.

    stacks: list of (Thread, tuple of Frame root first, count), in file order
    with duplicate stacks merged.  total: the number of samples.
    """

    def __init__(self, path):
        self.path = path
        self.stacks = []
        self.total = 0
        self.has_lines = False
        self.dialect = None     # "pysample", or "py-spy" for py-spy's collapsed output

    def threads(self):
        """[(Thread, samples)] by thread id."""
        counts = collections.OrderedDict()
        for thread, _frames, count in self.stacks:
            counts[thread] = counts.get(thread, 0) + count
        return sorted(counts.items(), key=lambda item: item[0].sort_key())


def _malformed(path, lineno, why, text, data):
    if len(text) > 120:
        text = text[:117] + "..."
    hint = _sniff(data) if lineno == 1 else ""
    return ToolError("%s:%d: malformed line: %s: %s%s" % (path, lineno, why, printable(text), hint))


def _sniff(data):
    """A hint when a file is obviously not a collapsed profile."""
    head = data[:512].lstrip()
    if b"\0" in data[:4096]:
        return " (this is a binary file, e.g. a pprof profile; pysample reads the text profiles libpysample writes)"
    if head.startswith(b"<?xml") or head.startswith(b"<svg"):
        return " (this is an SVG or XML file, not a collapsed-stack profile)"
    if head.startswith(b"{"):
        return " (this is a JSON file, not a collapsed-stack profile)"
    return ""


def parse_collapsed(path, data=None):
    """Reads a collapsed profile; raises ToolError for a missing file, an
    empty profile or a malformed line (with its line number)."""
    if data is None:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except (IOError, OSError) as e:
            raise ToolError("cannot read %s: %s" % (path, e.strerror or e))
    profile = Profile(path)
    merged = collections.OrderedDict()
    caches = ({}, {})
    lineno = 0
    for raw in data.split(b"\n"):
        lineno += 1
        line = raw.decode("utf-8", "replace")
        if line.endswith("\r"):
            line = line[:-1]
        if not line.strip():
            continue
        stack_text, sep, count_text = line.rpartition(" ")
        if not sep or not _COUNT_RE.match(count_text):
            raise _malformed(path, lineno, "expected a sample count at the end of the line", line, data)
        count = int(count_text)
        if count <= 0:
            raise _malformed(path, lineno, "the sample count must be positive", line, data)
        parts = stack_text.split(";")
        if profile.dialect is None:
            # The first line says whose file this is: ours start with the
            # thread; py-spy's with its thread, its process or a frame.
            profile.dialect = "pysample" if _THREAD_RE.match(parts[0]) else "py-spy"
        try:
            if profile.dialect == "pysample":
                thread, frames = _read_ours(parts, caches)
            else:
                thread, frames = _read_pyspy(parts, caches)
        except ValueError as e:
            raise _malformed(path, lineno, str(e), line, data)
        key = (thread, tuple(frames))
        merged[key] = merged.get(key, 0) + count
        profile.total += count
    if profile.total == 0:
        raise ToolError("%s: empty profile: it holds no samples (the program may have ended before the "
                        "first sample, or was not a Python program; see docs/troubleshooting.md)" % path)
    profile.stacks = [(thread, frames, count) for (thread, frames), count in merged.items()]
    profile.has_lines = any(f.line is not None for f in caches[1].values())
    return profile


_FIRST_FRAME = "the first frame must be \"thread <tid>\" or \"thread <tid> (<name>)\", not %r"


def _read_ours(parts, caches):
    """(Thread, [Frame]) of one of our lines, split at ';'."""
    thread_cache, frame_cache = caches
    thread = thread_cache.get(parts[0])
    if thread is None:
        m = _THREAD_RE.match(parts[0])
        if not m:
            raise ValueError(_FIRST_FRAME % parts[0][:60])
        name = m.group(2)
        tid = None if m.group(1) == "?" else int(m.group(1))
        thread = thread_cache[parts[0]] = Thread(tid, unescape(name) if name is not None else None)
    frames = []
    for index, text in enumerate(parts[1:], 2):
        frame = frame_cache.get(text)
        if frame is None:
            frame = _parse_frame(text)
            if frame is None:
                raise ValueError("frame %d is neither \"name (file:line)\", \"name (file)\", "
                                 "\"library+0x...\" nor a \"[...]\" marker: %r" % (index, text[:60]))
            frame_cache[text] = frame
        frames.append(frame)
    return thread, frames


# py-spy's raw (collapsed) output: `process 4242:"python3 app.py";` with
# --subprocesses, `thread (4243): name;` or `thread (0x7f...);` with
# --threads, then `function (file:line)` frames root first, native ones
# (--native) `0x7f3a... (libc.so.6)` where no symbol names them.
_PYSPY_PROCESS_RE = re.compile(r'^process (\d+):"(.*)"$')
_PYSPY_THREAD_RE = re.compile(r"^thread \((\d+|0x[0-9A-Fa-f]+)\)(?:: (.*))?$")
_PYSPY_ADDR_RE = re.compile(r"^0x([0-9A-Fa-f]+) \((.+)\)$")
_PYSPY_NO_THREAD = Thread(None, "py-spy: all threads")


def _read_pyspy(parts, caches):
    """(Thread, [Frame]) of a line of py-spy's collapsed output.  A profile
    recorded without --threads has no thread: its stacks all go to one
    `thread ? (py-spy: all threads)`.  The process of --subprocesses is a
    `[process PID: command]` marker below the thread."""
    thread_cache, frame_cache = caches
    frames = []
    m = _PYSPY_PROCESS_RE.match(parts[0])
    if m:
        frames.append(Frame(KIND_MARKER, "[process %s: %s]" % (m.group(1), m.group(2)), None, None))
        parts = parts[1:]
    thread = _PYSPY_NO_THREAD
    if parts and parts[0].startswith("thread "):
        thread = thread_cache.get(parts[0])
        if thread is None:
            m = _PYSPY_THREAD_RE.match(parts[0])
            if not m:
                raise ValueError(_FIRST_FRAME % parts[0][:60])
            tid = int(m.group(1), 16) if m.group(1).startswith("0x") else int(m.group(1))
            thread = thread_cache[parts[0]] = Thread(tid, m.group(2))
        parts = parts[1:]
    for text in parts:
        frame = frame_cache.get(text)
        if frame is None:
            frame = frame_cache[text] = _parse_pyspy_frame(text)
        frames.append(frame)
    return thread, frames


def _parse_pyspy_frame(text):
    m = _PYSPY_ADDR_RE.match(text)
    if m:
        # An absolute address: only its object is worth keeping (it is
        # grouped as [libc.so.6] like our frames without a symbol).
        return Frame(KIND_NATIVE, "%s+0x%s" % (m.group(2), m.group(1)), m.group(2), None)
    frame = _parse_frame(text)
    if frame is None:
        # Other folded files (perf's, flamegraph.pl's) name frames freely.
        frame = Frame(KIND_MARKER, text, None, None)
    return frame


def _parse_frame(text):
    # Markers are bracketed: the library's own ("[pysample: truncated]"), the
    # native unwinder's ("[native: truncated]") and asyncio tasks
    # ('[task Task-3 "handle"]').
    if (text.startswith("[") and text.endswith("]")) or _INTERP_RE.match(text):
        return Frame(KIND_MARKER, unescape(text), None, None)
    m = _PYFRAME_LINE_RE.match(text)
    if m:
        return Frame(KIND_PY, unescape(m.group(1)), unescape(m.group(2)), int(m.group(3)))
    m = _PYFRAME_NOLINE_RE.match(text)
    if m:
        return Frame(KIND_PY, unescape(m.group(1)), unescape(m.group(2)), None)
    m = _NATIVE_ADDR_RE.match(text)
    if m and " " not in text:
        return Frame(KIND_NATIVE, unescape(text), unescape(m.group(1)), None)
    return None


def describe(profile):
    """`1,234 samples in 2 threads, line numbers on`: a profile in a line."""
    threads = profile.threads()
    return "%s samples in %d thread%s, line numbers %s%s" % (
        thousands(profile.total), len(threads), "" if len(threads) == 1 else "s",
        "on" if profile.has_lines else "off", ", py-spy's format" if profile.dialect == "py-spy" else "")


def group_native_addresses(profile, resolve=None):
    """Merges the native frames that have no symbol (`lib.so+0x2e2cb0`,
    `lib.so+0x2e2cc6`, ...): a stripped extension is then one row of `top`
    and one box of a flame graph instead of one per address (numpy gave
    forty).  The library has named every address its object's .symtab or
    .dynsym covers; what is left is code no symbol it reads describes.

    resolve(library, offset), where the objects can be read (record, on the
    machine that ran them), gives (name, inside) from more symbol tables
    (elfsyms.py): inside a symbol, the frame is that function's, as if the
    library had named it; past one, `name+... (library)`, everything up to
    the next symbol.  Otherwise the frame becomes its object, `[lib.so]`
    (`[unknown]+0x7f...`, in no object: `[unknown]`).  A run of one such
    group in a row is one frame; identical stacks are added up.  Returns
    the profile."""
    merged = collections.OrderedDict()
    grouped = {}
    for thread, frames, count in profile.stacks:
        out = []
        for frame in frames:
            if frame.kind == KIND_NATIVE:
                group = grouped.get(frame)
                if group is None:
                    group = grouped[frame] = _native_group(frame, resolve)
                frame = group
                if out and out[-1] == frame and (frame.kind == KIND_NATIVE or frame.name.endswith("+...")):
                    continue
            out.append(frame)
        key = (thread, tuple(out))
        merged[key] = merged.get(key, 0) + count
    profile.stacks = [(thread, frames, count) for (thread, frames), count in merged.items()]
    return profile


_TASK_MARKER_RE = re.compile(r'^\[task (.*) "([^"]*)"\]$')
_AUTO_TASK_NAME_RE = re.compile(r"^Task-\d+$")


def merge_task_names(profile, keep="auto"):
    """The asyncio task markers as the commands show them (docs/format.md,
    asyncio tasks).  The library writes each task's name and coroutine,
    `[task Task-135 "handle"]`; a server's tasks are each named anew by
    asyncio (Task-1, Task-2 ...), so a flame graph split into one sliver
    per request (issue #35: ~80).  keep "auto": asyncio's own Task-N names
    are dropped, `[task "handle"]`, one box per coroutine; names the
    program gave are kept.  "none": every task by its coroutine only.
    "all": every name kept, as in the file.  Identical stacks are added
    up.  Returns the profile."""
    if keep == "all":
        return profile
    merged = collections.OrderedDict()
    renamed = {}
    for thread, frames, count in profile.stacks:
        out = []
        for frame in frames:
            if frame.kind == KIND_MARKER and frame.name.startswith("[task "):
                new = renamed.get(frame.name)
                if new is None:
                    new = renamed[frame.name] = _task_by_coroutine(frame, keep)
                frame = new
            out.append(frame)
        key = (thread, tuple(out))
        merged[key] = merged.get(key, 0) + count
    profile.stacks = [(thread, frames, count) for (thread, frames), count in merged.items()]
    return profile


def _task_by_coroutine(frame, keep):
    m = _TASK_MARKER_RE.match(frame.name)
    if m is None or (keep == "auto" and not _AUTO_TASK_NAME_RE.match(m.group(1))):
        return frame
    return Frame(KIND_MARKER, '[task "%s"]' % m.group(2), None, None)


def _native_group(frame, resolve):
    m = _NATIVE_ADDR_RE.match(frame.name)
    if resolve is not None and m and not frame.file.startswith("["):
        found = resolve(frame.file, int(m.group(2), 16))
        if found is not None and found[0]:
            name, inside = found
            return Frame(KIND_PY, name if inside else name + "+...", frame.file, None)
    name = frame.file if frame.file.startswith("[") else "[%s]" % frame.file
    return Frame(KIND_NATIVE, name, frame.file, None)
