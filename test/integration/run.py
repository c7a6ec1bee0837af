#!/usr/bin/env python3
"""Integration test runner: runs one suite of scenarios under one interpreter.

    run.py --python PATH --lib LIBPYSAMPLE --suite core [--only NAME] [--label L]
           [--primary] [--pending MARKER]

Prints one line per scenario ("ok", "FAIL" with the reason, or "skip") and
exits non-zero if any failed, so meson reports the interpreter and suite as
one named test; the lines say which scenario broke.

A scenario marked @harness.once depends on nothing of the interpreter's
(the library's own settings and messages, the control protocol, the CPU
budget): it runs only with --primary, which test/meson.build gives to one
interpreter (test/find_pythons.py --mark-primary), and --only runs it
anywhere.  Under the others a line says it ran there instead.
"""
import argparse
import concurrent.futures
import importlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def version_of(python):
    """((major, minor), trace_refs): sys.getobjects exists only in
    --with-trace-refs builds."""
    # Python 2 too (its refusal is tested).
    out = subprocess.run([python, "-c", "import sys; sys.stdout.write('%d %d %d' % ("
                          "sys.version_info[0], sys.version_info[1], hasattr(sys, 'getobjects')))"],
                         capture_output=True, text=True, timeout=60).stdout.split()
    return (int(out[0]), int(out[1])), out[2] == "1"


def builder_alive(marker):
    """The marker exists and the process it names (pid=N) still runs."""
    try:
        with open(marker) as f:
            pid = int(f.read().strip().partition("=")[2])
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


def wait_for_build(python, marker):
    """The interpreter at python is still being built (.ci/run builds the
    extra interpreters while the suite runs; test/pythons/build.sh --list
    names its marker): wait until the build ended. Returns None when the
    interpreter is there, else why it is not (the build's own reason)."""
    while builder_alive(marker):
        time.sleep(2)
    if os.path.exists(python):
        return None
    failed = marker[:-len(".pending")] + ".failed"
    try:
        with open(failed) as f:
            return f.read().strip() or "its build failed"
    except OSError:
        return "its build ended without an interpreter"


def machine_of(python):
    """The machine the interpreter is built for (platform.machine())."""
    return subprocess.run([python, "-c", "import platform; print(platform.machine())"],
                          capture_output=True, text=True, timeout=60).stdout.strip()


def run_scenario(mod, ctx, name, fn):
    """Runs one scenario; prints and returns (status, line): status "ok",
    "FAIL" (the line says why) or "skip".

    A scenario that fails runs once more (PYSAMPLE_TEST_RETRY=0: not).  The
    project's CI lands nothing when one of ~4 000 scenario runs on a shared
    2-core machine loses a race once; a scenario that is broken fails twice.
    A pass on the retry is not hidden: its line says "flaky", with the first
    failure in full, and scripts/run-tests counts those lines."""
    status, line = attempt(mod, ctx, name, fn)
    if status == "FAIL" and os.environ.get("PYSAMPLE_TEST_RETRY", "1") != "0":
        again, again_line = attempt(mod, ctx, name, fn)
        if again == "ok":
            status, line = "ok", "%s\n    flaky: failed once, passed on the retry; the first time:\n    %s" % (
                again_line, line.replace("\n", "\n    "))
        else:
            line = "%s\n    (failed again on the retry)" % again_line
    with PRINT:
        print(line, flush=True)
    return status, line


def attempt(mod, ctx, name, fn):
    """One run of a scenario: (status, line), nothing printed."""
    t0 = time.monotonic()
    try:
        try:
            fn(ctx)
        finally:
            # The suite's clean-up after each scenario, however it
            # ended (test_process: no process of it survives it).
            getattr(mod, "teardown", lambda ctx: None)(ctx)
    except harness.Skip as e:
        status, line = "skip", "skip %-28s %s" % (name, e)
    except Exception as e:
        detail = str(e) if isinstance(e, AssertionError) else traceback.format_exc()
        status, line = "FAIL", "FAIL %-28s (%.1fs)\n    %s" % (
            name, time.monotonic() - t0, detail.replace("\n", "\n    "))
    else:
        status, line = "ok", "ok   %-28s (%.1fs)" % (name, time.monotonic() - t0)
    return status, line


