#!/usr/bin/env python3
"""Tests of `pysample lines`: the samples per source line of a recorded profile.

Run by Meson (test/tools/meson.build, suite 'tools'), one test case class per
Meson test, e.g.  python3 test_lines.py LinesTests -v
What they share is in helpers.py.
"""

import re
import unittest

from helpers import (DIFF_HEAD, RecordedPairTestCase, fixture, pysample, read_stacks, split_frame)


class LinesTests(RecordedPairTestCase):
    def lines(self, *args):
        code, out, err = pysample("lines", *args, cwd=self.dir)
        return code, out.decode(), err

    def test_samples_per_line_of_a_recorded_profile(self):
        code, out, err = self.lines(self.head, "prog.py")
        self.assertEqual(code, 0, err)
        stacks = read_stacks(self.head)
        total = sum(stacks.values())
        rows = {}
        for text in out.splitlines()[2:]:
            m = re.match(r"^ {0,6}(\d+)? +(?:(\d+\.\d)%)? +(\d+)? +(?:(\d+\.\d)%)? +(\d+)  (.*)$", text)
            self.assertIsNotNone(m, text)
            rows[int(m.group(5))] = (m.group(1), m.group(3), m.group(6))
        source = DIFF_HEAD.splitlines()
        self.assertEqual(sorted(rows), list(range(1, len(source) + 1)), "every line of the file, in order")
        for number, (own, on, text) in rows.items():
            self.assertEqual(text, source[number - 1])
            here = (self.program, number)
            expect_self = sum(n for (_, fr), n in stacks.items() if split_frame(fr[-1])[1:] == here)
            expect_total = sum(n for (_, fr), n in stacks.items() if any(split_frame(f)[1:] == here for f in fr))
            if expect_total:
                self.assertEqual((int(own), int(on)), (expect_self, expect_total), "line %d" % number)
            else:
                self.assertEqual((own, on), (None, None), "line %d has no samples" % number)
        # The slow call's line has three times the fast one's samples
        # (start-up, whose length a loaded machine stretches, has neither).
        slow = source.index("    spin_until_sampled(180)") + 1
        fast = source.index("    spin_until_sampled(60)") + 1
        self.assertGreater(int(rows[slow][1]), 2.5 * int(rows[fast][1]), out)
        self.assertGreater(int(rows[fast][1]), 30, out)
        self.assertLessEqual(int(rows[slow][1]), total, out)

    def test_sampled_only_and_a_path_that_ends_with_the_frames_file(self):
        code, out, err = self.lines(self.head, self.program, "--sampled")
        self.assertEqual(code, 0, err)
        numbers = [int(l.split()[4]) for l in out.splitlines()[2:]]
        self.assertTrue(numbers and numbers == sorted(numbers), out)
        for text in out.splitlines()[2:]:
            self.assertRegex(text, r"^ *\d+ +\d+\.\d% +\d+ +\d+\.\d% ")

    def test_without_the_source_the_sampled_lines_are_listed(self):
        path = self.write("p.txt", "thread 1;main (/gone/app.py:3);f (/gone/app.py:7) 3\nthread 1;main (/gone/app.py:4) 1\n")
        code, out, err = pysample("lines", path, "app.py")
        self.assertEqual(code, 0, err)
        lines = out.decode().splitlines()
        self.assertIn("source not found", lines[1])
        self.assertEqual([l.split() for l in lines[3:]],
                         [["0", "0.0%", "3", "75.0%", "3"], ["1", "25.0%", "1", "25.0%", "4"],
                          ["3", "75.0%", "3", "75.0%", "7"]])

    def test_bad_input_is_one_line(self):
        two = self.write("two.txt", "thread 1;f (/x/app.py:1) 1\nthread 1;g (/y/app.py:1) 1\n")
        for args, words in (((self.head, "nothere.py"), ("nothere.py", "no samples", "prog.py")),
                            ((two, "app.py"), ("matches 2 files", "/x/app.py", "/y/app.py")),
                            ((fixture("nolines.txt"), "main.py"), ("no line numbers",)),
                            (("missing.txt", "prog.py"), ("missing.txt", "No such file")),
                            ((fixture("empty.txt"), "prog.py"), ("empty profile",))):
            with self.subTest(args=args):
                code, out, err = self.lines(*args)
                self.assertEqual((code, out), (2, ""), err)
                self.assertEqual(len(err.splitlines()), 1, err)
                self.assertTrue(err.startswith("pysample: "), err)
                for word in words:
                    self.assertIn(word, err)


if __name__ == "__main__":
    unittest.main()
