"""Issue 13: Python that arrives late.  A C program that is not Python when
it starts (test/embed/embed_host.c) dlopen()s the libpython of the
interpreter under test, waits, initialises it, runs a script with known hot
functions (programs/embed_work.py) in the main interpreter and, in one
scenario, in two sub-interpreters; then finalises and exits.  The profile
must look like a Python executable's: the right functions at the exact
lines, every interpreter's stacks labelled as docs/format.md says, nothing
lost between the sampler and the file.  Programs that never load
libpython stay untouched; a second libpython gets one clear line.

The host comes from meson (PYSAMPLE_EMBED_HOST).  An interpreter without a
shared libpython (a static build) has nothing to embed: skipped.
"""
import glob
import os
import subprocess

import harness
from harness import Profile

SCRIPT = os.path.join(harness.PROGRAMS, "embed_work.py")
RATE = "200"


def host():
    path = os.environ.get("PYSAMPLE_EMBED_HOST", "")
    if not path or not os.access(path, os.X_OK):
        raise harness.Skip("no embed_host (PYSAMPLE_EMBED_HOST)")
    return path


def libpython(ctx):
    """(path of the interpreter's shared libpython, its PYTHONHOME)."""
    code = ("import os, sys, sysconfig as s\n"
            "d = s.get_config_var('LIBDIR') or ''\n"
            "for n in (s.get_config_var('INSTSONAME'), s.get_config_var('LDLIBRARY')):\n"
            "    if n and n.endswith(tuple('.so' + x for x in ('', '.1', '.1.0'))) "
            "and os.path.exists(os.path.join(d, n)):\n"
            "        print(os.path.join(d, n)); break\n"
            "else:\n"
            "    print('-')\n"
            "print(sys.base_prefix)\n")
    out = subprocess.run([ctx.python, "-c", code], capture_output=True, text=True,
                         timeout=60, env=ctx.env(preload=False)).stdout.split("\n")
    if len(out) < 2 or out[0] in ("", "-"):
        raise harness.Skip("this interpreter has no shared libpython to embed")
    return out[0], out[1]


def run_host(ctx, args, lib=None, home=None, output="prof.%p.txt", env=None):
    e = {"PYSAMPLE_RATE": RATE}
    if home:
        e["PYTHONHOME"] = home
    outdir = ctx.tmpdir()
    e["PYSAMPLE_STATS"] = os.path.join(outdir, ".stats.%p")
    e.update(env or {})
    res = ctx.run([host()] + args, output=output, env=e, python=False, outdir=outdir,
                  timeout=180)
    res.files = [f for f in res.files if not f.startswith(".stats.")]
    return res


def stats(res):
    """The sampler's own counts (PYSAMPLE_STATS), one dict per process."""
    out = []
    for p in glob.glob(os.path.join(res.outdir, ".stats.*")):
        with open(p) as f:
            out.append(dict(line.split(" ", 1) for line in f.read().splitlines()))
    return out


