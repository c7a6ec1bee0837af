#!/usr/bin/env python3
"""Captures the _Py_DebugOffsets block of the running CPython (3.13+) as a
unit-test fixture, after checking it against the live interpreter.

    python3.15 test/unit/capture_debug_offsets.py [OUT.txt]

Writes (to OUT.txt, else stdout) the format test/unit/debug_offsets_fixture.h
reads: a comment line naming the build, Py_Version in hex, then the first
1 KiB of _PyRuntime in hex.

Before writing, every value libpysample takes from the block is checked
against the interpreter it describes, through ctypes: the thread state's
native_thread_id must be this thread's, its current_frame must run this
function's code object, the code object's co_filename, co_name, co_qualname,
co_linetable and co_firstlineno must be this code's, a bytes object's size
and contents and a str's length must be where the block says.  The
positions of those values inside the block are written out here a second
time (from each version's Include/internal/pycore_debug_offsets.h), so a
wrong table in lib/python/layout_debugoffsets_table.c and a wrong capture do not agree by
accident.  Exit status 1 and a message if anything disagrees.
"""
import ctypes
import platform
import struct
import sys
import sysconfig
import threading

# Position of each member inside the block, one row per member, one column
# per minor version ("-": the version has no such member).  3.16: CPython's
# main branch at 999a046b24cf (3.16.0a0), whose header is 3.15's.
POS_TABLE = """
member              3.13  3.14  3.15  3.16
rt_interp_head        40    40    40    40
is_threads_head       72    72    72    72
ts_interp            176   200   200   200
ts_current_frame     184   208   208   208
ts_thread_id         192   216   240   240
ts_native_id         200   224   248   248
fr_size              224   248   312   312
fr_previous          232   256   320   320
fr_executable        240   264   328   328
fr_instr_ptr         248   272   336   336
fr_owner             264   288   352   352
fr_tlbc_index          -   304   368   368
co_filename          280   320   384   384
co_name              288   328   392   392
co_qualname          296   336   400   400
co_linetable         304   344   408   408
co_firstlineno       312   352   416   416
co_code_adaptive     344   384   448   448
co_tlbc                -   392   456   456
ob_type              360   408   472   472
by_ob_size           520   600   696   696
by_ob_sval           528   608   704   704
un_length            552   632   728   728
total                584   760   888   888
"""


def _positions(table):
    """minor -> {member: byte position}, from POS_TABLE."""
    rows = [line.split() for line in table.strip().splitlines()]
    minors = [int(v.split(".")[1]) for v in rows[0][1:]]
    return {m: {r[0]: int(r[1 + i]) for r in rows[1:] if r[1 + i] != "-"}
            for i, m in enumerate(minors)}


POS = _positions(POS_TABLE)

api = ctypes.pythonapi
api.PyThreadState_Get.restype = ctypes.c_void_p
api.PyInterpreterState_Get.restype = ctypes.c_void_p
api.PyInterpreterState_ThreadHead.restype = ctypes.c_void_p
api.PyInterpreterState_ThreadHead.argtypes = [ctypes.c_void_p]
api.PyInterpreterState_Head.restype = ctypes.c_void_p


USED_TLBC = []   # thread-local bytecode copies the frame check went through


def u64(addr):
    return struct.unpack("<Q", ctypes.string_at(addr, 8))[0]


def i32(addr):
    return struct.unpack("<i", ctypes.string_at(addr, 4))[0]


def fail(msg):
    sys.stderr.write("capture_debug_offsets: %s\n" % msg)
    sys.exit(1)


def check(ok, what):
    if not ok:
        fail("the block disagrees with this interpreter: " + what)


