# common.py - what every part of the pysample tool shares: its name and
# version, the error type that becomes one `pysample: ...` line, text helpers
# for terminals and XML, and atomic output.
#
# SPDX-License-Identifier: MIT

import os
import re
import sys
import tempfile

VERSION = "0.1.0"
PROG = "pysample"


class ToolError(Exception):
    """A problem the user has to fix: printed as one `pysample: ...` line."""

    def __init__(self, message, status=2):
        Exception.__init__(self, message)
        self.status = status


# ---------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------

_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f]")  # C0, DEL and C1 (U+009B is a CSI to some terminals)
_XML_INVALID_RE = re.compile("[\ud800-\udfff\ufffe\uffff]")


def printable(text):
    """Makes names safe for a terminal or XML: control characters are shown
    as \\n, \\t, \\xNN; characters XML can't hold become U+FFFD."""
    if _CONTROL_RE.search(text):
        text = _CONTROL_RE.sub(lambda m: repr(m.group(0))[1:-1], text)
    if _XML_INVALID_RE.search(text):
        text = _XML_INVALID_RE.sub("\ufffd", text)
    return text


def xml_text(text, lines=None):
    """Escapes text for XML text and attributes.  Control characters are made
    visible; to get line breaks (multi-line tooltips) pass the lines instead."""
    if lines is not None:
        text = "\n".join(printable(line) for line in lines)
    else:
        text = printable(text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def percent(part, whole):
    return 100.0 * part / whole if whole else 0.0


def thousands(n):
    return "{:,}".format(n)


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------

# Profiles name files and functions: what the tool writes gets the
# library's PYSAMPLE_FILE_MODE default.
FILE_MODE = 0o600


def write_output(path, data, binary, mode=FILE_MODE):
    """Writes data to path atomically (a temporary file renamed over it) with
    the given permissions (umask aside, as the library does), or to standard
    output when path is None or "-"."""
    if path is None or path == "-":
        stream = getattr(sys.stdout, "buffer", sys.stdout)
        if binary and sys.stdout.isatty():
            raise ToolError("refusing to write binary pprof data to a terminal; use -o FILE")
        try:
            stream.write(data)
            stream.flush()
        except BrokenPipeError:
            # `pysample top prof.txt | head`: not an error.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".pysample-", dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except (IOError, OSError) as e:
        raise ToolError("cannot write %s: %s" % (path, e.strerror or e))


def file_mode(env):
    """The permissions PYSAMPLE_FILE_MODE in env asks for, as the library
    reads it (octal, owner-read); FILE_MODE when unset or refused (the
    library says why)."""
    text = (env.get("PYSAMPLE_FILE_MODE") or "").strip()
    try:
        mode = int(text, 8)
    except ValueError:
        return FILE_MODE
    return mode if 0 < mode <= 0o777 and mode & 0o400 else FILE_MODE
