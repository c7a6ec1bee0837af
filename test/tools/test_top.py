#!/usr/bin/env python3
"""Tests of `pysample top`: the table, native frames without a symbol grouped
per object.

Run by Meson (test/tools/meson.build, suite 'tools'), one test case class per
Meson test, e.g.  python3 test_top.py TopTests -v
What they share is in helpers.py.
"""

import os
import re
import shutil
import subprocess
import sys
import unittest

from helpers import (BUILD_ROOT, FRONT_END, PYTHON, SOURCE_ROOT, TOP_ROW, TempDirTestCase, clean_env,
                     fixture, pysample, real_library, run, top_rows)


class NativeGroupingTests(TempDirTestCase):
    """Native frames that no symbol covers: one per object, not per address."""

    def test_native_addresses_are_one_row_per_object(self):
        """`lib.so+0x...` frames (no symbol covers them) are one row per
        object, `[lib.so]`, unless --addresses."""
        path = os.path.join(self.tmp, "stripped.txt")
        with open(path, "w") as f:
            for i, off in enumerate((0x2e2cb0, 0x2e2cc6, 0x2e2d01, 0x1000)):
                f.write("thread 1 (MainThread);f (a.py:1);PyCFunction_Call (python3);"
                        "_umath.so+0x%x;_umath.so+0x%x %d\n" % (off, off + 0x40, i + 1))
            f.write("thread 1 (MainThread);f (a.py:1);[unknown]+0x7f0012345678 5\n")
        code, out, err = pysample("top", path, "-n", "0")
        self.assertEqual(code, 0, err)
        rows = self.table(out)
        self.assertEqual(rows["[_umath.so]"], (10, 10), "a run of one object's addresses is one frame")
        self.assertEqual(rows["[unknown]"], (5, 5))
        self.assertFalse([name for name in rows if "+0x" in name], rows)
        code, out, err = pysample("top", path, "-n", "0", "--addresses")
        rows = self.table(out)
        self.assertEqual(rows["_umath.so+0x2e2cf0"], (1, 1))
        self.assertEqual(len([name for name in rows if "_umath.so+0x" in name]), 8)
        code, out, err = pysample("flamegraph", path)
        self.assertEqual(code, 0, err)
        self.assertIn(b">[_umath.so]<", out)
        self.assertNotIn(b"0x2e2cb0", out)

    STRIPPED_C = """
static double hidden_spin(long n);
double exported_entry(long n) { return hidden_spin(n) + 1.0; }
/* static, and stripped of .symtab: no symbol covers it */
static __attribute__((noinline)) double hidden_spin(long n)
{
    volatile double x = 0;
    for (long i = 0; i < n; i++)
        x += (double)i * 0.5;
    return x;
}
"""
    STRIPPED_PY = """
import ctypes, sys
sys.path.insert(0, sys.argv[2])
import sampled
lib = ctypes.CDLL(sys.argv[1])
lib.exported_entry.restype = ctypes.c_double
until = sampled.Until(seconds=0.2, ticks=30)
while until.more():
    lib.exported_entry(200000)
"""

    def tools(self, *names):
        import platform
        library = real_library(os.path.join(BUILD_ROOT, "lib")) if BUILD_ROOT else None
        found = [shutil.which(n) for n in names]
        if not library or not all(found):
            self.skipTest("needs the real library and %s" % ", ".join(names))
        if not sys.platform.startswith("linux") or platform.machine() != "x86_64":
            self.skipTest("native stacks are x86-64 Linux only")
        return [library] + found

    def build(self, cc, source_text, name, *flags):
        source, so = os.path.join(self.tmp, name + ".c"), os.path.join(self.tmp, name)
        with open(source, "w") as f:
            f.write(source_text)
        code, out, err = run([cc, "-O1", "-shared", "-fPIC"] + list(flags) + ["-o", so, source])
        self.assertEqual(code, 0, err)
        return so

    def record_native(self, library, so):
        program = os.path.join(self.tmp, "stripped.py")
        with open(program, "w") as f:
            f.write(self.STRIPPED_PY)
        code, out, err = pysample("record", "-o", "prof.txt", "--native", "--", PYTHON, program, so,
                                  os.path.join(SOURCE_ROOT, "test", "integration", "programs"),
                                  cwd=self.tmp, env=clean_env(PYSAMPLE_LIB=library))
        self.assertEqual(code, 0, err)
        return err

    def test_record_native_groups_a_stripped_library(self):
        """record --native of a stripped object's static function: its
        addresses are one row, [libstripped.so], in record's summary and
        in top; the collapsed file keeps them."""
        library, cc, strip = self.tools("gcc", "strip")
        so = self.build(cc, self.STRIPPED_C, "libstripped.so")
        code, out, err = run([strip, "--strip-all", so])
        self.assertEqual(code, 0, err)
        err = self.record_native(library, so)
        self.assertNotIn("libstripped.so+0x", err, "record's summary groups them")
        summary = self.table(err.split("top functions by self samples:\n")[1].encode())
        code, out, err = pysample("top", os.path.join(self.tmp, "prof.txt"), "-n", "0")
        grouped = self.table(out)
        code, out, err = pysample("top", os.path.join(self.tmp, "prof.txt"), "-n", "0", "--addresses")
        apart = self.table(out)
        addresses = [row for name, row in apart.items() if name.startswith("libstripped.so+0x")]
        self.assertTrue(addresses, "the file keeps the addresses: %r" % apart)
        self.assertEqual(grouped["[libstripped.so]"][0], sum(s for s, _ in addresses))
        self.assertEqual(summary["[libstripped.so]"], grouped["[libstripped.so]"])
        self.assertFalse([name for name in grouped if "+0x" in name], grouped)

    # hidden_spin after an exported function (-fno-toplevel-reorder keeps
    # the source's order).
    PRECEDED_C = """
double first_exported(long n) { return (double)n; }
static __attribute__((noinline)) double hidden_spin(long n)
{
    volatile double x = 0;
    for (long i = 0; i < n; i++)
        x += (double)i * 0.5;
    return x;
}
double exported_entry(long n) { return hidden_spin(n) + 1.0; }
"""

    def test_record_names_them_by_the_preceding_symbol_or_minidebuginfo(self):
        """Where record can read the object while the program runs: with
        MiniDebugInfo (.gnu_debugdata, xz-compressed symbols of the static
        functions), the static function's own name; with a .symtab that
        lacks it, `first_exported+... (lib)`; with .dynsym alone, whose
        preceding symbol would name the wrong function, [lib]."""
        import lzma
        library, cc, strip, objcopy = self.tools("gcc", "strip", "objcopy")
        full = self.build(cc, self.PRECEDED_C, "libfull.so", "-fno-toplevel-reorder")
        preceded = os.path.join(self.tmp, "libpreceded.so")
        dynsym_only = os.path.join(self.tmp, "libdynsym.so")
        mini = os.path.join(self.tmp, "mini.debug")
        for command in ([strip, "--strip-symbol=hidden_spin", "-o", preceded, full],
                        [strip, "--strip-all", "-o", dynsym_only, full],
                        [objcopy, "--strip-all", "--keep-symbol=hidden_spin", full, mini]):
            code, out, err = run(command)
            self.assertEqual(code, 0, err)
        with open(mini, "rb") as f, open(mini + ".xz", "wb") as xz:
            xz.write(lzma.compress(f.read(), format=lzma.FORMAT_XZ))
        with_mdi = os.path.join(self.tmp, "libmdi.so")
        code, out, err = run([objcopy, "--add-section", ".gnu_debugdata=%s.xz" % mini, dynsym_only, with_mdi])
        self.assertEqual(code, 0, err)
        for so, want in ((preceded, "first_exported+... (libpreceded.so)"), (with_mdi, "hidden_spin (libmdi.so)"),
                         (dynsym_only, "[libdynsym.so]")):
            with self.subTest(object=os.path.basename(so)):
                err = self.record_native(library, so)
                summary = self.table(err.split("top functions by self samples:\n")[1].encode())
                self.assertIn(want, summary)
                # (exported_entry, hidden_spin's caller, the library names itself)
                self.assertEqual([name for name in summary if ("libdynsym.so" in name or "libmdi.so" in name
                                                               or "libpreceded.so" in name)
                                  and not name.startswith("exported_entry (")], [want], summary)
                with open(os.path.join(self.tmp, "prof.txt")) as f:
                    self.assertIn(os.path.basename(so) + "+0x", f.read(), "the file keeps the addresses")

    @staticmethod
    def table(out):
        """{function: (self, total)} of a top table."""
        rows = {}
        for line in out.decode().splitlines():
            m = re.match(r"^\s*(\d+)\s+\S+%\s+(\d+)\s+\S+%\s+(.*)$", line)
            if m:
                rows[m.group(3)] = (int(m.group(1)), int(m.group(2)))
        return rows


