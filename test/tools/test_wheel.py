#!/usr/bin/env python3
"""The wheels, tested as a user would use them (docs/install.md).

scripts/wheels builds the sdist, the x86_64 wheel from it, and the
musllinux and aarch64 wheels where this machine can, once, into a temporary
directory.  Then, for each CPython below that is on the machine, a fresh
venv installs the x86_64 wheel with no index, and its `pysample` records the
demo and a multiprocessing program, `pysample lib` names the venv's own
library, one version runs through tool, library, wheel and profile, a
library removed from the install is named as missing, and `pip uninstall`
leaves the venv as it was.  Wheels for another platform are refused by pip.
The aarch64 wheel is installed and run in the arm64 root under qemu when
scripts/cross-arm64's root is there.

Exit status 77 (Meson: skipped), with one line, when the build tools cannot
be had (scripts/wheels: no network and nothing in pip's cache).

Environment (test/tools/meson.build): PYSAMPLE_TEST_VERSION, the project's
version; PYSAMPLE_WHEEL_PYTHONS, colon-separated interpreters (default:
pyenv's 3.9.18, 3.11.7, 3.12.1, 3.13.0, those present); PYSAMPLE_TEST_WHEELS,
a directory of wheels scripts/wheels built, to test those instead of building.
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir))
VERSION = os.environ.get("PYSAMPLE_TEST_VERSION", "")
PYENV = os.path.expanduser("~/.pyenv/versions")
DEFAULT_PYTHONS = [os.path.join(PYENV, v, "bin", "python3") for v in ("3.9.18", "3.11.7", "3.12.1", "3.13.0")]
ARM64_ROOT = os.environ.get("PYSAMPLE_ARM64_ROOT") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pysample", "arm64-root")

# The demo's functions, and the multiprocessing program's (its workers'
# function runs only in the children).
DEMO_FUNCTIONS = {"build_tree", "compute_stats", "main"}
SPIN = "import time\ndef spin_preloaded():\n    t = time.time() + 0.5\n    while time.time() < t: pass\nspin_preloaded()\n"
MP_PROGRAM = """\
import multiprocessing

def burn_in_worker(n):
    total = 0
    for i in range(n):
        total += i * i
    return total

def main():
    with multiprocessing.Pool(2) as pool:
        print(sum(pool.map(burn_in_worker, [1500000] * 8)))

if __name__ == "__main__":
    main()
"""

failures = []


def check(ok, what):
    print("%s %s" % ("ok  " if ok else "FAIL", what), flush=True)
    if not ok:
        failures.append(what)
    return ok


def run(argv, timeout=180, **kw):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, **kw)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def venv_env(venv):
    """An activated venv's environment, without what would change pysample."""
    env = dict((k, v) for k, v in os.environ.items()
               if not k.startswith(("PYSAMPLE_", "PYTHON", "PIP_")) and k not in ("LD_PRELOAD", "VIRTUAL_ENV"))
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
    env["VIRTUAL_ENV"] = venv
    return env


def tree(root):
    out = set()
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            out.add(os.path.relpath(os.path.join(d, n), root))
    return out


def functions(profile_text):
    names = set()
    for line in profile_text.splitlines():
        stack = line.rsplit(" ", 1)[0]
        for frame in stack.split(";")[1:]:
            names.add(frame.split(" (", 1)[0])
    return names


def build_wheels(out):
    t0 = time.time()
    code, stdout, stderr = run(["sh", os.path.join(SOURCE_ROOT, "scripts", "wheels"), "--out", out,
                                "--only", "sdist,x86_64,aarch64,musl"], timeout=900)
    sys.stdout.write(stdout + stderr)
    if code == 77:
        print("SKIP: " + (stdout.strip().splitlines() or ["scripts/wheels skipped"])[-1])
        sys.exit(77)
    check(code == 0, "scripts/wheels built every wheel it could (%.0f s)" % (time.time() - t0))
    return dict((os.path.basename(w), w) for w in glob.glob(os.path.join(out, "*.whl")))


