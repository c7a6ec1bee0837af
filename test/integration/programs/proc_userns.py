"""unshare(CLONE_NEWUSER) under the library (docs/troubleshooting.md): it
fails with EINVAL while the sampler thread exists, and works after
pysample_stop(); sampling resumes with pysample_start(0).
Prints "plain <errno>" and "stopped <errno>" (0: it worked)."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampled  # noqa: E402

CLONE_NEWUSER = 0x10000000
libc = ctypes.CDLL(None, use_errno=True)


def unshare_user():
    return 0 if libc.unshare(CLONE_NEWUSER) == 0 else ctypes.get_errno()


def before_unshare():
    sampled.repeat(lambda: sum(range(1000)), 0.2, 20)


def after_unshare():
    sampled.repeat(lambda: sum(range(1000)), 0.2, 20)


before_unshare()
print("plain", unshare_user())
lib = ctypes.CDLL(None)
lib.pysample_stop()
print("stopped", unshare_user())
print("restarted", lib.pysample_start(0))
after_unshare()
