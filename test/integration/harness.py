"""Shared machinery of the integration tests.

A test is a function test_<name>(ctx) in one of the test_*.py modules; it
runs real programs under the interpreter being tested with libpysample
preloaded, parses the profiles they leave and asserts on what a user would
see.  ctx is a Context; failing means raising AssertionError (use ctx.check
and friends for messages that say what was expected and what came).

The suite must pass on a loaded machine, where the sampler wakes late and
takes fewer samples per second than its rate.  A program whose samples a
test counts therefore runs until the sampler has looked at it often enough
(programs/sampled.py: at least its stated time, then on until N sampler
ticks), never for a fixed time alone; a test that only needs a function to
appear asserts that it appears, not how often.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, "programs")

# The tests' own readers of the formats, shared with the tool tests.
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "helpers"))
from formats import decode_pprof, unescape, values_by_leaf  # noqa: E402,F401


def once(fn):
    """Marks a scenario whose outcome does not depend on the interpreter
    (the library's own settings, the control protocol, the CPU budget):
    run.py runs it under the primary interpreter only (run.py --primary).
    What it asserts about the profile's content (frames, names, lines,
    threads, tasks) must be asserted under every interpreter by another
    scenario; a scenario about how the library reads a version's memory is
    never one of these."""
    fn.once = True
    return fn


def not_emulated(why):
    """Marks a scenario that cannot hold under an emulator (scripts/
    cross-arm64 runs aarch64 interpreters under qemu-user): why says what
    of the emulator breaks it.  run.py reports it skipped there, with why."""
    def mark(fn):
        fn.not_emulated = why
        return fn
    return mark


class Skip(Exception):
    """Raised by a test that does not apply to this interpreter."""


class Frame:
    __slots__ = ("name", "file", "line", "raw")

    def __init__(self, raw):
        self.raw = raw
        m = re.match(r"^(.*) \((.*?)(?::(-?\d+))?\)$", raw)
        if m and not raw.startswith("[pysample:") and not raw.startswith("thread "):
            self.name = unescape(m.group(1))
            self.file = unescape(m.group(2))
            self.line = int(m.group(3)) if m.group(3) is not None else None
        else:
            self.name, self.file, self.line = unescape(raw), None, None

    def __repr__(self):
        return self.raw


def wait_for(cond, seconds, step=0.01):
    """Polls cond() every step seconds until it is true or seconds have
    passed; returns its last value (the caller checks it)."""
    give_up = time.monotonic() + seconds
    while not cond() and time.monotonic() < give_up:
        time.sleep(step)
    return cond()


class Stack:
    def __init__(self, thread, frames, count):
        self.thread = thread
        self.frames = frames
        self.count = count

    def names(self):
        return [f.name for f in self.frames]

    def __repr__(self):
        return "%s;%s %d" % (self.thread, ";".join(f.raw for f in self.frames), self.count)


# The count that ends every line of a profile.
COUNT = re.compile(r"\d+\Z")


class Profile:
    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            data = f.read()
        self.text = data.decode("utf-8")  # must be valid UTF-8
        self.stacks = []
        # One Frame per distinct frame text: the stress programs leave tens
        # of MB of stacks thousands of frames deep, made of a few hundred
        # distinct frames, and parsing each occurrence took seconds per
        # profile.  Frames are never modified, so sharing them is safe.
        frames = {}
        for n, line in enumerate(self.text.splitlines(), 1):
            stack, sep, count = line.rpartition(" ")
            if not sep or not stack or not COUNT.match(count):
                raise AssertionError("%s:%d: malformed line %r" % (path, n, line))
            parts = stack.split(";")
            if not parts[0].startswith("thread "):
                raise AssertionError("%s:%d: first frame is not a thread: %r" % (path, n, line))
            got = []
            for p in parts[1:]:
                f = frames.get(p)
                if f is None:
                    f = frames[p] = Frame(p)
                got.append(f)
            self.stacks.append(Stack(parts[0], got, int(count)))
        if not self.text.endswith("\n") and self.text:
            raise AssertionError("%s: last line not terminated (truncated file?)" % path)

    @property
    def total(self):
        return sum(s.count for s in self.stacks)

    def threads(self):
        return sorted({s.thread for s in self.stacks})

    def count_where(self, pred):
        return sum(s.count for s in self.stacks if pred(s))

    def with_frame(self, name, file_suffix=None, line=None):
        """Samples whose stack contains a matching frame."""
        def match(f):
            return (f.name == name and (file_suffix is None or (f.file or "").endswith(file_suffix))
                    and (line is None or f.line == line))
        return self.count_where(lambda s: any(match(f) for f in s.frames))

    def leaf_count(self, name, line=None):
        return self.count_where(lambda s: s.frames and s.frames[-1].name == name
                                and (line is None or s.frames[-1].line == line))

    def dump(self, limit=25):
        top = sorted(self.stacks, key=lambda s: -s.count)[:limit]
        return "\n".join("    " + repr(s)[:400] for s in top)


class Result:
    def __init__(self, proc, outdir, elapsed):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.outdir = outdir
        self.elapsed = elapsed
        self.files = sorted(os.listdir(outdir))

    def profile(self, name=None):
        files = [f for f in self.files if not f.startswith(".")]
        if name is None:
            if len(files) != 1:
                raise AssertionError("expected exactly one profile, found %r\nstderr:\n%s"
                                     % (files, self.stderr))
            name = files[0]
        return Profile(os.path.join(self.outdir, name))


# The one line the library may print about a profile that is otherwise
# fine: on a very loaded machine the sampler wakes late, and the achieved
# rate falls under half the requested one (issue #17 wants it said).
RATE_NOTE = re.compile(r"^pysample: the profile of process \d+ was sampled [0-9.]+ times a "
                       r"second, not the \d+ requested ", re.M)


def other_lines(stderr):
    """Every non-empty line of stderr except the achieved-rate note: what a
    run that must print nothing may print on a loaded machine."""
    return [l for l in stderr.splitlines() if l and not RATE_NOTE.match(l)]


def our_messages(stderr):
    """The library's lines on stderr, except the achieved-rate note: those
    of other_lines that are ours."""
    return [l for l in other_lines(stderr) if l.startswith("pysample:")]


def program_lines(path, marker):
    """Line number of the line carrying the comment '# <marker>'."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.rstrip().endswith("# " + marker):
                return n
    raise AssertionError("marker %r not found in %s" % (marker, path))


