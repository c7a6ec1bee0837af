"""Drives the library through its C API with ctypes, without PYSAMPLE_OUTPUT."""
import ctypes
import sys
import time

lib_path, out_path = sys.argv[1], sys.argv[2]
ps = ctypes.CDLL(lib_path)
ps.pysample_samples.restype = ctypes.c_uint64


class Status(ctypes.Structure):
    _fields_ = [("running", ctypes.c_int), ("python_hexversion", ctypes.c_int),
                ("free_threaded", ctypes.c_int), ("rate_hz", ctypes.c_int),
                ("ticks", ctypes.c_uint64), ("samples", ctypes.c_uint64),
                ("errors", ctypes.c_uint64), ("distinct_stacks", ctypes.c_uint64)]


def busy_api():
    end = time.perf_counter() + 0.5
    while time.perf_counter() < end:
        pass


assert ps.pysample_is_running() == 0
assert ps.pysample_start(ctypes.c_int(-5)) != 0       # bad rate refused
rc = ps.pysample_start(500)
assert rc == 0, rc
busy_api()
st = Status()
assert ps.pysample_status(ctypes.byref(st), ctypes.sizeof(st)) == 0
assert ps.pysample_status(ctypes.byref(st), 3) != 0   # wrong size refused
ps.pysample_stop()
assert ps.pysample_is_running() == 0
assert ps.pysample_write(out_path.encode()) == 0
print("version %x running %d rate %d samples %d" % (
    ps.pysample_python_version(), st.running, st.rate_hz, ps.pysample_samples()))
expect = (sys.version_info[0] << 24) | (sys.version_info[1] << 16)
assert ps.pysample_python_version() & 0xffff0000 == expect
