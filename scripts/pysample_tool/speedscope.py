# speedscope.py - a collapsed profile as speedscope JSON
# (https://www.speedscope.app/file-format-schema.json): one sampled profile
# per thread, frames shared.
#
# SPDX-License-Identifier: MIT

import collections
import os

from .common import VERSION
from .quality import typed

SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"


class FrameTable(object):
    """speedscope's shared frame list: each distinct frame once, by index."""

    def __init__(self):
        self.frames = []
        self._index = {}

    def index_of(self, frame):
        i = self._index.get(frame)
        if i is None:
            i = self._index[frame] = len(self.frames)
            entry = {"name": frame.name}
            if frame.file is not None:
                entry["file"] = frame.file
            if frame.line is not None:
                entry["line"] = frame.line
            self.frames.append(entry)
        return i

    def add_marker(self, name):
        """A frame of ours (a marker) that no profile line names."""
        self.frames.append({"name": name})
        return len(self.frames) - 1


def to_speedscope(profile, rate=None, quality=None):
    table = FrameTable()
    frames, index_of = table.frames, table.index_of

    per_thread = collections.OrderedDict()
    for thread, _ in profile.threads():
        per_thread[thread] = ([], [])
    for thread, stack, count in profile.stacks:
        samples, weights = per_thread[thread]
        samples.append([index_of(f) for f in stack])
        weights.append(count)

    if rate:
        unit, factor = "milliseconds", 1000.0 / rate
    else:
        unit, factor = "none", 1
    profiles = []
    for thread, (samples, weights) in per_thread.items():
        if factor != 1:
            weights = [round(wt * factor, 6) for wt in weights]
        profiles.append({
            "type": "sampled",
            "name": thread.label,
            "unit": unit,
            "startValue": 0,
            "endValue": sum(weights),
            "samples": samples,
            "weights": weights,
        })
    busiest = max(range(len(profiles)), key=lambda i: profiles[i]["endValue"])
    return {
        "$schema": SPEEDSCOPE_SCHEMA,
        "shared": {"frames": frames},
        "profiles": profiles,
        "name": os.path.basename(profile.path),
        "activeProfileIndex": busiest,
        "exporter": "pysample %s" % VERSION + _summary(quality),
        # speedscope keeps no free-form metadata; it ignores keys it does
        # not know, so the figures ride here for whoever reads the file.
        "pysample": typed(quality or {}),
    }


def _summary(quality):
    if not quality or not quality.get("requested_rate_hz"):
        return ""
    return " (%s of %s Hz, %s samples)" % (quality.get("achieved_rate_hz", "?"),
                                           quality["requested_rate_hz"], quality.get("samples", "?"))