def wheel_named(wheels, prefix, suffix):
    for name, path in sorted(wheels.items()):
        if name.split("-")[-1].startswith(prefix) and name.endswith(suffix):
            return path
    return None


def check_wheel_contents(path):
    names = zipfile.ZipFile(path).namelist()
    check(".libpysample.mesonpy.libs/libpysample.so" in names, "%s holds the library" % os.path.basename(path))
    check(any(n.endswith("/pysample/cli.py") for n in names) and any(n.endswith("/pysample/demo.py") for n in names) and \
          any(n.endswith("/pysample/LICENSE") for n in names),
          "%s holds the package pysample, its demo and the licence" % os.path.basename(path))
    meta = [n for n in names if n.endswith(".dist-info/METADATA")]
    text = zipfile.ZipFile(path).read(meta[0]).decode() if meta else ""
    check("\nVersion: %s\n" % VERSION in text, "wheel metadata says version %s" % VERSION)


def make_venv(python, where):
    code, out, err = run([python, "-m", "venv", where])
    return check(code == 0, "venv from %s" % python) and os.path.join(where, "bin", "python")


def record_demo(venv, work, tag):
    env = venv_env(venv)
    prof = os.path.join(work, "demo-%s.txt" % tag)
    demo = os.path.join(glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "pysample"))[0], "demo.py")
    code, out, err = run(["pysample", "record", "-q", "-o", prof, "--", "python", demo], env=env, cwd=work)
    if not check(code == 0 and os.path.isfile(prof), "%s: pysample record -- python demo.py (%s)" % (tag, err.strip()[-300:])):
        return
    with open(prof) as f:
        found = functions(f.read())
    check(DEMO_FUNCTIONS <= found, "%s: demo profile names %s (missing: %s)"
          % (tag, ", ".join(sorted(DEMO_FUNCTIONS)), ", ".join(sorted(DEMO_FUNCTIONS - found)) or "none"))


def preload_by_hand(venv, lib, work, tag):
    """What a Dockerfile or pod spec does: LD_PRELOAD=$(pysample lib)."""
    env = venv_env(venv)
    env.update(LD_PRELOAD=lib, PYSAMPLE_OUTPUT=os.path.join(work, "preload-%s.%%p.txt" % tag), PYSAMPLE_QUALITY="1")
    code, out, err = run(["python", "-c", SPIN], env=env)
    profiles = [p for p in glob.glob(os.path.join(work, "preload-%s.*.txt" % tag))]
    found = set()
    for p in profiles:
        with open(p) as f:
            found |= functions(f.read())
    check(code == 0 and len(profiles) == 1 and "spin_preloaded" in found,
          "%s: LD_PRELOAD=$(pysample lib) PYSAMPLE_OUTPUT=... python profiles (%s)" % (tag, err.strip()[-200:]))
    quality = {}
    for p in profiles:
        try:
            with open(p + ".quality.json") as f:
                quality = json.load(f)
        except (OSError, ValueError) as e:
            quality = {"library": "unreadable: %s" % e}
    check(quality.get("library") == VERSION, "%s: the profile's quality header says library %s (%s)"
          % (tag, VERSION, quality.get("library")))


def record_multiprocessing(venv, work, tag):
    env = venv_env(venv)
    program = os.path.join(work, "mp_app.py")
    with open(program, "w") as f:
        f.write(MP_PROGRAM)
    out_dir = os.path.join(work, "mp-" + tag)
    os.mkdir(out_dir)
    code, out, err = run(["pysample", "record", "-q", "-o", os.path.join(out_dir, "%p.txt"), "--",
                          "python", program], env=env, cwd=work)
    check(code == 0, "%s: pysample record -- python mp_app.py (%s)" % (tag, err.strip()[-300:]))
    found, files = set(), 0
    for p in glob.glob(os.path.join(out_dir, "*.txt")):
        files += 1
        with open(p) as f:
            found |= functions(f.read())
    check(files >= 3 and "burn_in_worker" in found and "main" in found,
          "%s: multiprocessing: %d profiles (parent and 2 workers), burn_in_worker in a worker's" % (tag, files))


