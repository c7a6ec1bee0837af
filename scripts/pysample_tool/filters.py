# filters.py - which samples a reading command looks at: --thread NAME|TID
# and --active (docs/tools.md#which-threads-count).
#
# A wall-clock profile adds up every thread at every tick, so a pool of
# threads waiting on one lock can be most of it.  The collapsed format keeps
# no per-sample thread state (a profile is wall or cpu, all threads or the
# GIL's holder, as a whole: docs/format.md), so --active tells a waiting
# sample by where its stack ends: a native stack (PYSAMPLE_NATIVE, py-spy
# --native) ends in the system call or the GIL wait, and a Python-only one
# in the standard library's waits (Condition.wait, a selector's select,
# Thread.join ...), py-spy's own guess where it cannot ask the kernel.
#
# SPDX-License-Identifier: MIT

import collections
import fnmatch

from .collapsed import KIND_MARKER, KIND_NATIVE, KIND_PY, Frame
from .common import ToolError

# The GIL: a thread in one of these waits to run Python, so it counts as
# active (what py-spy's default shows), whatever it waits in below them.
GIL_WAITS = frozenset((
    "take_gil", "PyEval_RestoreThread", "PyEval_AcquireThread", "PyEval_AcquireLock",
    "_PyEval_AcquireLock", "PyGILState_Ensure", "_PyThreadState_Attach", "drop_gil",
))

# Native functions a blocked thread sleeps in (glibc's names, with and
# without their internal prefixes, and CPython's lock waits).
_NATIVE_WAITS = (
    "futex", "pthread_cond_wait", "pthread_cond_timedwait", "pthread_cond_clockwait", "sem_wait",
    "sem_timedwait", "sem_clockwait", "poll", "ppoll", "epoll_wait", "epoll_pwait", "epoll_pwait2", "select",
    "pselect", "pselect6", "nanosleep", "clock_nanosleep", "usleep", "sleep", "read", "recv", "recvfrom",
    "recvmsg", "accept", "accept4", "connect", "wait4", "waitpid", "waitid", "sigtimedwait", "sigwaitinfo",
    "pause", "do_futex_wait", "PyThread_acquire_lock_timed", "PyThread_acquire_lock", "PyMUTEX_LOCK",
    "_PySemaphore_PlatformWait", "_PySemaphore_Wait", "_PyMutex_LockTimed", "_PyParkingLot_Park",
    "lock_PyThread_acquire_lock", "rlock_acquire", "time_sleep", "pysleep",
)

# Where the standard library's Python code waits: (qualname, file suffix).
# The innermost Python frame is one of these only while the thread blocks
# in the C call it makes there.
_PY_WAITS = (
    ("Condition.wait", "threading.py"), ("Event.wait", "threading.py"),
    ("Thread._wait_for_tstate_lock", "threading.py"), ("Thread.join", "threading.py"),
    ("Semaphore.acquire", "threading.py"), ("Barrier._wait", "threading.py"),
    ("_worker", "concurrent/futures/thread.py"), ("Queue.get", "queue.py"),
    ("select", "selectors.py"), ("SelectSelector.select", "selectors.py"),
    ("PollSelector.select", "selectors.py"), ("EpollSelector.select", "selectors.py"),
    ("DevpollSelector.select", "selectors.py"), ("KqueueSelector.select", "selectors.py"),
    ("_PollLikeSelector.select", "selectors.py"), ("socket.accept", "socket.py"),
    ("SocketIO.readinto", "socket.py"), ("Popen._try_wait", "subprocess.py"), ("Popen._wait", "subprocess.py"),
    ("Connection._recv", "multiprocessing/connection.py"), ("wait", "multiprocessing/connection.py"),
    ("_recv", "multiprocessing/connection.py"), ("sleep", "asyncio/tasks.py"),
)


def add_options(parser):
    """--thread and --active: args.thread (a list or None), args.active."""
    parser.add_argument("--thread", action="append", metavar="NAME|TID",
                        help="only the samples of this thread: its kernel id, or its name (shell wildcards "
                             "allowed: 'worker-*'); repeat for several")
    parser.add_argument("--active", action="store_true",
                        help="only the samples of threads that were running or waiting for the GIL, not "
                             "those blocked in a wait (what py-spy shows without --idle; told by where "
                             "each stack ends: docs/tools.md#which-threads-count)")


def _native_name(frame):
    """The function name of a native frame, or None for a Python frame.  A
    named native frame reads as `name (library)` (no line): its file is an
    object, not a .py file."""
    if frame.kind == KIND_NATIVE:
        return None         # an address: no name to go by
    if frame.kind != KIND_PY or frame.line is not None:
        return None
    f = frame.file
    if f.endswith(".py") or f.startswith("<"):
        return None
    if ".so" in f or "python" in f or "." not in f:
        name = frame.name.split("@")[0].lstrip("_")
        return name.replace("GI_", "", 1).replace("libc_", "", 1).lstrip("_")
    return None