def verify(block, runtime):
    minor = sys.version_info[1]
    if minor not in POS:
        fail("no positions known for 3.%d" % minor)
    P = POS[minor]

    def v(name):
        return struct.unpack_from("<Q", block, P[name])[0]

    check(block[:8] == b"xdebugpy", "cookie")
    ver = struct.unpack_from("<Q", block, 8)[0]
    check(ver == sys.hexversion, "version %x != sys.hexversion %x" % (ver, sys.hexversion))
    ft = struct.unpack_from("<Q", block, 16)[0]
    check(ft == int(bool(sysconfig.get_config_var("Py_GIL_DISABLED"))), "free_threaded")

    interp = api.PyInterpreterState_Get()
    check(u64(runtime + v("rt_interp_head")) == api.PyInterpreterState_Head(),
          "runtime_state.interpreters_head")
    check(u64(interp + v("is_threads_head")) == api.PyInterpreterState_ThreadHead(interp),
          "interpreter_state.threads_head")
    ts = api.PyThreadState_Get()
    check(u64(ts + v("ts_interp")) == interp, "thread_state.interp")
    check(u64(ts + v("ts_native_id")) == threading.get_native_id(),
          "thread_state.native_thread_id")
    check(u64(ts + v("ts_thread_id")) == threading.get_ident(), "thread_state.thread_id")

    # The frame running this function: ctypes calls C code, so this Python
    # frame is the thread's current frame while we are here (no call in
    # between pushes another Python frame; u64 is the first one).
    code = sys._getframe().f_code
    frame = u64(ts + v("ts_current_frame"))
    # u64() itself is a Python function: its frame is the current one at the
    # time of the read, so walk back to ours by previous.
    seen = []
    for _ in range(8):
        exe = u64(frame + v("fr_executable")) & ~3
        seen.append(exe)
        if exe == id(code):
            break
        frame = u64(frame + v("fr_previous"))
    check(id(code) in seen, "interpreter_frame.executable/previous (no frame runs this code)")
    owner = ctypes.string_at(frame + v("fr_owner"), 1)[0]
    check(owner == 0, "interpreter_frame.owner %d (want 0, owned by thread)" % owner)
    ip = u64(frame + v("fr_instr_ptr"))
    nbytes = len(code.co_code)
    base = id(code) + v("co_code_adaptive")
    if not (base <= ip < base + nbytes):
        # Free-threaded builds may run a thread-local copy of the bytecode.
        check(ft and "fr_tlbc_index" in P, "interpreter_frame.instr_ptr outside co_code_adaptive")
        idx = i32(frame + v("fr_tlbc_index"))
        arr = u64(id(code) + v("co_tlbc"))
        entry = u64(arr + 8 + 8 * idx)
        check(entry <= ip < entry + nbytes, "instr_ptr outside thread-local bytecode %d" % idx)
        USED_TLBC.append(idx)
    check(u64(id(code) + v("co_filename")) == id(code.co_filename), "code_object.filename")
    check(u64(id(code) + v("co_name")) == id(code.co_name), "code_object.name")
    check(u64(id(code) + v("co_qualname")) == id(code.co_qualname), "code_object.qualname")
    check(u64(id(code) + v("co_linetable")) == id(code.co_linetable), "code_object.linetable")
    check(i32(id(code) + v("co_firstlineno")) == code.co_firstlineno, "code_object.firstlineno")
    check(u64(id(code) + v("ob_type")) == id(type(code)), "pyobject.ob_type")
    b = b"pysample fixture bytes"
    check(u64(id(b) + v("by_ob_size")) == len(b), "bytes_object.ob_size")
    check(ctypes.string_at(id(b) + v("by_ob_sval"), len(b)) == b, "bytes_object.ob_sval")
    s = "pysample fixture str " + str(len(seen))
    check(u64(id(s) + v("un_length")) == len(s), "unicode_object.length")


def main():
    runtime = ctypes.addressof(ctypes.c_char.in_dll(api, "_PyRuntime"))
    block = ctypes.string_at(runtime, 1024)
    verify(block, runtime)
    ft = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    # Again from a second thread: its thread state, and on free-threaded
    # builds its own copy of the bytecode (tlbc_index > 0, co_tlbc).
    errors = []

    def again():
        try:
            verify(block, runtime)
        except SystemExit as e:
            errors.append(e)
    t = threading.Thread(target=again)
    t.start()
    t.join()
    if errors:
        sys.exit(1)
    if ft and "fr_tlbc_index" in POS[sys.version_info[1]]:
        check(any(i > 0 for i in USED_TLBC),
              "the second thread did not run thread-local bytecode (copies used: %r)" % USED_TLBC)
        sys.stderr.write("capture_debug_offsets: instr_ptr found in thread-local bytecode "
                         "copies %r\n" % USED_TLBC)
    dbg = bool(sysconfig.get_config_var("Py_DEBUG"))
    shared = bool(sysconfig.get_config_var("Py_ENABLE_SHARED"))
    v = sys.version_info
    rel = "%d.%d.%d%s" % (v[0], v[1], v[2],
                          "" if v[3] == "final" else {"alpha": "a", "beta": "b",
                                                      "candidate": "rc"}[v[3]] + str(v[4]))
    kind = "%s%s%s build" % ("shared" if shared else "static",
                             " free-threaded" if ft else "", " debug" if dbg else "")
    out = "# _Py_DebugOffsets of CPython %s%s%s (%s, %s), Py_Version 0x%x\n%x\n%s\n" % (
        rel, "t" if ft else "", "d" if dbg else "", kind, platform.machine(),
        sys.hexversion, sys.hexversion, block.hex())
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(out)
    else:
        sys.stdout.write(out)


if __name__ == "__main__":
    main()
