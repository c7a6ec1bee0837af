"""A program that really crashes, after running threads under the sampler.

    stress_segfault.py SECONDS WHERE HOW [faulthandler]
      WHERE  main | thread     which thread crashes
      HOW    null | kill       a NULL read (a hardware fault) or
                               os.kill(getpid(), SIGSEGV) (a sent signal)

It must die exactly as it does without the library: by SIGSEGV, with the
same faulthandler report."""
import ctypes
import faulthandler
import os
import signal
import sys
import threading

from stress_common import deadline, dive, expected_dive

seconds, where, how = float(sys.argv[1]), sys.argv[2], sys.argv[3]
if "faulthandler" in sys.argv[4:]:
    faulthandler.enable()
stop = threading.Event()
parked = threading.Event()
hold = threading.Event()


def background():
    while not stop.is_set():
        assert dive(300) == expected_dive(300)
    # Parked in a C call, its frames hold still while faulthandler dumps
    # them.  A thread still running Python makes faulthandler itself crash
    # now and then on free-threaded builds (it reads that thread's frames
    # unsynchronised): the report is cut inside the other thread's dump,
    # with or without us, which says nothing about our delivery.
    parked.set()
    hold.wait()


def crash_now():
    stop.set()
    parked.wait()
    sys.stdout.flush()
    if how == "null":
        ctypes.string_at(0)  # @crash-null
    else:
        os.kill(os.getpid(), signal.SIGSEGV)  # @crash-kill
        # A sent signal may take a moment to be delivered.
        threading.Event().wait(5)


def work_then_crash():
    more = deadline(seconds)
    while more():
        assert dive(1000) == expected_dive(1000)
    crash_now()


bg = threading.Thread(target=background, daemon=True)
bg.start()
print("before crash")
if where == "thread":
    t = threading.Thread(target=work_then_crash)
    t.start()
    t.join()
else:
    work_then_crash()
print("survived")