def check_versions(venv, tag):
    env = venv_env(venv)
    code, out, err = run(["pysample", "--version"], env=env)
    check(out.strip() == "pysample %s" % VERSION, "%s: pysample --version: %s" % (tag, out.strip()))
    code, out, err = run(["python", "-m", "pysample", "--version"], env=env)
    check(out.strip() == "pysample %s" % VERSION, "%s: python -m pysample --version: %s" % (tag, out.strip()))
    code, lib, err = run(["pysample", "lib"], env=env)
    lib = lib.strip()
    check(code == 0 and lib.startswith(venv + os.sep) and os.path.isfile(lib), "%s: pysample lib: %s" % (tag, lib))
    code, out2, err = run(["pysample", "--print-lib"], env=env)
    check(out2.strip() == lib, "%s: pysample --print-lib prints the same" % tag)
    probe = "import ctypes,sys; l=ctypes.CDLL(sys.argv[1]); l.pysample_version.restype=ctypes.c_char_p; " \
            "print(l.pysample_version().decode())"
    code, out, err = run(["python", "-c", probe, lib], env=env)
    check(out.strip() == VERSION, "%s: the library's pysample_version(): %s" % (tag, out.strip()))
    code, out, err = run(["pysample", "info"], env=env)
    check("install:     wheel libpysample-%s-py3-none-" % VERSION in out and
          "lib build:   libpysample %s (" % VERSION in out, "%s: pysample info says which build" % tag)
    return lib


def check_broken(venv, lib, tag):
    env = venv_env(venv)
    aside = lib + ".aside"
    os.rename(lib, aside)
    try:
        code, out, err = run(["pysample", "lib"], env=env)
        check(code == 2 and out == "" and err.count("\n") == 1 and err.startswith("pysample: ") and lib in err,
              "%s: pysample lib with the library removed names it: %s" % (tag, err.strip()))
        code, out, err = run(["pysample", "record", "-q", "--", "python", "-c", "pass"], env=env)
        check(code == 2 and lib in err, "%s: record with the library removed says what is missing" % tag)
    finally:
        os.rename(aside, lib)


def one_python(python, wheels, work, libs, first):
    tag = "python" + os.path.basename(os.path.dirname(os.path.dirname(python)))
    venv = os.path.join(work, "venv-" + tag)
    if not make_venv(python, venv):
        return
    env = venv_env(venv)
    before = tree(venv)
    code, out, err = run(["pip", "install", "-q", "--no-index", "--no-cache-dir", wheels["x86_64"]], env=env)
    if not check(code == 0, "%s: pip install --no-index the wheel (%s)" % (tag, err.strip()[-300:])):
        return
    lib = check_versions(venv, tag)
    libs[tag] = lib
    record_demo(venv, work, tag)
    preload_by_hand(venv, lib, work, tag)
    record_multiprocessing(venv, work, tag)
    check_broken(venv, lib, tag)
    for other in ("musl", "aarch64") if first else ():
        if wheels.get(other):
            code, out, err = run(["pip", "install", "--no-index", "--no-cache-dir", wheels[other]], env=env)
            check(code != 0 and "not a supported wheel on this platform" in err,
                  "%s: pip refuses the %s wheel here" % (tag, other))
    code, out, err = run(["pip", "uninstall", "-y", "-q", "libpysample"], env=env)
    left = sorted(tree(venv) - before)
    check(code == 0 and not left, "%s: pip uninstall leaves nothing (%s)" % (tag, ", ".join(left[:5]) or "nothing left"))


def check_musl(wheel):
    """Its tag came from auditwheel (scripts/wheels); the library in it is musl's."""
    check("-py3-none-musllinux_1_2_x86_64.whl" in wheel, "musl wheel tagged %s" % os.path.basename(wheel))
    data = zipfile.ZipFile(wheel).read(".libpysample.mesonpy.libs/libpysample.so")
    check(b", musl, " in data and b"libc.musl-x86_64.so.1" in data, "musl wheel's library is built against musl")