def check_nothing_lost(ctx, res, prof):
    st = stats(res)
    ctx.check(len(st) == 1, "expected one statistics file, found %d" % len(st))
    samples = int(st[0]["samples"])
    ctx.check(prof.total == samples, "the file has %d samples, the sampler took %d"
              % (prof.total, samples), prof.dump())
    errors = int(st[0]["errors"])
    ctx.check(errors <= max(2, samples // 50), "%d failed walks for %d samples" % (errors, samples))


def interp_of(stack):
    f = stack.frames[0].raw if stack.frames else ""
    return f if f.startswith("interp ") else None


def spin_lines():
    return [harness.program_lines(SCRIPT, "spin-loop"), harness.program_lines(SCRIPT, "spin-loop") + 1]


def check_role(ctx, prof, func, marker, min_samples):
    call_line = harness.program_lines(SCRIPT, marker)
    n = prof.with_frame(func, "embed_work.py", call_line)
    ctx.check(n >= min_samples, "%d samples of %s at embed_work.py:%d, expected at least %d"
              % (n, func, call_line, min_samples), prof.dump())
    # The leaf is spin() at its loop, whose two lines take the time.
    leaf = prof.count_where(lambda s: any(f.name == func for f in s.frames) and s.frames
                            and s.frames[-1].name == "spin"
                            and s.frames[-1].line in spin_lines())
    ctx.check(leaf >= n * 0.8, "%s: only %d of %d samples end in spin() at lines %r"
              % (func, leaf, n, spin_lines()), prof.dump())
    return n


def test_embedded_main(ctx):
    """dlopen + Py_Initialize 300 ms later: profiled like python itself."""
    lib, home = libpython(ctx)
    res = run_host(ctx, [lib, SCRIPT, "main"], home=home)
    ctx.check_clean_run(res)
    prof = res.profile()
    check_role(ctx, prof, "main_work", "main-call", 40)
    ctx.check(all(interp_of(s) is None for s in prof.stacks),
              "a single interpreter's stacks carry no interpreter label", prof.dump())
    threads = prof.threads()
    ctx.check(any(t.endswith("(MainThread)") for t in threads), "no MainThread: %r" % threads)
    check_nothing_lost(ctx, res, prof)


def test_embedded_subinterpreters(ctx):
    """Main interpreter plus two sub-interpreters on one thread: each
    stack says which interpreter it came from."""
    lib, home = libpython(ctx)
    res = run_host(ctx, [lib, SCRIPT, "subinterp"], home=home)
    ctx.check_clean_run(res)
    prof = res.profile()
    check_role(ctx, prof, "main_work", "main-call", 40)
    check_role(ctx, prof, "sub_one", "sub1-call", 40)
    check_role(ctx, prof, "sub_two", "sub2-call", 40)
    labels = {}
    for s in prof.stacks:
        for func in ("main_work", "sub_one", "sub_two"):
            if any(f.name == func for f in s.frames):
                labels.setdefault(func, set()).add(interp_of(s))
    ctx.check(labels.get("main_work") == {None},
              "main interpreter stacks must be unlabelled: %r" % labels.get("main_work"))
    one, two = labels.get("sub_one", set()), labels.get("sub_two", set())
    ctx.check(len(one) == 1 and len(two) == 1 and None not in one | two and one != two,
              "each sub-interpreter needs its own label 'interp N': sub_one %r, sub_two %r"
              % (one, two), prof.dump())
    for lab in one | two:
        ctx.check(int(lab.split()[1]) >= 1, "bad interpreter label %r" % lab)
    check_nothing_lost(ctx, res, prof)


def test_embedded_ends_by_exit_and_sigterm(ctx):
    """The late process ends by _exit() after Py_FinalizeEx, or dies of
    SIGTERM with the interpreter up: the profile is written either way and
    the status is the program's own."""
    lib, home = libpython(ctx)
    for end, want_rc in (("_exit", 0), ("sigterm", -15)):
        res = run_host(ctx, [lib, SCRIPT, "main"], home=home, env={"EMBED_END": end})
        ctx.check(res.rc == want_rc, "EMBED_END=%s: exit status %s, expected %s"
                  % (end, res.rc, want_rc), res.stderr[-2000:])
        ctx.check(not harness.our_messages(res.stderr), "message of ours", res.stderr[-2000:])
        prof = res.profile()
        check_role(ctx, prof, "main_work", "main-call", 40)


def test_subinterpreters_in_parallel(ctx):
    """3.12+: two sub-interpreters, each with its own GIL, running at the
    same time on two threads of a Python program: both sampled, each with
    its own label, the main interpreter's waiting thread unlabelled."""
    if ctx.version < (3, 12):
        ctx.skip("per-interpreter GIL and _interpreters need 3.12+")
    prog = ctx.program("subinterp_threads.py")
    work = ctx.program("subinterp_work.py")
    res = ctx.run([prog], env={"PYSAMPLE_RATE": RATE})
    ctx.check_clean_run(res)
    prof = res.profile()
    labels = {}
    for func, marker in (("work_a", "si-a"), ("work_b", "si-b")):
        line = harness.program_lines(work, marker)
        n = prof.with_frame(func, "subinterp_work.py", line)
        ctx.check(n >= 40, "%d samples of %s at subinterp_work.py:%d" % (n, func, line),
                  prof.dump())
        # By tid: the thread's name is read from its threading.Thread in
        # the main interpreter, which a sub-interpreter's stack lacks, so
        # some of its lines may carry the name and some not.
        labels[func] = {(s.thread.split()[1], interp_of(s)) for s in prof.stacks
                        if any(f.name == func for f in s.frames)}
    a, b = labels["work_a"], labels["work_b"]
    ctx.check(len(a) == 1 and len(b) == 1, "one thread and label each: %r %r" % (a, b))
    (ta, la), (tb, lb) = next(iter(a)), next(iter(b))
    ctx.check(la and lb and la != lb and ta != tb,
              "work_a on %s/%s, work_b on %s/%s: distinct threads and interp labels expected"
              % (ta, la, tb, lb))
    wait = harness.program_lines(prog, "main-wait")
    ctx.check(prof.with_frame("main_wait", "subinterp_threads.py", wait) >= 40 and
              all(interp_of(s) is None for s in prof.stacks
                  if any(f.name == "main_wait" for f in s.frames)),
              "main_wait must be sampled without a label", prof.dump())


def same_libc(ctx, path):
    """Whether the libpython at path is built for the C library of the
    interpreter under test: a glibc one names libc.so.6, a musl one libc.so
    (a glibc libpython in a musl process fails to load, or worse)."""
    with open(path, "rb") as f:
        glibc = b"libc.so.6\0" in f.read()
    return glibc != ctx.musl


@harness.not_emulated("the second libpython is looked for on this machine's disk, not the root's")
def test_second_libpython_refused(ctx):
    """Another, different libpython loaded next to the first: one line,
    and the first one's profile is intact."""
    lib, home = libpython(ctx)
    real = os.path.realpath(lib)
    others = [p for p in sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(real))), "*", "lib", "libpython3.*.so.1.0")) +
        glob.glob("/usr/lib/*/libpython3.*.so.1.0"))
        if os.path.realpath(p) != real and same_libc(ctx, p)]
    if not others:
        ctx.skip("no second libpython of this C library on this machine")
    res = run_host(ctx, [lib, SCRIPT, "second", others[0]], home=home)
    ctx.check(res.rc == 0, "exit status %s" % res.rc, res.stderr[-2000:])
    lines = harness.our_messages(res.stderr)
    ctx.check(len(lines) == 1 and "second Python runtime" in lines[0] and others[0] in lines[0],
              "expected one line about the second runtime, got %r" % lines)
    prof = res.profile()
    check_role(ctx, prof, "main_work", "main-call", 40)