def _is_native_wait(name):
    for wait in _NATIVE_WAITS:
        if name == wait or name.startswith(wait + "_") or name.endswith("_" + wait):
            return True
        if wait == "futex" and "futex" in name:
            return True
    return False


def is_waiting(frames):
    """True when a stack ends in a wait that is not the GIL's."""
    natives = []
    for frame in reversed(frames):
        if frame.kind == KIND_MARKER:
            if frame.name in ("[gc]", GIL_WAIT):
                return False
            continue
        name = _native_name(frame)
        if name is None and frame.kind == KIND_NATIVE:
            natives.append(None)
            continue
        if name is not None:
            natives.append(name)
            continue
        # The innermost Python frame: what ran it below says the rest.
        if natives:
            return _natives_wait(natives)
        return any(frame.name == q and frame.file.replace("\\", "/").endswith(s) for q, s in _PY_WAITS)
    return _natives_wait(natives) if natives else False


def _natives_wait(innermost_first):
    """The native frames above the innermost Python frame: waiting when the
    innermost named one is a wait and none is the GIL's."""
    names = [n for n in innermost_first if n is not None]
    if not names or any(n in GIL_WAITS for n in names):
        return False
    # Interpreter frames are hidden between a Python frame and what it
    # called, and take_gil is often inlined or stripped: a condition
    # variable or futex wait right under the Python frame, with no C
    # function of a module between, is the eval loop's wait for the GIL.
    if names[-1].startswith("pthread_cond_") or "futex" in names[-1]:
        return False
    return _is_native_wait(names[0])


# The frame that stands for the GIL wait's native frames (name_gil_waits).
GIL_WAIT = "[waiting for the GIL]"


def _gil_wait_at(frames, first):
    """Where the GIL wait begins among frames[first:] (the native frames
    below the innermost Python frame, root first), or None.  A function of
    GIL_WAITS (named through .dynsym even in a stripped interpreter:
    PyEval_RestoreThread): the wait is what it called.  Else, as
    _natives_wait says, a condition wait as the first named frame under
    the Python frame, only the interpreter's unnamed frames before it: the
    eval loop dropped the GIL on request and waits to take it back
    (take_gil, static, has no name there)."""
    for i in range(first, len(frames)):
        name = _native_name(frames[i])
        if name in GIL_WAITS:
            return i + 1
    for i in range(first, len(frames)):
        name = _native_name(frames[i])
        if name is None and frames[i].kind == KIND_NATIVE:
            if "python" not in (frames[i].file or ""):
                return None     # an extension's code: its own wait
            continue
        if name is not None and name.startswith("pthread_cond_"):
            return first
        return None
    return None


def name_gil_waits(profile):
    """With native frames, a thread waiting for the GIL ends in the
    interpreter's and the C library's frames, which a stripped interpreter
    leaves unnamed: `top` headlined [libc.so.6] and [python3.11] (issue
    #35).  The frames of that wait become one GIL_WAIT frame (the function
    that asked for the GIL, when named, stays above it).  Identical stacks
    are added up.  Returns the profile."""
    merged = collections.OrderedDict()
    for thread, frames, count in profile.stacks:
        py = [i for i, f in enumerate(frames) if f.kind == KIND_PY and _native_name(f) is None]
        first = py[-1] + 1 if py else 0
        at = _gil_wait_at(frames, first) if first < len(frames) else None
        if at is not None:
            frames = tuple(frames[:at]) + (Frame(KIND_MARKER, GIL_WAIT, None, None),)
        key = (thread, tuple(frames))
        merged[key] = merged.get(key, 0) + count
    profile.stacks = [(thread, frames, count) for (thread, frames), count in merged.items()]
    return profile


def _thread_matches(thread, wanted):
    for text in wanted:
        if text.isdigit() and thread.tid is not None and int(text) == thread.tid:
            return True
        if thread.name is not None and fnmatch.fnmatchcase(thread.name, text):
            return True
    return False


def apply(profile, args):
    """The profile with only the samples --thread and --active keep; a
    ToolError when none is left, naming the threads there are."""
    wanted = getattr(args, "thread", None)
    active = getattr(args, "active", False)
    if not wanted and not active:
        return profile
    kept, total = [], 0
    for thread, frames, count in profile.stacks:
        if wanted and not _thread_matches(thread, wanted):
            continue
        if active and is_waiting(frames):
            continue
        kept.append((thread, frames, count))
        total += count
    if total == 0:
        raise ToolError("%s: no samples left after %s (threads in the profile: %s)"
                        % (profile.path, describe_filters(args), _thread_list(profile)))
    profile.stacks, profile.total = kept, total
    return profile


def describe_filters(args):
    words = ["--thread %s" % t for t in (getattr(args, "thread", None) or [])]
    if getattr(args, "active", False):
        words.append("--active")
    return " ".join(words)


def _thread_list(profile, most=8):
    threads = [t.label for t, _count in profile.threads()]
    more = len(threads) - most
    return ", ".join(threads[:most]) + (", and %d more" % more if more > 0 else "")