def musl_pythons():
    """The musl CPythons test/find_pythons.py lists (test/pythons/build.sh
    3.13-musl, static, and 3.13-musl-shared)."""
    code, out, _err = run([sys.executable, os.path.join(SOURCE_ROOT, "test", "find_pythons.py"), "--libc", "musl"])
    return [parts[1] for parts in (line.split() for line in (out.splitlines() if code == 0 else ()))
            if len(parts) >= 2 and not any(p.startswith("pending=") for p in parts) and os.access(parts[1], os.X_OK)]


def musl_accepts(python, wheel):
    """pip decides whether a wheel installs from the running interpreter's
    tags (packaging.tags.sys_tags: for musl, the version its ld-musl prints).
    The musl CPython has no pip of its own, nor zlib to unpack a wheel, so
    pip's own packaging, imported from this pip, is run by it: the wheel's
    tag must be one it supports."""
    import pip
    tag = "-".join(os.path.basename(wheel)[:-len(".whl")].split("-")[-3:])
    code, out, err = run([python, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                          "from pip._vendor.packaging import tags; print('\\n'.join(map(str, tags.sys_tags())))",
                          os.path.dirname(os.path.dirname(pip.__file__))])
    check(code == 0 and tag in out.split(), "%s's own tags include %s (%s)" % (python, tag, err.strip()[-200:]))


def run_musl(wheel, work):
    """The musllinux wheel, installed by pip for its platform into a
    directory: its library profiles the demo under each musl CPython."""
    pythons = musl_pythons()
    if not pythons:
        print("SKIP musllinux wheel not run: no musl CPython built (test/pythons/build.sh 3.13-musl)")
        return
    target = os.path.join(work, "musl-site")
    code, out, err = run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", target,
                          "--platform", "musllinux_1_2_x86_64", "--only-binary=:all:", wheel],
                         env=dict(os.environ, PIP_ROOT_USER_ACTION="ignore"))
    if not check(code == 0, "musl wheel installs for musllinux_1_2_x86_64 (%s)" % err.strip()[-200:]):
        return
    for python in pythons:
        musl_accepts(python, wheel)
        run_musl_app(python, target, work)


def run_musl_app(python, target, work):
    """The installed wheel's library profiles a two-thread program under python."""
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith(("PYSAMPLE_", "PYTHON")) and k != "LD_PRELOAD")
    env["PYTHONPATH"] = target
    # The wheel's library preloaded by hand: the command line tool and the
    # demo need zlib, which the musl CPython is built without.
    prof = os.path.join(work, "musl-demo.%s.txt" % os.path.basename(os.path.dirname(os.path.dirname(python))))
    app = os.path.join(work, "musl_app.py")
    with open(app, "w") as f:
        f.write("import threading, time\n\ndef burn_in_musl(n):\n    end = time.time() + n\n"
                "    while time.time() < end:\n        sum(range(500))\n\n"
                "t = threading.Thread(target=burn_in_musl, args=(1.0,))\nt.start()\nburn_in_musl(1.0)\nt.join()\n")
    env.update(LD_PRELOAD=os.path.join(target, ".libpysample.mesonpy.libs", "libpysample.so"), PYSAMPLE_OUTPUT=prof)
    code, out, err = run([python, app], env=env, timeout=300)
    found, threads = set(), set()
    if code == 0 and os.path.isfile(prof):
        with open(prof) as f:
            text = f.read()
        found = functions(text)
        threads = set(l.split(";", 1)[0] for l in text.splitlines() if "burn_in_musl" in l)
    check("burn_in_musl" in found and len(threads) == 2, "musl wheel's library profiles both threads of a program under %s (%s)" % (python, err.strip()[-300:]))