def test_not_python_stays_inert(ctx):
    """A program that only ever dlopen()s other libraries: no file, no
    message, no thread."""
    if ctx.label not in ("", None) and not ctx.label.startswith("3.12"):
        ctx.skip("runs once (under 3.12): it involves no Python")
    lib = "libz.so.1"
    res = run_host(ctx, [lib, "-", "plain"])
    ctx.check_clean_run(res)
    ctx.check(res.files == [], "files written by a program without Python: %r" % res.files)
    ctx.check(res.stderr == "", "output from a program without Python: %r" % res.stderr)
    ctx.check("threads 1" in res.stdout, "the program has more threads than its own: %r"
              % res.stdout)


def test_old_python_refused(ctx):
    """An embedded Python older than 3.9: one clear line, no profile, the
    program unaffected."""
    if ctx.version < (3, 6):
        ctx.skip("embed_host embeds Python 3.6 or newer (Py_FinalizeEx)")
    lib, home = libpython(ctx)
    res = run_host(ctx, [lib, SCRIPT, "main"], home=home)
    ctx.check(res.rc == 0, "exit status %s" % res.rc, res.stderr[-2000:])
    lines = harness.our_messages(res.stderr)
    ctx.check(len(lines) == 1 and "this Python (%d.%d) is older than 3.9" % ctx.version in lines[0],
              "got %r" % lines)
    ctx.check(res.files == [], "files %r" % res.files)


test_old_python_refused.old_python = True
test_old_python_refused.old_python_only = True
