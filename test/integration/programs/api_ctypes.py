"""Drives the library through its C API with ctypes, without PYSAMPLE_OUTPUT."""
import ctypes
import sys
import time

import sampled

lib_path, out_path = sys.argv[1], sys.argv[2]
ps = ctypes.CDLL(lib_path)
ps.pysample_samples.restype = ctypes.c_uint64


Status = sampled.Status


def busy_api():
    # 0.5 s, and until the sampler has woken 60 times (sampled.py).
    until = sampled.Until(0.5, 60, lib=ps)
    while True:
        while time.perf_counter() < until.deadline:
            pass
        if not until.extend():
            return


assert ps.pysample_is_running() == 0
assert ps.pysample_start(ctypes.c_int(-5)) != 0       # bad rate refused
rc = ps.pysample_start(500)
assert rc == 0, rc
busy_api()
st = Status()
assert ps.pysample_status(ctypes.byref(st), ctypes.sizeof(st)) == 0
assert ps.pysample_status(ctypes.byref(st), 3) != 0   # wrong size refused
class StatusByCause(ctypes.Structure):                  # the struct with errors by cause
    _fields_ = Status._fields_ + [("errors_unreadable", ctypes.c_uint64),
                                  ("errors_inconsistent", ctypes.c_uint64)]


full = StatusByCause()
assert ps.pysample_status(ctypes.byref(full), ctypes.sizeof(full)) == 0
assert full.errors_unreadable + full.errors_inconsistent <= full.errors, (
    full.errors_unreadable, full.errors_inconsistent, full.errors)
short = Status()                                       # an older, shorter struct
assert ps.pysample_status(ctypes.byref(short), Status.ticks.offset) == 0
assert short.running == 1 and short.rate_hz == 500 and short.ticks == 0, (short.running, short.rate_hz)
ps.pysample_stop()
assert ps.pysample_is_running() == 0
assert ps.pysample_write(out_path.encode()) == 0
print("version %x running %d rate %d samples %d" % (
    ps.pysample_python_version(), st.running, st.rate_hz, ps.pysample_samples()))
expect = (sys.version_info[0] << 24) | (sys.version_info[1] << 16)
assert ps.pysample_python_version() & 0xffff0000 == expect
