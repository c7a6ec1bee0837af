#!/usr/bin/env python3
"""Tests of `pysample flamegraph`: the SVG's structure.

Run by Meson (test/tools/meson.build, suite 'tools'), one test case class per
Meson test, e.g.  python3 test_flamegraph.py FlamegraphTests -v
What they share is in helpers.py.
"""

import collections
import os
import re
import unittest
import xml.etree.ElementTree as ET

from helpers import (FG_NS, SVG_NS, TempDirTestCase, fixture, pysample, read_stacks, split_frame, unescape)

import pysample_tool  # noqa: E402  (the package under test; helpers put it on sys.path)


USABLE_WIDTH = 1180.0     # 1200 px image, 10 px on each side
CHAR_WIDTH = 12 * 0.59


# ---------------------------------------------------------------------------
# flamegraph
# ---------------------------------------------------------------------------

def expected_nodes(stacks):
    """{(depth, label): [counts]} of the flame graph of a fixture: one node for
    the root, one per thread, one per distinct frame per call path."""
    nodes = collections.Counter()
    total = 0
    for (thread, frames), count in stacks.items():
        total += count
        nodes[("thread", thread)] += count
        for i in range(1, len(frames) + 1):
            nodes[(thread,) + frames[:i]] += count
    result = collections.defaultdict(list)
    result[(0, "all")].append(total)
    for key, count in nodes.items():
        if key[0] == "thread":
            result[(1, unescape(key[1]))].append(count)
        else:
            name, filename, line = split_frame(key[-1])
            label = name if filename is None else "%s (%s:%d)" % (name, filename, line)
            result[(len(key), pysample_tool.printable(label))].append(count)
    for counts in result.values():
        counts.sort()
    return dict(result), total


