# sip.py - macOS: System Integrity Protection removes DYLD_INSERT_LIBRARIES
# when a protected binary starts (Apple's /usr/bin/python3, /usr/bin/env in a
# #! line, anything under /System), so the library would silently not load
# and record would find no profile.  record says so up front (docs/macos.md).
#
# SPDX-License-Identifier: MIT

import os
import shutil
import subprocess

from .common import ToolError

PROTECTED_PREFIXES = ("/usr/bin/", "/bin/", "/sbin/", "/usr/sbin/", "/usr/libexec/", "/System/")

# PYSAMPLE_TEST_UNAME lets the tests take the macOS path on Linux.
UNAME_ENV = "PYSAMPLE_TEST_UNAME"


def on_macos():
    name = os.environ.get(UNAME_ENV)
    if name is None:
        name = os.uname().sysname
    return name == "Darwin"


def _sip_enabled():
    try:
        out = subprocess.run(["csrutil", "status"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return True
    return b"disabled" not in out


def _shebang_interpreter(path):
    try:
        with open(path, "rb") as f:
            first = f.readline(4096)
    except (IOError, OSError):
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    return words[0] if words else None


def refuse_protected(first):
    """Raises ToolError when the program that starts first (the command's
    first word, or the interpreter record runs a .py with) is protected by
    SIP, through where its path leads or the #! line of a script."""
    path = shutil.which(first)
    if path is None:
        return
    real = os.path.realpath(path)
    interpreter = _shebang_interpreter(path) if os.path.isfile(path) else None
    for place, what in ((path, path), (real, "%s (where %s leads)" % (real, path)),
                        (interpreter, "%s (the #! line of %s)" % (interpreter, path))):
        if place and place.startswith(PROTECTED_PREFIXES) and _sip_enabled():
            raise ToolError("%s is protected by macOS System Integrity Protection, which removes "
                            "DYLD_INSERT_LIBRARIES from its environment: libpysample would not be loaded and "
                            "nothing would be recorded.  Use a Python from Homebrew, pyenv, uv or python.org "
                            "(--python PATH, or -- /path/to/python3 app.py); see docs/macos.md" % what)