# Scenarios that run two at a time print whole lines.
PRINT = threading.Lock()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--build", default=None, metavar="DIR",
                    help="the meson build dir of the files built for the tests (test/*.so, "
                         "lib/pysample-attach); default: the one --lib is in")
    ap.add_argument("--suite", default="core")
    ap.add_argument("--only", default=None)
    ap.add_argument("--label", default=None)
    ap.add_argument("--primary", action="store_true",
                    help="also run the scenarios marked @harness.once")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="set in every profiled run, over the test's own settings (the "
                         "stress suite with PYSAMPLE_NATIVE=1)")
    ap.add_argument("--pending", default=None, metavar="MARKER",
                    help="the interpreter is being built: wait while MARKER exists, "
                         "skip (exit 77) if the build failed")
    a = ap.parse_args()

    if a.pending:
        why = wait_for_build(a.python, a.pending)
        if why:
            print("skip: %s is unavailable: %s" % (a.label or a.python, why))
            return 77

    version, trace_refs = version_of(a.python)
    mod = importlib.import_module("test_" + a.suite)
    tests = [(n[5:], getattr(mod, n)) for n in dir(mod) if n.startswith("test_")]
    tests.sort(key=lambda t: getattr(t[1], "__code__").co_firstlineno)
    if a.only:
        tests = [t for t in tests if t[0] in a.only.split(",")]
    unsupported = version < (3, 9)
    # Newer than the newest layout libpysample knows: refused as a whole.
    too_new = version > (3, 16)
    # 3.9-3.12 built --with-trace-refs: refused as a whole (3.13+ keeps the
    # object header, so there it is an ordinary interpreter).
    refused_trace_refs = trace_refs and version <= (3, 12)
    if unsupported:
        # Only the scenarios about refusing an old Python apply.
        tests = [t for t in tests if getattr(t[1], "old_python", False)]
    elif too_new:
        tests = [t for t in tests if getattr(t[1], "new_python_only", False)]
    elif refused_trace_refs:
        tests = [t for t in tests if getattr(t[1], "trace_refs_only", False)]
    else:
        tests = [t for t in tests if not getattr(t[1], "old_python_only", False)
                 and not getattr(t[1], "trace_refs_only", False)
                 and not getattr(t[1], "new_python_only", False)]
    elsewhere = []
    if not a.primary and not a.only:
        elsewhere = [t[0] for t in tests if getattr(t[1], "once", False)]
        tests = [t for t in tests if not getattr(t[1], "once", False)]

    # An interpreter of another machine than this one runs under an
    # emulator (scripts/cross-arm64): scenarios marked not_emulated skip.
    emulated = machine_of(a.python) != platform.machine()
    skipped_here = [(t[0], t[1].not_emulated) for t in tests
                    if emulated and getattr(t[1], "not_emulated", None)]
    tests = [t for t in tests if not (emulated and getattr(t[1], "not_emulated", None))]

    tmp_root = tempfile.mkdtemp(prefix="pysample-it-")
    ctx = harness.Context(a.python, os.path.abspath(a.lib), a.label or "", version, tmp_root)
    if a.build:
        ctx.build = os.path.abspath(a.build)
    ctx.forced_env = dict(e.split("=", 1) for e in a.env)
    ctx.primary = a.primary
    # A suite whose module sets TWO_AT_A_TIME (and has no teardown, which
    # would end the other scenario's processes too) runs its scenarios two
    # at a time, those marked `alone` (timing compared with a run without
    # the library) by themselves afterwards.  Each line is printed as its
    # scenario ends.
    pairs = getattr(mod, "TWO_AT_A_TIME", False) and not hasattr(mod, "teardown")
    together = [t for t in tests if pairs and not getattr(t[1], "alone", False)]
    alone = [t for t in tests if t not in together]
    results = []
    for name, why in skipped_here:
        line = "skip %-28s under an emulator: %s" % (name, why)
        print(line, flush=True)
        results.append(("skip", line))
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results += list(pool.map(lambda t: run_scenario(mod, ctx, *t), together))
    results += [run_scenario(mod, ctx, *t) for t in alone]
    counts = {"ok": 0, "FAIL": 0, "skip": 0}
    for status, line in results:
        counts[status] += 1
    passed, failed, skipped = counts["ok"], counts["FAIL"], counts["skip"]
    shutil.rmtree(tmp_root, ignore_errors=True)
    if elsewhere:
        print("once %s: under the primary interpreter (test/find_pythons.py --mark-primary)"
              % ", ".join(elsewhere))
    print("%s %s: %d passed, %d failed, %d skipped" % (a.suite, a.label or a.python,
                                                      passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
