"""Item 13 of test/bench/run.py: libpysample beside the profilers users pick
instead (issue 36), on the same programs, interleaved and pinned.

    scripts/bench --peers [--quick] [--python PATH ...]

Peers, installed by this file into a venv per interpreter OUTSIDE the
repository (~/.cache/pysample/bench-peers/<label>/, PYSAMPLE_BENCH_PEERS
overrides) with pip; a peer that cannot be had, or that does not profile
the interpreter (tried on a short script first), is skipped with one
line.  An interpreter built without ssl gets its wheels through this
one's pip (`pip download --python-version X.Y`, binary wheels only):
  py-spy      `py-spy record -f raw`, default blocking mode and
              --nonblocking; wall = --idle, cpu = its default (idle
              samples dropped), gil = --gil.  Out of process: ptrace
              access to the target (process_vm_readv; blocking mode also
              PTRACE_ATTACH), i.e. root / CAP_SYS_PTRACE to attach, or a
              parent-child relation under Yama ptrace_scope 1.
  austin      `austin -i US -o FILE` (wall), `-s` (cpu).  austin-dist 4
              needs glibc 2.38; on older systems the last 3.x is taken.
              Out of process, same privilege as py-spy.
  ddtrace     Datadog's profiler, stack collector only (lock, memory, heap,
              exception collectors off), `ddtrace-run`, writing pprof to
              DD_PROFILING_OUTPUT_PPROF (no agent).  Its interval adapts
              to a 1 % CPU budget between 100 us and
              _DD_PROFILING_STACK_ADAPTIVE_SAMPLING_MAX_INTERVAL_US (100 us
              .. 100 ms): that maximum is set to the requested interval,
              so it samples at that rate unless its budget is left.  One
              run gives wall and CPU.  Stacks are cut at
              DD_PROFILING_MAX_FRAMES, at most 599 (set to 599 here).
  profiling.sampling
              CPython 3.15's own sampler (the standard library: nothing to
              install; only on 3.15+, it profiles only its own version, a
              pre-release only the very same one): `python -m
              profiling.sampling run -a -r RATE --mode wall|cpu|gil
              --collapsed -o FILE script args`, its default non-blocking
              reads and --blocking (threads stopped for each sample; wall
              and gil only: --mode cpu is empty then).  Out of process:
              process_vm_readv (--blocking: PTRACE_SEIZE) on the child it
              starts; `attach PID` needs the same of a process that is not
              its child (Yama ptrace_scope 0, or CAP_SYS_PTRACE).

Programs (test/bench/workload.py):
  cost    `workload.py cpu N`, CPU-bound: added CPU (user+sys of the whole
          process tree: an out-of-process peer's too) per sample and wall
          slowdown, each paired with the bare run of the same round.
  truth   `workload.py truth S OUT`: a thread burning / sleeping / in
          select() (its true per-phase wall and CPU written by the program)
          and a thread running 800 frames deep.  Accuracy = the largest
          difference, in points, between a phase's share in the profile
          and its true share (wall mode: of the loop's wall time; cpu mode:
          of its CPU time); deep = the share of the deep thread's samples
          with all 800 deep_rec frames; rate = the main thread's samples
          in the wall-mode profile over the loop's wall time.
  pass    `python -c pass`, in the same rounds: the start-up, added wall
          and CPU; the cost figures are taken less each run's own.
Memory: the profiled program's peak RSS (its own getrusage) and, for an
out-of-process peer, the peer process's VmHWM (polled until it exits).
Everything is pinned to CPU 0 (taskset), the peers' processes included.
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
import formats  # noqa: E402  (test/helpers: the tests' pprof reader)
WORKLOAD = os.path.join(HERE, "workload.py")
RATES = (100, 1000, 10000)
DEEP = 800
PHASES = ("burn", "sleep", "select")


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


# ---- getting the peers ------------------------------------------------------

def peers_home():
    return os.environ.get("PYSAMPLE_BENCH_PEERS",
                          os.path.expanduser("~/.cache/pysample/bench-peers"))


def _pip(venv, *args):
    """pip install args into venv.  An interpreter built without ssl (the
    hand-built 3.15 and main here) cannot reach PyPI: the wheels for its
    version are then fetched by this interpreter's pip and installed from
    a directory (binary wheels only: no build from source)."""
    vpy = os.path.join(venv, "bin", "python")
    cmd = [vpy, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if not _runs([vpy, "-c", "import ssl"]):
        wheels = os.path.join(venv, "wheels")
        ver = subprocess.run([vpy, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True).stdout.strip()
        p = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                            "--only-binary=:all:", "--python-version", ver, "-d", wheels] + list(args),
                           capture_output=True, text=True)
        if p.returncode != 0:
            return False, _pip_why(p.stderr)
        cmd += ["--no-index", "--find-links", wheels]
    p = subprocess.run(cmd + list(args), capture_output=True, text=True)
    return p.returncode == 0, _pip_why(p.stderr)


def _pip_why(stderr):
    """pip's reason in one line: a Requires-Python that excludes this
    version says more than its last line."""
    m = re.findall(r"\S+ Requires-Python ([^;\s]+)", stderr)
    if m:
        return "no release for this Python (releases require Python %s)" % max(set(m), key=m.count)
    return (stderr.strip().splitlines() or [""])[-1]


def _runs(argv):
    try:
        return subprocess.run(argv, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _probe(venv, argv):
    """None if argv (a profiler's command line) profiles a short busy
    script under this venv's interpreter and writes something, else its
    last line: a peer that installs may still not know this version."""
    script = os.path.join(venv, "probe.py")
    with open(script, "w") as f:
        # 1 s: py-spy needs some 0.4 s to attach on a loaded machine.
        f.write("import time\nt = time.time()\nwhile time.time() - t < 1:\n    pass\n")
    out = os.path.join(venv, "probe.out")
    if os.path.exists(out):
        os.unlink(out)
    try:
        p = subprocess.run([a.replace("{out}", out) for a in argv] + [os.path.join(venv, "bin", "python"), script],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    wrote = os.path.exists(out) and os.path.getsize(out) > 0
    if os.path.exists(out):
        os.unlink(out)
    if p.returncode == 0 and wrote:
        return None
    # The first sentence of its last paragraph, banner lines (terminal
    # escapes) left out.
    text = "\n".join(l for l in (p.stderr + p.stdout).splitlines() if not l.startswith("\x1b"))
    said = [re.split(r"(?<=\.)\s", " ".join(para.split()))[0] for para in re.split(r"\n\s*\n", text) if para.strip()]
    return "exited %d%s: %s" % (p.returncode, "" if wrote else ", no profile", (said or ["(nothing said)"])[-1][:160])


def setup(label, py):
    """The peers available for interpreter py: {name: path or python},
    installing them on first use; one line per peer that cannot be had."""
    venv = os.path.join(peers_home(), label)
    have = {}
    vpy = os.path.join(venv, "bin", "python")
    if not os.path.exists(vpy):
        p = subprocess.run([py, "-m", "venv", venv], capture_output=True, text=True)
        if p.returncode != 0:
            log("peers %s: no venv (%s): py-spy, austin and ddtrace skipped" % (label, p.stderr.strip()[-200:]))
            return have, py
    b = os.path.join(venv, "bin")
    if not os.path.exists(os.path.join(b, "py-spy")):
        ok, why = _pip(venv, "py-spy")
        if not ok:
            log("peers %s: py-spy skipped: pip install py-spy failed: %s" % (label, why))
    if _runs([os.path.join(b, "py-spy"), "--version"]):
        why = _probe(venv, [os.path.join(b, "py-spy"), "record", "-r", "100", "-f", "raw", "-o", "{out}", "--"])
        if why:
            log("peers %s: py-spy skipped: it does not profile this interpreter (%s)" % (label, why))
        else:
            have["py-spy"] = os.path.join(b, "py-spy")
    austin = os.path.join(b, "austin")
    if not _runs([austin, "-V"]):
        _pip(venv, "austin-dist")
        if not _runs([austin, "-V"]):
            # austin-dist 4 is linked against glibc 2.38.
            _pip(venv, "austin-dist<4")
    if not _runs([austin, "-V"]):
        log("peers %s: austin skipped: no austin-dist from pip runs here" % label)
    else:
        why = _probe(venv, [austin, "-i", "10ms", "-o", "{out}"])
        if why:
            log("peers %s: austin skipped: it does not profile this interpreter (%s)" % (label, why))
        else:
            have["austin"] = austin
    if not _runs([vpy, "-c", "import ddtrace.profiling"]):
        ok, why = _pip(venv, "ddtrace")
        if not ok:
            log("peers %s: ddtrace skipped: pip install ddtrace failed: %s" % (label, why))
    if _runs([vpy, "-c", "import ddtrace.profiling"]) and os.path.exists(os.path.join(b, "ddtrace-run")):
        have["ddtrace"] = os.path.join(b, "ddtrace-run")
    # CPython's own sampler (3.15+, the standard library: nothing to
    # install) profiles only its own version: a pre-release only the very
    # same one.  The venv's python runs it, as it runs the programs.
    if _runs([vpy, "-c", "import sys, profiling.sampling; sys.exit(sys.version_info < (3, 15))"]):
        why = _probe(venv, [vpy, "-m", "profiling.sampling", "run", "-a", "-r", "100", "--collapsed", "-o", "{out}"])
        if why:
            log("peers %s: profiling.sampling skipped: %s" % (label, why))
        else:
            have["tachyon"] = vpy
    elif _runs([vpy, "-c", "import sys; sys.exit(sys.version_info < (3, 15))"]):
        log("peers %s: profiling.sampling skipped: not importable" % label)
    return have, vpy


def versions(have, vpy):
    out = {}
    for name, argv in (("py-spy", [have.get("py-spy"), "--version"]), ("austin", [have.get("austin"), "-V"]),
                       ("ddtrace", [vpy, "-c", "import ddtrace; print(ddtrace.__version__)"])):
        if name in have:
            p = subprocess.run(argv, capture_output=True, text=True)
            out[name] = (p.stdout + p.stderr).strip().splitlines()[0] if (p.stdout + p.stderr).strip() else "?"
    if "tachyon" in have:
        p = subprocess.run([have["tachyon"], "-c", "import platform; print(platform.python_version())"],
                           capture_output=True, text=True)
        out["profiling.sampling"] = "of " + (p.stdout.strip() or "?")
    return out


# ---- one profiled run -------------------------------------------------------

class Variant:
    """A profiler configuration: name, the modes it has, and how to run a
    program under it at a rate in a mode."""

    def __init__(self, name, modes, build, parse, privilege, out_of_process=False):
        self.name, self.modes, self.build, self.parse = name, modes, build, parse
        self.privilege, self.out_of_process = privilege, out_of_process


def _env_base():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSAMPLE_", "DD_", "_DD_")) and k not in ("LD_PRELOAD", "PYTHONPATH")}
    return env


def variants(ctx, have):
    """The variants to measure: bare, libpysample, then each peer present."""
    V = []

    def bare(py, argv, rate, mode, out):
        return [py] + argv, _env_base()
    V.append(Variant("bare", ("wall",), bare, None, "-"))

    def ours(py, argv, rate, mode, out):
        env = _env_base()
        env.update(LD_PRELOAD=ctx.lib, PYSAMPLE_OUTPUT=out, PYSAMPLE_RATE=str(rate),
                   PYSAMPLE_MODE="cpu" if mode == "cpu" else "wall")
        if mode == "gil":
            env["PYSAMPLE_GIL"] = "1"
        return [py] + argv, env
    V.append(Variant("libpysample", ("wall", "cpu", "gil"), ours, parse_folded, "none (LD_PRELOAD)"))

    if "py-spy" in have:
        for nb in (False, True):
            def spy(py, argv, rate, mode, out, nb=nb):
                a = [have["py-spy"], "record", "-r", str(rate), "-f", "raw", "-o", out]
                a += {"wall": ["--idle"], "cpu": [], "gil": ["--gil"]}[mode]
                a += ["--nonblocking"] if nb else []
                return a + ["--", py] + argv, _env_base()
            V.append(Variant("py-spy" + (" --nonblocking" if nb else ""),
                             ("wall", "cpu") + (() if nb else ("gil",)), spy, parse_folded,
                             "ptrace (process_vm_readv%s)" % ("" if nb else "; stops threads"), True))
    if "austin" in have:
        def aus(py, argv, rate, mode, out):
            a = [have["austin"], "-i", "%dus" % max(1, 1000000 // rate), "-o", out]
            return a + (["-s"] if mode == "cpu" else []) + [py] + argv, _env_base()
        V.append(Variant("austin", ("wall", "cpu"), aus, parse_austin, "ptrace (process_vm_readv)", True))
    if "ddtrace" in have:
        def dd(py, argv, rate, mode, out):
            env = _env_base()
            env.update(DD_PROFILING_ENABLED="true", DD_PROFILING_OUTPUT_PPROF=out,
                       DD_PROFILING_LOCK_ENABLED="false", DD_PROFILING_MEMORY_ENABLED="false",
                       DD_PROFILING_HEAP_ENABLED="false", DD_PROFILING_EXCEPTION_ENABLED="false",
                       DD_TRACE_ENABLED="false", DD_INSTRUMENTATION_TELEMETRY_ENABLED="false",
                       DD_REMOTE_CONFIGURATION_ENABLED="false", DD_PROFILING_MAX_FRAMES="599",
                       _DD_PROFILING_STACK_ADAPTIVE_SAMPLING_MAX_INTERVAL_US=str(
                           min(100000, max(100, 1000000 // rate))))
            return [have["ddtrace"], py] + argv, env
        V.append(Variant("ddtrace", ("wall+cpu",), dd, parse_pprof, "none (in-process; ddtrace-run)"))
    if "tachyon" in have:
        # `run` starts the program itself (a child, so Yama's ptrace_scope 1
        # lets it read it) and reads its memory from outside with
        # process_vm_readv; --blocking also stops every thread for each
        # sample (PTRACE_SEIZE + PTRACE_INTERRUPT).  Below 100 us to the next
        # sample it spins instead of sleeping: at 10 kHz a whole CPU, here
        # the profiled program's.
        for blocking in (False, True):
            def ty(py, argv, rate, mode, out, blocking=blocking):
                a = [have["tachyon"], "-m", "profiling.sampling", "run", "-a", "-r", str(rate), "--mode", mode,
                     "--collapsed", "-o", out] + (["--blocking"] if blocking else [])
                return a + _script(argv, out), _env_base()
            # --blocking --mode cpu writes an empty profile: a thread it has
            # stopped to read is never on CPU (3.15.0rc1).
            V.append(Variant("profiling.sampling" + (" --blocking" if blocking else ""),
                             ("wall", "gil") if blocking else ("wall", "cpu", "gil"),
                             ty, parse_tachyon, "ptrace (process_vm_readv%s)" % ("; stops threads" if blocking else ""),
                             True))
    return V


def _script(argv, out):
    """argv as `run` takes it: a script, not -c (`python -c pass` becomes
    a file holding `pass` beside the profile, removed with it)."""
    if argv[:1] != ["-c"]:
        return argv
    path = out + ".script.py"
    with open(path, "w") as f:
        f.write(argv[1] + "\n")
    return [path] + argv[2:]


def run_tree(argv, env, watch_rss=False, check=True):
    """Runs argv pinned to CPU 0: (wall s, user+sys s of the tree, its
    stderr and stdout in one (profiling.sampling reports on stdout), the
    top process's peak RSS KiB if watch_rss)."""
    argv = ["taskset", "-c", "0"] + argv
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    hwm = 0
    err = b""
    if watch_rss:
        import threading
        chunks = []
        t = threading.Thread(target=lambda: chunks.append(p.stdout.read()))
        t.start()
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            hwm = max(hwm, _vmhwm(p.pid))
            time.sleep(0.02)
        t.join()
        err = b"".join(chunks)
    else:
        _, status, ru = os.wait4(p.pid, 0)
        err = p.stdout.read()
    wall = time.perf_counter() - t0
    p.stdout.close()
    p.returncode = os.waitstatus_to_exitcode(status)
    err = err.decode(errors="replace")
    if p.returncode != 0 and check:
        raise RuntimeError("%s exited %d: %s" % (" ".join(argv), p.returncode, err[-1500:]))
    return wall, ru.ru_utime + ru.ru_stime, err, hwm, p.returncode


def _vmhwm(pid):
    # taskset execs the peer in place: the pid is the peer's.
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


# ---- reading the profiles ---------------------------------------------------

def _name_paren(frame):
    """`func (file:line)` (libpysample, py-spy) -> func, qualifier dropped."""
    return frame.split(" (", 1)[0].rsplit(".", 1)[-1]


def parse_folded(path):
    """libpysample and py-spy raw: [(names root first, count, weight)]."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            stack, _, n = line.rpartition(" ")
            try:
                n = float(n)
            except ValueError:
                continue
            names = [_name_paren(fr) for fr in stack.split(";")]
            out.append((names, n, {"wall": n, "cpu": n}))
    return out


def parse_austin(path):
    """austin 3: `P<pid>;T<iid>:<tid>;file:func:line;... <us>`, one line
    per sample (or per metric in full mode)."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.startswith("P"):
                continue
            stack, _, n = line.rpartition(" ")
            try:
                us = float(n.split(",")[0])
            except ValueError:
                continue
            names = [fr.rsplit(":", 2)[-2] if fr.count(":") >= 2 else fr for fr in stack.split(";")[2:]]
            out.append((names, 1, {"wall": us, "cpu": us}))
    return out


def parse_tachyon(path):
    """profiling.sampling --collapsed: `tid:<tid>;<file>:<qualname>:<line>;...
    <count>`, root first (a file name holding ':' keeps the last two)."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            try:
                n = float(n)
            except ValueError:
                continue
            frames = stack.split(";")[1:]
            names = [(fr.rsplit(":", 2)[-2] if fr.count(":") >= 2 else fr).rsplit(".", 1)[-1] for fr in frames]
            out.append((names, n, {"wall": n, "cpu": n}))
    return out


def _decompress(path):
    raw = open(path, "rb").read()
    if raw[:4] == b"\x28\xb5\x2f\xfd":
        if not shutil.which("zstd"):
            raise RuntimeError("ddtrace's pprof is zstd-compressed and zstd is not installed")
        raw = subprocess.run(["zstd", "-d", "-c", path], capture_output=True, check=True).stdout
    elif raw[:2] == b"\x1f\x8b":
        import gzip
        raw = gzip.decompress(raw)
    return raw


def _pprof_one(path):
    """A pprof file, decoded by the tests' own reader (test/helpers/
    formats.py): [(names root first, wall-samples, {wall, cpu} ns)]."""
    prof = formats.decode_pprof(_decompress(path))
    column = {t: i for i, (t, _) in enumerate(prof["sample_type"])}
    out = []
    for location_ids, values, _labels in prof["samples"]:
        names = []
        for lid in location_ids:
            for fid, _line in prof["locations"].get(lid, (0, []))[1]:
                names.append(prof["functions"].get(fid, ("?",))[0].rsplit(".", 1)[-1])
        names.reverse()  # pprof is leaf first
        g = lambda k: values[column[k]] if k in column and column[k] < len(values) else 0  # noqa: E731
        out.append((names, g("wall-samples"), {"wall": g("wall-time"), "cpu": g("cpu-time")}))
    return out


def parse_pprof(path):
    """ddtrace writes PATH.<pid>.<seq>.pprof, one per upload interval."""
    out = []
    d, base = os.path.split(path)
    for fn in sorted(os.listdir(d or ".")):
        if fn.startswith(base + ".") and fn.endswith(".pprof"):
            out += _pprof_one(os.path.join(d, fn))
    return out


def _cleanup(path):
    d, base = os.path.split(path)
    for fn in os.listdir(d):
        if fn == base or fn.startswith(base + "."):
            os.unlink(os.path.join(d, fn))


# ---- judging a profile against the truth -----------------------------------

def judge(samples, truth, mode):
    """Largest error in points over the main thread's groups (the three
    phases and the rest of the loop), the deep thread's whole share, and
    the main thread's sample count."""
    key = "cpu" if mode in ("cpu", "gil") else "wall"
    groups = {g: 0.0 for g in PHASES + ("other",)}
    count = 0
    deep_n = deep_whole = 0
    for names, n, w in samples:
        if "truth_loop" in names:
            count += n
            g = next((p for p in reversed(names) if p.startswith("phase_")), None)
            groups[g[len("phase_"):] if g and g[len("phase_"):] in groups else "other"] += w[key]
        elif "deep_rec" in names or "deep_leaf" in names:
            deep_n += n
            if names.count("deep_rec") == truth["deep"] and "deep_leaf" in names:
                deep_whole += n
    total = sum(groups.values())
    true = dict(truth[key])
    loop = truth["loop_" + key]
    true["other"] = max(loop - sum(true[p] for p in PHASES), 0.0)
    if total <= 0 or loop <= 0:
        return {"error_pts": None, "samples": count, "deep_n": deep_n,
                "deep_whole": deep_whole / deep_n if deep_n else None}
    err = {g: abs(groups[g] / total - true[g] / loop) * 100 for g in groups}
    worst = max(err, key=err.get)
    return {"error_pts": err[worst], "worst_group": worst, "samples": count,
            "shares": {g: round(groups[g] / total * 100, 1) for g in groups},
            "true": {g: round(true[g] / loop * 100, 1) for g in groups},
            "deep_n": deep_n, "deep_whole": deep_whole / deep_n if deep_n else None}