class TopTests(unittest.TestCase):
    def top(self, *args):
        code, out, err = pysample("top", *args)
        self.assertEqual(code, 0, err)
        return out.decode("utf-8")

    def test_self_and_total_of_each_function(self):
        rows = top_rows(self.top(fixture("basic.txt"), "-n", "0"))
        self.assertEqual(rows["compute (/srv/app/work.py)"], (50, 50.0, 50, 50.0),
                         "the lines of a function are added up")
        self.assertEqual(rows["JSONEncoder.encode (/usr/lib/python3.11/json/encoder.py)"], (15, 15.0, 15, 15.0))
        self.assertEqual(rows["fib (/srv/app/work.py)"], (10, 10.0, 10, 10.0),
                         "recursion counts once in the total")
        self.assertEqual(rows["main (/srv/app/main.py)"], (0, 0.0, 75, 75.0))
        self.assertEqual(rows["[pysample: stack table full]"], (4, 4.0, 4, 4.0))
        self.assertEqual(rows["[pysample: truncated]"], (0, 0.0, 3, 3.0))
        self.assertEqual(rows["weird%name;x (/tmp/dir with space/odd\\nfile (1).py)"], (5, 5.0, 5, 5.0),
                         "names are unescaped, control characters shown as \\n")
        self.assertEqual(sum(r[0] for r in rows.values()), 100, "self samples add up to the total")

    def test_sorted_by_self_samples(self):
        rows = [TOP_ROW.match(line) for line in self.top(fixture("basic.txt"), "-n", "0").splitlines()]
        selfs = [int(m.group(1)) for m in rows if m]
        self.assertEqual(selfs, sorted(selfs, reverse=True))
        self.assertGreater(len(selfs), 10)

    def test_header_and_limit(self):
        text = self.top(fixture("basic.txt"), "-n", "3")
        self.assertIn("100 samples in 3 threads", text.splitlines()[0])
        self.assertEqual(len(top_rows(text)), 3)
        self.assertRegex(text, r"\.\.\. \d+ more functions")

    def test_lines_off_profile(self):
        text = self.top(fixture("nolines.txt"))
        self.assertIn("line numbers off", text)
        rows = top_rows(text)
        self.assertEqual(rows["compute (/srv/app/work.py)"], (30, 50.0, 30, 50.0))
        self.assertEqual(rows["Thread._bootstrap (<frozen threading>)"], (0, 0.0, 20, 33.3))

    def test_output_into_a_closed_pipe_is_not_an_error(self):
        proc = subprocess.Popen([FRONT_END, "top", fixture("basic.txt"), "-n", "0"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=clean_env())
        proc.stdout.close()
        err = proc.stderr.read().decode()
        self.assertEqual(proc.wait(timeout=60), 0)
        self.assertNotIn("Traceback", err)


if __name__ == "__main__":
    unittest.main()
