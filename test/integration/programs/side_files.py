"""Side files (the timeline, the quality figures) that cannot be written
for several writes in a row, for test_core.py.

    side_files.py PROFILE WRITES [diskfull]

Plain: computes until the profile PROFILE (PYSAMPLE_OUTPUT, a fixed name,
PYSAMPLE_FLUSH_INTERVAL set) has been written WRITES times (its inode
changes with each atomic write).

diskfull (PROFILE's directory is a small tmpfs of its own): computes until
the timeline written beside PROFILE (PYSAMPLE_TIMELINE) is larger than the
profile by far, fills the file system with "filler" until room for two
profiles is left (one written, one being written), but not for the
timeline, waits for WRITES writes of the profile (each one's timeline
fails for want of space), removes the filler and waits until the timeline
is written again.

Prints "writes N" and "done".
"""
import os
import sys
import time

import sampled

profile, writes = sys.argv[1], int(sys.argv[2])
give_up = time.monotonic() + 60


def work():
    x = 0
    for i in range(20000):
        x += i * i  # side work line
    return x


def inode(path):
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def until_written(path, times):
    """Works until path was replaced times times (or the give-up)."""
    seen, last = 0, inode(path)
    while seen < times and time.monotonic() < give_up:
        work()
        now = inode(path)
        if now is not None and now != last:
            seen, last = seen + 1, now
    return seen


def size(path):
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def fill(directory, leave):
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    with open(os.path.join(directory, "filler"), "wb") as f:
        f.write(b"\0" * max(0, free - leave))


if len(sys.argv) > 3 and sys.argv[3] == "diskfull":
    # Room for the profile twice over and 8 KiB more (it grows a little);
    # the timeline holds the profile's lines and its records.
    room = lambda: 2 * size(profile) + 8192
    while size(profile + ".timeline") < room() + 8192 and time.monotonic() < give_up:
        work()
    fill(os.path.dirname(profile), room())
    print("writes %d" % until_written(profile, writes), flush=True)
    os.unlink(os.path.join(os.path.dirname(profile), "filler"))
    until_written(profile + ".timeline", 1)
else:
    print("writes %d" % until_written(profile, writes), flush=True)
print("done", flush=True)