# ---- the measurements -------------------------------------------------------

def _med(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2


def _count(v, out):
    """Samples in a profile (of every thread)."""
    if v.parse is None:
        return 0
    return sum(n for _, n, _ in v.parse(out))


def measure(ctx, label, py, reps, truth_s, cost_s):
    have, vpy = setup(label, py)
    if not have:
        log("peers %s: no peer could be had; libpysample alone" % label)
    V = variants(ctx, have)
    res = {"label": label, "versions": versions(have, vpy), "python": vpy,
           "variants": {v.name: {"privilege": v.privilege, "modes": list(v.modes)} for v in V}}
    iters = _calibrate(vpy, cost_s)
    res["cost_iterations"] = iters
    rows = {}
    for rep in range(reps):
        for rate in RATES:
            # One round: every variant's cost run (bare among them) and
            # every variant and mode's truth run, in a shuffled order.
            jobs = [(v, "cost") for v in V] + [(v, "pass") for v in V] + \
                [(v, m) for v in V if v.name != "bare" for m in v.modes]
            random.shuffle(jobs)
            cost, start = {}, {}
            for v, m in jobs:
                r = rows.setdefault((v.name, rate), {"cpu": [], "wall": [], "per_sample": [], "errors": {},
                                                     "rate": [], "deep": [], "rss": [], "peer_rss": [],
                                                     "behind": 0, "failed": []})
                try:
                    if m == "cost":
                        cost[v.name] = _cost(ctx, v, rate, vpy, iters, r)
                    elif m == "pass":
                        start[v.name] = _start(ctx, v, rate, vpy, r)
                    else:
                        _truth(ctx, v, m, rate, vpy, truth_s, r)
                except (RuntimeError, OSError, ValueError) as e:
                    why = str(e).strip().splitlines()[-1][:200] if str(e).strip() else repr(e)
                    r["failed"].append("%s: %s" % (m, why))
                    log("  %s %s %d Hz failed: %s" % (v.name, m, rate, why))
            _pair(rows, rate, cost, start)
            log("  peers %s round %d, %d Hz done" % (label, rep + 1, rate))
    res["rows"] = {"%s@%d" % k: _summary(r) for k, r in rows.items()}
    res["bare"] = _bare_truth(vpy, truth_s)
    return res


def _cost(ctx, v, rate, vpy, iters, r):
    """The CPU-bound program under v: its work's (wall, CPU, samples).
    CPU: the process's own over the work (an in-process sampler's
    included) plus, for an out-of-process profiler, what that profiler
    used meanwhile (the program reads its parent's threads' run time)."""
    out = ctx.path("peer")
    tj = ctx.path("cost") + ".json"
    argv, env = v.build(vpy, [WORKLOAD, "cpu", str(iters), tj], rate, v.modes[0], out)
    if v.out_of_process:
        env["PYSAMPLE_BENCH_PARENT_CPU"] = "1"
    try:
        _, _, err, _, _ = run_tree(argv, env)
        n = sum(n for names, n, _ in v.parse(out) if "work" in names) if v.parse else 0
    finally:
        _cleanup(out)
    _errors(err, r)
    with open(tj) as f:
        c = json.load(f)
    os.unlink(tj)
    return c["wall"], c["cpu"] + c["parent_cpu"], n


def _start(ctx, v, rate, vpy, r):
    """`python -c pass` under v: (wall, CPU of the tree).  A failing
    profiler is counted, not fatal: py-spy exits 1 when the program ended
    before it could read its executable's name."""
    out = ctx.path("peer")
    argv, env = v.build(vpy, ["-c", "pass"], rate, v.modes[0], out)
    try:
        wall, cpu, err, _, rc = run_tree(argv, env, check=False)
    finally:
        _cleanup(out)
    if rc:
        r["pass_failed"] = r.get("pass_failed", 0) + 1
    return wall, cpu


def _errors(err, r):
    """The profiler's own account.  py-spy: 'behind in sampling' lines,
    'Samples: N Errors: E'.  profiling.sampling: 'Captured N samples',
    'Error rate: P' (per cent of them) and 'missed M samples from the
    expected total of T'."""
    r["behind"] += err.count("behind in sampling")
    num = lambda x: int(x.replace(",", ""))  # noqa: E731
    m = re.search(r"Samples: (\d+) Errors: (\d+)", err)
    n = re.search(r"Captured ([\d,]+) samples?", err)
    e = re.search(r"Error rate: ([\d.]+)", err)
    if m:
        r["spy_samples"] = r.get("spy_samples", 0) + int(m.group(1))
        r["spy_errors"] = r.get("spy_errors", 0) + int(m.group(2))
    elif n and e:
        r["spy_samples"] = r.get("spy_samples", 0) + num(n.group(1))
        r["spy_errors"] = r.get("spy_errors", 0) + round(num(n.group(1)) * float(e.group(1)) / 100)
    m = re.search(r"missed ([\d,]+) samples from the expected total of ([\d,]+)", err)
    if m:
        r["missed"] = r.get("missed", 0) + num(m.group(1))
        r["expected"] = r.get("expected", 0) + num(m.group(2))


def _pair(rows, rate, cost, start):
    """Each variant's work and start-up against the bare run's of the
    same round."""
    for name in cost:
        if name == "bare" or "bare" not in cost:
            continue
        r = rows[(name, rate)]
        bw, bc, _ = cost["bare"]
        wall, cpu, n = cost[name]
        r["cpu"].append(cpu / bc)
        r["wall"].append(wall / bw)
        r.setdefault("diff", []).append(cpu - bc)
        r.setdefault("n", []).append(n)
        if n > 0:
            r["per_sample"].append((cpu - bc) / n * 1e9)
    for name in start:
        if name == "bare" or "bare" not in start:
            continue
        r = rows[(name, rate)]
        r.setdefault("start_wall", []).append((start[name][0] - start["bare"][0]) * 1e3)
        r.setdefault("start_cpu", []).append((start[name][1] - start["bare"][1]) * 1e3)


def pooled(diffs, ns):
    """Added CPU per sample over all rounds (sum of the paired differences
    over the sum of samples, ns) and its standard error (run.py's rule)."""
    k, total = len(diffs), sum(ns)
    if k == 0 or total <= 0:
        return None, None
    mean_n = total / k
    est = sum(diffs) / total * 1e9
    if k < 2:
        return est, None
    m = sum(diffs) / k
    sd = (sum((d - m) ** 2 for d in diffs) / (k - 1)) ** 0.5
    return est, sd / k ** 0.5 / mean_n * 1e9


def _truth(ctx, v, mode, rate, vpy, truth_s, r):
    """The ground-truth program under v in mode, judged."""
    out = ctx.path("peer")
    tj = ctx.path("truth") + ".json"
    argv, env = v.build(vpy, [WORKLOAD, "truth", str(truth_s), tj], rate, mode, out)
    try:
        _, _, err, hwm, _ = run_tree(argv, env, watch_rss=v.out_of_process)
        samples = v.parse(out)
    finally:
        _cleanup(out)
    _errors(err, r)
    with open(tj) as f:
        truth = json.load(f)
    os.unlink(tj)
    r["rss"].append(truth["maxrss_kib"])
    if v.out_of_process:
        r["peer_rss"].append(hwm)
    for m in (("wall", "cpu") if mode == "wall+cpu" else (mode,)):
        j = judge(samples, truth, m)
        r["errors"].setdefault(m, []).append(j["error_pts"])
        r.setdefault("detail", {}).setdefault(m, []).append(j)
        if m == "wall":
            r["rate"].append(j["samples"] / truth["loop_wall"])
        if j["deep_whole"] is not None and (m == "wall" or mode != "wall+cpu"):
            r["deep"].append(j["deep_whole"])


def _summary(r):
    est, se = pooled(r.get("diff", []), r.get("n", []))
    s = {"pooled_ns": est, "pooled_se_ns": se, "cost_samples": _med(r.get("n", [])),
         "cpu_ratio": _med(r["cpu"]), "wall_ratio": _med(r["wall"]),
         "per_sample_ns": _med(r["per_sample"]), "per_sample_all": r["per_sample"],
         "achieved_hz": _med(r["rate"]), "deep_whole": _med(r["deep"]), "deep_all": r["deep"],
         "rss_kib": _med(r["rss"]), "peer_rss_kib": _med(r["peer_rss"]), "behind": r["behind"],
         "failed": r["failed"], "pass_failed": r.get("pass_failed", 0), "spy_samples": r.get("spy_samples"), "spy_errors": r.get("spy_errors"),
         "missed": r.get("missed"), "expected": r.get("expected"),
         "start_wall_ms": _med(r.get("start_wall", [])), "start_cpu_ms": _med(r.get("start_cpu", [])),
         "error_pts": {m: _med(x) for m, x in r["errors"].items()},
         "error_all": r["errors"]}
    det = r.get("detail", {})
    s["worst"] = {m: [(d.get("worst_group"), d.get("shares"), d.get("true")) for d in ds]
                  for m, ds in det.items()}
    return s


def _bare_truth(vpy, truth_s):
    tj = "/tmp/pysample-peers-bare.%d.json" % os.getpid()
    run_tree([vpy, WORKLOAD, "truth", str(truth_s), tj], _env_base())
    with open(tj) as f:
        t = json.load(f)
    os.unlink(tj)
    return {"rss_kib": t["maxrss_kib"], "true_wall": {p: t["wall"][p] / t["loop_wall"] for p in PHASES},
            "true_cpu": {p: t["cpu"][p] / t["loop_cpu"] for p in PHASES}}


def _calibrate(vpy, target_s):
    n = 200000
    _, cpu, _, _, _ = run_tree([vpy, WORKLOAD, "cpu", str(n)], _env_base())
    _, cpu0, _, _, _ = run_tree([vpy, "-c", "pass"], _env_base())
    return int(target_s / max((cpu - cpu0) / n, 1e-9))


# ---- the table --------------------------------------------------------------

def _per_sample(x):
    """Pooled over rounds +- its standard error, us; noise when within two
    standard errors of zero."""
    est, se = x.get("pooled_ns"), x.get("pooled_se_ns")
    if est is None:
        return "-"
    if se is None:
        return "%.1f us" % (est / 1e3)
    return "%.1f +- %.1f us%s" % (est / 1e3, se / 1e3, "" if abs(est) >= 2 * se else " (noise)")


def _f(x, fmt):
    return "-" if x is None else fmt % x


def render(L, R):
    """One table per interpreter, then its start-up and memory line."""
    for label, res in R.items():
        if "skipped" in res:
            L.append("%s: %s" % (label, res["skipped"]))
            L.append("")
            continue
        L.append("#### Peers on %s (%s)" % (label, ", ".join("%s %s" % kv for kv in res["versions"].items())
                                             or "no peer installed"))
        L.append("")
        L.append("| profiler | needs | rate | added CPU per sample | CPU x | wall x | achieved (Hz) | "
                 "error wall (pts) | error cpu (pts) | error gil (pts) | 800-deep whole | peak RSS MiB (profiler process) | notes |")
        L.append("|" + "---|" * 13)
        for name, meta in res["variants"].items():
            if name == "bare":
                continue
            for rate in RATES:
                x = res["rows"].get("%s@%d" % (name, rate))
                if not x:
                    continue
                e = x["error_pts"]
                notes = []
                if x["behind"]:
                    notes.append("'behind in sampling' x%d" % x["behind"])
                if x.get("spy_errors"):
                    notes.append("errors %d of %d samples (its own count)" % (x["spy_errors"], x["spy_samples"]))
                if x.get("missed"):
                    notes.append("missed %d of %d samples (its own count)" % (x["missed"], x["expected"]))
                if x.get("pass_failed"):
                    notes.append("exited 1 on `python -c pass` %dx (ended before it attached)" % x["pass_failed"])
                if x["failed"]:
                    notes.append("failed: " + "; ".join(x["failed"][:2]))
                rss = _f(x["rss_kib"] and x["rss_kib"] / 1024, "%.1f")
                if x["peer_rss_kib"]:
                    rss += " (+%.1f)" % (x["peer_rss_kib"] / 1024)
                L.append("| %s | %s | %d Hz | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    name, meta["privilege"], rate, _per_sample(x),
                    _f(x["cpu_ratio"], "%.3f"), _f(x["wall_ratio"], "%.3f"), _f(x["achieved_hz"], "%.0f"),
                    _f(e.get("wall"), "%.1f"), _f(e.get("cpu"), "%.1f"), _f(e.get("gil"), "%.1f"),
                    _f(None if x["deep_whole"] is None else x["deep_whole"] * 100, "%.0f %%"), rss, ", ".join(notes)))
        L.append("")
        b = res["bare"]
        L.append("Unprofiled: peak RSS %.1f MiB; true shares of the burn/sleep/select thread: wall %s, CPU %s." % (
            b["rss_kib"] / 1024, " / ".join("%.0f %%" % (b["true_wall"][p] * 100) for p in PHASES),
            " / ".join("%.1f %%" % (b["true_cpu"][p] * 100) for p in PHASES)))
        L.append("")
        st = []
        for name in res["variants"]:
            xs = [res["rows"].get("%s@%d" % (name, r)) for r in RATES]
            w = _med([x["start_wall_ms"] for x in xs if x])
            c = _med([x["start_cpu_ms"] for x in xs if x])
            if w is not None:
                st.append("%s %+.1f ms wall, %+.1f ms CPU" % (name, w, c))
        L.append("Start-up, `python -c pass` beside the bare one of the same round (median over rates and "
                 "rounds): " + "; ".join(st) + ".")
        L.append("")
