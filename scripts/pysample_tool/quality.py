# quality.py - what a profile is worth (lib/sampler/quality.h's "key value" lines),
# carried where each consumer keeps it:
#   collapsed   a sidecar <profile>.quality.json: the collapsed format has no
#               place for it (a "#" line is read as a stack by flamegraph.pl
#               and inferno when it ends in a number, "# ticks 200" among
#               them, and our own reader refuses it: docs/format.md);
#   pprof       one comment with the figures that matter in words (pprof
#               prints every comment above every report), the period and
#               sample_type from the requested rate and mode;
#   speedscope  a "pysample" object beside the profiles, and the exporter.
#
# SPDX-License-Identifier: MIT

import json
import os

from .common import FILE_MODE, VERSION

SIDECAR_SUFFIX = ".quality.json"

# Figures that are numbers, as numbers in JSON.
_INTS = ("requested_rate_hz", "ticks", "samples", "late_ticks", "dropped_unreadable",
         "dropped_inconsistent", "dropped_other", "truncated_stacks", "budget_adjustments",
         "rate_now_hz", "native_masked")
_FLOATS = ("achieved_rate_hz", "duration_s", "sampler_cpu_s", "budget_pct")


def typed(meta):
    out = {}
    for key, value in meta.items():
        try:
            if key in _INTS:
                value = int(value)
            elif key in _FLOATS:
                value = float(value)
        except ValueError:
            pass
        out[key] = value
    return out


def sidecar_path(profile_path):
    return profile_path + SIDECAR_SUFFIX


def write_sidecar(profile_path, meta, pid=None):
    if not meta:
        return None
    doc = {"profile": os.path.basename(profile_path), "pid": pid, "exporter": "pysample %s" % VERSION}
    doc.update(typed(meta))
    path = sidecar_path(profile_path)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
    return path


def read_sidecar(profile_path):
    """The quality figures beside a collapsed profile, or {}."""
    try:
        with open(sidecar_path(profile_path)) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return {}
    return {k: str(v) for k, v in doc.items() if k not in ("profile", "pid", "exporter")}