def arm64_runner(work):
    binfmt = "/proc/sys/fs/binfmt_misc/qemu-aarch64"
    if not os.path.isfile(os.path.join(ARM64_ROOT, ".pysample-root")):
        return None, "no arm64 root at %s (scripts/cross-arm64 builds it)" % ARM64_ROOT
    try:
        with open(binfmt) as f:
            if not f.read().startswith("enabled"):
                raise OSError
    except OSError:
        return None, "no qemu-aarch64 binfmt_misc handler"
    runner = os.path.join(work, "arm64-run")
    code, out, err = run(["cc", "-static", "-O2", "-DPS_ROOT=\"%s\"" % ARM64_ROOT, "-DPS_BINDS=\"%s\"" % work,
                          os.path.join(SOURCE_ROOT, "test", "cross", "arm64_run.c"), "-o", runner])
    return (runner, None) if code == 0 else (None, "cannot build the runner: " + err.strip()[-200:])


def check_aarch64(wheel, work):
    runner, why = arm64_runner(work)
    if runner is None:
        print("SKIP aarch64 wheel not run: " + why)
        return
    # pip of this machine installs it for that platform (its tags checked)
    # into a directory the root sees; the root's python3 runs it.
    target = os.path.join(work, "arm64-site")
    platform = wheel.rsplit("-", 1)[1][:-len(".whl")]
    code, out, err = run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", target,
                          "--platform", platform, "--only-binary=:all:", wheel],
                         env=dict(os.environ, PIP_ROOT_USER_ACTION="ignore"))
    if not check(code == 0, "aarch64 wheel installs for %s (%s)" % (platform, err.strip()[-200:])):
        return
    env = dict(os.environ, PYTHONPATH=target)
    prof = os.path.join(work, "arm64-demo.txt")
    code, out, err = run([runner, "/usr/bin/python3", "-m", "pysample", "record", "-q", "-o", prof, "--",
                          "/usr/bin/python3", os.path.join(target, "pysample", "demo.py")], env=env, timeout=300)
    found = set()
    if code == 0 and os.path.isfile(prof):
        with open(prof) as f:
            found = functions(f.read())
    check(DEMO_FUNCTIONS <= found, "aarch64 wheel records the demo under qemu (%s)" % err.strip()[-300:])


def main():
    pythons = [p for p in (os.environ.get("PYSAMPLE_WHEEL_PYTHONS", "").split(":") if
                           os.environ.get("PYSAMPLE_WHEEL_PYTHONS") else DEFAULT_PYTHONS) if os.access(p, os.X_OK)]
    if not VERSION or not pythons:
        print("SKIP: no PYSAMPLE_TEST_VERSION or none of %s" % ", ".join(DEFAULT_PYTHONS))
        return 77
    work = tempfile.mkdtemp(prefix="pysample-wheel-test.")
    try:
        t0 = time.time()
        prebuilt = os.environ.get("PYSAMPLE_TEST_WHEELS")
        if prebuilt:
            found = dict((os.path.basename(w), w) for w in glob.glob(os.path.join(prebuilt, "*.whl")))
        else:
            found = build_wheels(os.path.join(work, "wheels"))
        wheels = {"x86_64": wheel_named(found, "manylinux_", "_x86_64.whl"),
                  "musl": wheel_named(found, "musllinux_", "_x86_64.whl"),
                  "aarch64": wheel_named(found, "manylinux_", "_aarch64.whl")}
        if not check(wheels["x86_64"] is not None,
                     "an x86_64 manylinux wheel: %s" % ", ".join(sorted(found))):
            return 1
        check_wheel_contents(wheels["x86_64"])
        libs = {}
        for python in pythons:
            one_python(python, wheels, work, libs, python == pythons[0])
        check(len(set(libs.values())) == len(libs), "each venv's pysample lib is its own: %d venvs, %d paths"
              % (len(libs), len(set(libs.values()))))
        if wheels["musl"]:
            check_musl(wheels["musl"])
            run_musl(wheels["musl"], work)
        else:
            print("SKIP musl wheel: not built here (no musl-gcc)")
        if wheels["aarch64"]:
            check_aarch64(wheels["aarch64"], work)
        else:
            print("SKIP aarch64 wheel: not built here (no aarch64-linux-gnu-gcc)")
        print("wheel test: %.0f s, %d failures" % (time.time() - t0, len(failures)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
