#!/usr/bin/env python3
"""Lists the CPython interpreters the integration tests run under.

One line per interpreter: "<label> <path>"; "<label> <path> pending=<marker>"
for one .ci/run is still building (its tests wait for it: run.py --pending).  Sources, in order:
  - pyenv's versions ($(pyenv root)/versions/*/bin/python, or ~/.pyenv);
  - the system's /usr/bin/python3.N and their debug builds (python3.N-dbg);
  - interpreters in test/pythons/build.sh's cache: the ones it builds, and
    ones built by hand whose stamp names label and executable (3.14+ from
    CPython's own sources, docs/pythons.md);
  - PYSAMPLE_TEST_PYTHONS (colon-separated paths) and argv[1:].
Interpreters older than 3.8 are ignored (nothing of ours runs there), but
for 2.7 and 3.6, which have no _PyRuntime to be recognised by; those and
3.8 are listed so the suite can check that they are refused cleanly.  Duplicates
(same resolved executable) are listed once.

The interpreters of one C library are listed: glibc's by default, musl's
with --libc musl (test/meson.build in a musl build: the library built there
cannot load into a glibc process, nor the other way round).  An
interpreter is musl's when its ELF program interpreter is ld-musl, or, one
still being built, when its label ends in -musl or -musl-shared.

--mark-primary appends " primary" to one line: the interpreter that also
runs the scenarios whose outcome does not depend on the interpreter (the
library's own settings, the control protocol, the CPU budget; run.py
--primary).  It is the newest supported release build from pyenv (a label
like 3.13.0: GIL, not debug, shared libpython), else the newest supported
interpreter of any kind.
"""
import glob
import os
import re
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def probe(path):
    """(label, version tuple) for an interpreter, or None if it does not run."""
    # Python 2 can run this too (2.7 is listed: see the top).
    code = ("import sys, sysconfig;"
            "sys.stdout.write('%d %d %d %d %d %d\\n' % (sys.version_info[0], sys.version_info[1],"
            " sys.version_info[2],"
            " int(bool(sysconfig.get_config_var('Py_GIL_DISABLED'))),"
            " int(bool(sysconfig.get_config_var('Py_DEBUG'))),"
            " int(bool(sysconfig.get_config_var('Py_ENABLE_SHARED')))))")
    try:
        out = subprocess.run([path, "-c", code], capture_output=True, text=True,
                             timeout=30, env={"PATH": os.environ.get("PATH", "")}).stdout
        major, minor, micro, ft, dbg, shared = map(int, out.split())
    except Exception:
        return None
    if (major, minor) < (3, 8) and (major, minor) not in ((2, 7), (3, 6)):
        return None
    label = "%d.%d.%d%s%s" % (major, minor, micro, "t" if ft else "", "d" if dbg else "")
    if not shared:
        label += "-static"
    return label, (major, minor, micro)


def elf_interp(path):
    """The PT_INTERP of an ELF64 little-endian executable, b"" if none or
    not such a file."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return b""
            phoff, = struct.unpack_from("<Q", head, 32)
            phentsize, phnum = struct.unpack_from("<HH", head, 54)
            for i in range(phnum):
                f.seek(phoff + i * phentsize)
                ptype, _, off, _, _, size = struct.unpack("<IIQQQQ", f.read(40))
                if ptype == 3:          # PT_INTERP
                    f.seek(off)
                    return f.read(min(size, 4096)).rstrip(b"\0")
    except (OSError, struct.error, IndexError):
        pass
    return b""


def libc_of(path, label=None):
    """"musl" or "glibc" (anything not musl)."""
    if label is not None and label.endswith(("-musl", "-musl-shared")):
        return "musl"
    return "musl" if b"ld-musl" in elf_interp(os.path.realpath(path)) else "glibc"


def candidates(extra):
    roots = []
    try:
        roots.append(subprocess.run(["pyenv", "root"], capture_output=True, text=True,
                                    timeout=10).stdout.strip())
    except Exception:
        pass
    roots.append(os.path.expanduser("~/.pyenv"))
    for root in roots:
        if root:
            for p in sorted(glob.glob(os.path.join(root, "versions", "*", "bin", "python3"))):
                yield p, None
            for p in sorted(glob.glob(os.path.join(root, "versions", "2.7.*", "bin", "python2"))):
                yield p, None
    for p in sorted(glob.glob("/usr/bin/python3.[0-9]*")):
        base = os.path.basename(p)
        if base.endswith("-config") or base.endswith("m"):
            continue
        yield p, "debian-"
    build = os.path.join(HERE, "pythons", "build.sh")
    if os.path.exists(build):
        try:
            out = subprocess.run(["bash", build, "--list"], capture_output=True, text=True,
                                 timeout=60).stdout
            for line in out.splitlines():
                parts = line.split()
                if len(parts) == 2:
                    yield parts[1], parts[0] + ":"
                elif len(parts) == 3 and parts[2].startswith("pending="):
                    # Being built while the suite runs: listed without
                    # probing, its tests wait for it (run.py --pending).
                    yield parts[1], parts[0] + ":" + parts[2]
        except Exception:
            pass
    for p in os.environ.get("PYSAMPLE_TEST_PYTHONS", "").split(":") + extra:
        if p:
            yield p, None


# The versions libpysample profiles (run.py refuses the others as a whole).
SUPPORTED = ((3, 9), (3, 16))


def primary(found):
    """The label of the primary interpreter among found [(label, path,
    (major, minor, micro))], or None."""
    ok = [f for f in found if SUPPORTED[0] <= f[2][:2] <= SUPPORTED[1]]
    plain = [f for f in ok if re.fullmatch(r"\d+\.\d+\.\d+", f[0])]
    best = sorted(plain or ok, key=lambda f: f[2])
    return best[-1][0] if best else None


def main():
    args = sys.argv[1:]
    mark = "--mark-primary" in args
    libc = "glibc"
    if "--libc" in args:
        i = args.index("--libc")
        libc = args[i + 1]
        del args[i:i + 2]
    found = []
    pending = []
    seen_exe = set()
    seen_label = set()
    for path, prefix in candidates([a for a in args if a != "--mark-primary"]):
        if prefix and ":pending=" in prefix:
            label, marker = prefix.split(":", 1)
            if libc_of(path, label) != libc:
                continue
            pending.append((label, path, marker))
            seen_label.add(label)
            continue
        if not os.path.exists(path):
            continue
        real = os.path.realpath(path)
        if real in seen_exe:
            continue
        seen_exe.add(real)
        if libc_of(path, prefix[:-1] if prefix and prefix.endswith(":") else None) != libc:
            continue
        got = probe(path)
        if got is None:
            continue
        label, version = got
        if prefix and prefix.endswith(":"):
            label = prefix[:-1]          # the build script's own label
        elif prefix:
            label = prefix + label
        while label in seen_label:
            label += "+"
        seen_label.add(label)
        found.append((label, path, version))
    first = primary(found) if mark else None
    for label, path, _ in found:
        print(label, path + (" primary" if label == first else ""))
    for label, path, marker in pending:
        print(label, path, marker)


if __name__ == "__main__":
    main()