class FlamegraphTests(TempDirTestCase):
    def render(self, path, *args):
        code, out, err = pysample("flamegraph", path, *args)
        self.assertEqual(code, 0, err)
        return out, ET.fromstring(out)

    def frames(self, root):
        group = root.find(SVG_NS + "g[@id='frames']")
        self.assertIsNotNone(group, "a <g id='frames'> holds the boxes")
        return group.findall(SVG_NS + "g")

    def test_valid_xml_with_one_group_per_frame(self):
        out, root = self.render(fixture("basic.txt"))
        self.assertEqual(root.tag, SVG_NS + "svg")
        self.assertTrue(out.startswith(b"<?xml"))
        expected, total = expected_nodes(read_stacks(fixture("basic.txt")))
        boxes = self.frames(root)
        self.assertEqual(len(boxes), sum(len(c) for c in expected.values()))
        for g in boxes:
            self.assertEqual(g.get("class"), "f")
            self.assertEqual(len(g.findall(SVG_NS + "rect")), 1)
            self.assertEqual(len(g.findall(SVG_NS + "title")), 1)
            self.assertEqual(len(g.findall(SVG_NS + "text")), 1)

    def boxes(self, root, total):
        """[(depth, label, samples, percent, x, y, width, fill, text, g)]"""
        result = []
        heights = sorted(set(float(g.find(SVG_NS + "rect").get("y")) for g in self.frames(root)), reverse=True)
        for g in self.frames(root):
            rect = g.find(SVG_NS + "rect")
            title = g.find(SVG_NS + "title").text
            label, stats = title.split("\n")[:2]
            m = re.match(r"^([\d,]+) samples? \((\d+\.\d\d)%\)", stats)
            self.assertIsNotNone(m, "title %r shows samples and a percentage" % title)
            y = float(rect.get("y"))
            result.append((heights.index(y), label, int(m.group(1).replace(",", "")), float(m.group(2)),
                           float(rect.get("x")), y, float(rect.get("width")), rect.get("fill"),
                           g.find(SVG_NS + "text").text or "", g))
        return result

    def test_asyncio_tasks_merge_by_coroutine(self):
        """Issue #35: a server's tasks, each named Task-N by asyncio, split
        the graph into one sliver per request.  By default they are one box
        per coroutine; a name the program gave stays; --task-names all
        keeps every name, none merges by coroutine only."""
        path = os.path.join(self.tmp, "tasks.txt")
        loop = "thread 7 (MainThread);run_forever (/a/base_events.py:607);Handle._run (/a/events.py:80)"
        with open(path, "w") as f:
            for i in range(2, 42):
                f.write('%s;[task Task-%d "handle"];handle (/srv/app.py:9);query (/srv/db.py:3) %d\n'
                        % (loop, i, i))
            f.write('%s;[task ticker "tick"];tick (/srv/app.py:20) 5\n' % loop)
            f.write('%s;[task Task-7 "Server.serve"];Server.serve (/srv/app.py:30) 3\n' % loop)

        def task_boxes(*args):
            out, root = self.render(path, *args)
            found = collections.Counter()
            for _, label, samples, _, _, _, _, _, _, _ in self.boxes(root, None):
                if label.startswith("[task "):
                    found[label] += samples
            return found

        want = sum(range(2, 42))
        self.assertEqual(task_boxes(), {'[task "handle"]': want, "[task ticker \"tick\"]": 5,
                                        '[task "Server.serve"]': 3})
        self.assertEqual(task_boxes("--task-names", "none"),
                         {'[task "handle"]': want, '[task "tick"]': 5, '[task "Server.serve"]': 3})
        every = task_boxes("--task-names", "all")
        self.assertEqual(len(every), 42)
        self.assertEqual(every['[task Task-41 "handle"]'], 41)

    def test_titles_name_file_line_samples_and_percent(self):
        _, root = self.render(fixture("basic.txt"))
        expected, total = expected_nodes(read_stacks(fixture("basic.txt")))
        found = collections.defaultdict(list)
        for depth, label, samples, pct, *_ in self.boxes(root, total):
            found[(depth, label)].append(samples)
            self.assertAlmostEqual(pct, 100.0 * samples / total, places=2)
        for counts in found.values():
            counts.sort()
        self.assertEqual(dict(found), expected)

    def test_widths_are_proportional_to_samples(self):
        _, root = self.render(fixture("basic.txt"))
        for depth, label, samples, pct, x, y, width, *_rest in self.boxes(root, 100):
            g = _rest[-1]
            self.assertAlmostEqual(width, USABLE_WIDTH * samples / 100, delta=0.01, msg=label)
            self.assertEqual(int(g.get(FG_NS + "w")), samples)
            self.assertAlmostEqual(x, 10 + USABLE_WIDTH * int(g.get(FG_NS + "x")) / 100, delta=0.01)

    def test_children_sit_on_their_parent(self):
        _, root = self.render(fixture("basic.txt"))
        boxes = self.boxes(root, 100)
        by_depth = collections.defaultdict(list)
        for box in boxes:
            by_depth[box[0]].append(box)
        for depth, label, samples, pct, x, y, width, *_ in boxes:
            if depth == 0:
                continue
            parents = [p for p in by_depth[depth - 1] if p[4] - 0.01 <= x and x + width <= p[4] + p[6] + 0.01]
            self.assertEqual(len(parents), 1, "%s has one parent below it" % label)
            self.assertAlmostEqual(parents[0][5] - y, 16, msg="one frame height above its parent")

    def test_labels_fit_their_boxes(self):
        _, root = self.render(fixture("basic.txt"))
        for depth, label, samples, pct, x, y, width, fill, text, g in self.boxes(root, 100):
            self.assertLessEqual(len(text) * CHAR_WIDTH, width - 6 + 1e-6, "%r fits %r" % (text, label))
            if text and not text.endswith(".."):
                self.assertIn(text.split(" (")[0], label)

    def test_colours_by_file_category(self):
        _, root = self.render(fixture("basic.txt"))
        fills = collections.defaultdict(set)
        for depth, label, samples, pct, x, y, width, fill, text, g in self.boxes(root, 100):
            fills[label].add(fill)
        rgb = lambda label: tuple(int(v) for v in re.findall(r"\d+", list(fills[label])[0]))
        self.assertEqual(fills["[pysample: truncated]"], {"rgb(170,170,170)"}, "markers are grey")
        self.assertEqual(fills["[pysample: stack table full]"], {"rgb(170,170,170)"})
        user = rgb("compute (/srv/app/work.py:5)")
        stdlib = rgb("JSONEncoder.encode (/usr/lib/python3.11/json/encoder.py:200)")
        frozen = rgb("<lambda> (<frozen importlib._bootstrap>:241)")
        site = rgb("fetch (/venv/lib/python3.11/site-packages/requests/api.py:59)")
        self.assertGreater(user[0], user[2], "user code is warm")
        self.assertGreater(stdlib[2], stdlib[0], "the standard library is blue")
        self.assertGreater(frozen[2], frozen[0], "frozen modules are standard library")
        self.assertGreater(site[1], max(site[0], site[2]), "site-packages are green")
        self.assertEqual(fills["compute (/srv/app/work.py:5)"], fills["compute (/srv/app/work.py:6)"],
                         "one function, one colour")

    def test_colours_are_stable_across_runs(self):
        first, _ = self.render(fixture("basic.txt"))
        second, _ = self.render(fixture("basic.txt"))
        self.assertEqual(re.findall(rb'fill="rgb[^"]*"', first), re.findall(rb'fill="rgb[^"]*"', second))

    def test_interactive_parts_are_present(self):
        out, root = self.render(fixture("basic.txt"))
        scripts = root.findall(SVG_NS + "script")
        self.assertEqual(len(scripts), 1)
        code = scripts[0].text
        for word in ("function zoom", "function search", "Matched: ", "mouseover", "keydown"):
            self.assertIn(word, code)
        ids = set(e.get("id") for e in root.iter() if e.get("id"))
        self.assertTrue({"title", "details", "matched", "search", "unzoom", "frames"} <= ids, ids)
        self.assertEqual(int(root.get(FG_NS + "total")), 100)

    def test_title_option_and_hostile_names_stay_valid_xml(self):
        out, root = self.render(fixture("escapes.txt"), "--title", "<&> ]]> profile")
        self.assertEqual(root.find(SVG_NS + "text[@id='title']").text, "<&> ]]> profile")
        titles = [g.find(SVG_NS + "title").text for g in self.frames(root)]
        self.assertTrue(any(t.startswith("ctl\\x01\\x7fx\\r (/srv/%app/c;d.py:1)") for t in titles), titles)
        self.assertTrue(any(t.startswith("lt<&>\"' ('quoted' <dir>/a&b.py:9)") for t in titles), titles)
        self.assertTrue(any(t.startswith("ünïcødé.函数 (/srv/ñ/файл.py:4)") for t in titles), titles)
        self.assertTrue(any(t.startswith("thread 1 (Main\\nThread)") for t in titles), titles)

    def test_output_file(self):
        out_path = os.path.join(self.tmp, "flame.svg")
        code, out, err = pysample("flamegraph", fixture("basic.txt"), "-o", out_path)
        self.assertEqual((code, out), (0, b""), err)
        ET.parse(out_path)

    def test_deep_stacks(self):
        depth = 3000
        frames = ";".join("level_%d (/srv/deep.py:%d)" % (i, i) for i in range(depth))
        path = self.write("deep.txt", "thread 1 (MainThread);%s 7\nthread 1 (MainThread);%s 3\n"
                          % (frames, frames.rsplit(";", 1)[0]))
        _, root = self.render(path)
        boxes = self.frames(root)
        self.assertEqual(len(boxes), depth + 2)
        self.assertGreaterEqual(int(root.get("height")), (depth + 2) * 16)

    def test_tiny_frames_are_left_out_and_said_so(self):
        lines = ["thread 1;big (/a.py:1) 100000"] + ["thread 1;tiny%d (/a.py:%d) 1" % (i, i) for i in range(5)]
        path = self.write("tiny.txt", "\n".join(lines) + "\n")
        _, root = self.render(path)
        self.assertEqual(len(self.frames(root)), 3)
        self.assertIn("5 frames narrower", root.find(SVG_NS + "text[@id='subtitle']").text)
        _, root = self.render(path, "--minwidth", "0")
        self.assertEqual(len(self.frames(root)), 8)


if __name__ == "__main__":
    unittest.main()