class Context:
    def __init__(self, python, lib, label, version, tmp_root):
        self.python = python
        self.lib = lib
        # The build dir of the files built for the tests (built()): run.py
        # --build, else the one lib is in (BUILD/lib/libpysample.so).
        self.build = os.path.dirname(os.path.dirname(lib))
        self.label = label
        self.version = version  # (major, minor)
        self.tmp_root = tmp_root
        self.stress = int(os.environ.get("PYSAMPLE_STRESS_ITERATIONS", "1") or 1)
        self.forced_env = {}  # run.py --env: over every run's own settings
        self.primary = False  # run.py --primary
        # A musl interpreter (test/find_pythons.py: its ELF interpreter).
        sys.path.insert(0, os.path.dirname(HERE))
        import find_pythons
        self.musl = find_pythons.libc_of(python) == "musl"

    def program(self, name):
        return os.path.join(PROGRAMS, name)

    def built(self, rel, var):
        """A file the build makes for the tests: $var if set (test/meson.build
        sets it), else rel under the build dir.  Missing: the scenario fails
        saying where it looked and how to give it."""
        path = os.environ.get(var) or os.path.join(self.build, rel)
        self.check(os.path.exists(path),
                   "%s is missing (looked at %s): `meson compile -C BUILD` makes it; with --lib "
                   "outside its build dir, pass run.py --build BUILD or set %s"
                   % (os.path.basename(rel), path, var))
        return path

    def tmpdir(self):
        return tempfile.mkdtemp(dir=self.tmp_root)

    def env(self, extra=None, preload=True):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PYSAMPLE_") and
               k not in ("LD_PRELOAD", "DYLD_INSERT_LIBRARIES", "PYTHONPATH")}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        if preload:
            # macOS loads it through dyld's variable (docs/macos.md).
            env["DYLD_INSERT_LIBRARIES" if sys.platform == "darwin" else "LD_PRELOAD"] = self.lib
        env.update(extra or {})
        if preload:
            env.update(self.forced_env)
        return env

    def run(self, args, output="prof.%p.txt", env=None, timeout=120, preload=True,
            outdir=None, python=True, cwd=None, stdin=None):
        """Runs python args (or a plain command when python=False) with the
        library preloaded and PYSAMPLE_OUTPUT=<fresh dir>/<output>."""
        outdir = outdir or self.tmpdir()
        e = {}
        if output is not None:
            e["PYSAMPLE_OUTPUT"] = os.path.join(outdir, output)
        e.update(env or {})
        cmd = ([self.python] + list(args)) if python else list(args)
        env = self.env(e, preload)
        if self.musl and preload and not python and self.python in cmd:
            # This machine's prlimit, unshare, setpriv and sh are glibc
            # programs, into which the musl library cannot load: the
            # interpreter they start gets it through env(1) instead.
            i = cmd.index(self.python)
            cmd[i:i] = ["env", "LD_PRELOAD=" + env.pop("LD_PRELOAD")]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                              timeout=timeout, cwd=cwd, stdin=stdin)
        return Result(proc, outdir, time.monotonic() - t0)

    # --- assertions with useful messages ---

    def check(self, cond, msg, *extra):
        if not cond:
            raise AssertionError(msg + "".join("\n" + str(x) for x in extra))

    def check_clean_run(self, res, expect_rc=0):
        self.check(res.rc == expect_rc, "exit status %s, expected %s" % (res.rc, expect_rc),
                   "stdout:\n" + res.stdout[-2000:], "stderr:\n" + res.stderr[-2000:])
        self.check(not our_messages(res.stderr), "unexpected message on stderr",
                   res.stderr[-2000:])

    def qual(self, cls, meth):
        """The name a method shows with: qualname on 3.11+, bare before."""
        return "%s.%s" % (cls, meth) if self.version >= (3, 11) else meth

    def skip(self, why):
        raise Skip(why)
