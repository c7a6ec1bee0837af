#!/usr/bin/env python3
"""Tests of `pysample convert`: speedscope (and speedscope's own importer) and
pprof.

Run by Meson (test/tools/meson.build, suite 'tools'), one test case class per
Meson test, e.g.  python3 test_convert.py SpeedscopeTests -v
What they share is in helpers.py.
"""

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from helpers import (PYTHON, SOURCE_ROOT, TempDirTestCase, built_library, clean_env, decode_pprof, fixture,
                     one, pysample, read_stacks, run, split_frame, unescape)

import pysample_tool  # noqa: E402  (the package under test; helpers put it on sys.path)


# `go tool pprof` is compiled into the Go build cache on its first use (41 s
# of CPU with Go 1.26): one cache for every run, kept outside the repository
# (.ci/run fills it in the background), not a new one per test's HOME.
GOCACHE = os.environ.get("PYSAMPLE_GOCACHE") or os.path.join(
    os.path.expanduser("~"), ".cache", "pysample", "go-build")


def go_env(home):
    """The environment of a `go tool pprof` run with HOME at home."""
    return clean_env(HOME=home, GOCACHE=GOCACHE)


# ---------------------------------------------------------------------------
# convert --to speedscope
# ---------------------------------------------------------------------------

class SpeedscopeTests(TempDirTestCase):
    UNITS = {"none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"}

    def convert(self, path, *args):
        code, out, err = pysample("convert", path, "--to", "speedscope", *args)
        self.assertEqual(code, 0, err)
        return json.loads(out.decode("utf-8"))

    TIMELINE = ("# pysample timeline 1\nrate_hz 100\nstart_unix_ns 1700000000000000000\nend_us 60000\n"
                "samples 5\nmax_records 5\ndropped_records 2\ndropped_samples 2\nfirst_dropped_us 40000\n"
                "stacks 3\n"
                "thread 1 (MainThread);main (p.py:1);a (p.py:5) 3\n"
                "thread 1 (MainThread);main (p.py:2);b (p.py:9) 2\n"
                "thread 2 (worker);w (p.py:20) 2\n"
                "records 5\n0 2 1\n5000 0 1\n15000 0 1\n25000 1 1\n30000 2 1\n")

    def test_timeline_in_time_order(self):
        """A .timeline converts to one sampled profile per thread in time
        order: each sample lasts to the thread's next (at most twice
        1/rate; a longer gap, or the time before the first, is an empty
        sample), and the samples past the bound are one marker to the end."""
        path = self.write("prof.txt.timeline", self.TIMELINE)
        doc = self.convert(path)
        self.check_schema(doc)
        names = [f["name"] for f in doc["shared"]["frames"]]
        main, worker = doc["profiles"]
        self.assertEqual((main["name"], worker["name"]), ("thread 1 (MainThread)", "thread 2 (worker)"))
        self.assertEqual(main["unit"], "microseconds")

        def leaves(p):
            return [names[s[-1]] if s else "" for s in p["samples"]]
        self.assertEqual(leaves(main), ["", "a", "a", "b", "[pysample: timeline full]"])
        self.assertEqual(main["weights"], [5000, 10000, 10000, 15000, 20000])
        # 0 -> 30000 is more than twice 10 ms: 10 ms of w, then nothing.
        self.assertEqual(leaves(worker), ["w", "", "w", "[pysample: timeline full]"])
        self.assertEqual(worker["weights"], [10000, 20000, 10000, 20000])
        self.assertEqual((main["endValue"], worker["endValue"]), (60000, 60000))
        self.assertIn("timeline full: 2 samples after 0.040 s", doc["exporter"])
        self.assertEqual(doc["pysample"]["timeline"]["dropped_samples"], 2)

    def test_timeline_damaged(self):
        """A cut timeline is refused with the line that is wrong."""
        path = self.write("cut.timeline", self.TIMELINE[:-20])   # the last two records
        code, out, err = pysample("convert", path, "--to", "speedscope")
        self.assertEqual(code, 2)
        self.assertRegex(err.decode() if isinstance(err, bytes) else err,
                         r"cut\.timeline:18: not a pysample timeline: 5 records announced, 3 there")

    def check_schema(self, doc):
        """The required fields of https://www.speedscope.app/file-format-schema.json."""
        self.assertEqual(doc["$schema"], "https://www.speedscope.app/file-format-schema.json")
        self.assertIsInstance(doc["shared"]["frames"], list)
        for frame in doc["shared"]["frames"]:
            self.assertIsInstance(frame["name"], str)
            self.assertLessEqual(set(frame), {"name", "file", "line", "col"})
            if "file" in frame:
                self.assertIsInstance(frame["file"], str)
            if "line" in frame:
                self.assertIsInstance(frame["line"], int)
        self.assertIsInstance(doc["profiles"], list)
        self.assertTrue(doc["profiles"])
        nframes = len(doc["shared"]["frames"])
        for profile in doc["profiles"]:
            self.assertEqual(profile["type"], "sampled")
            self.assertIsInstance(profile["name"], str)
            self.assertIn(profile["unit"], self.UNITS)
            self.assertEqual(len(profile["samples"]), len(profile["weights"]))
            for stack in profile["samples"]:
                for index in stack:
                    self.assertTrue(0 <= index < nframes)
            self.assertEqual(profile["startValue"], 0)
            self.assertAlmostEqual(profile["endValue"], sum(profile["weights"]))
        self.assertIsInstance(doc["exporter"], str)
        self.assertIsInstance(doc["name"], str)
        self.assertTrue(0 <= doc["activeProfileIndex"] < len(doc["profiles"]))

    def test_schema_and_total_weight(self):
        doc = self.convert(fixture("basic.txt"))
        self.check_schema(doc)
        self.assertEqual(sum(sum(p["weights"]) for p in doc["profiles"]), 100)
        self.assertEqual({p["unit"] for p in doc["profiles"]}, {"none"})

    def test_one_profile_per_thread_with_its_stacks(self):
        doc = self.convert(fixture("basic.txt"))
        frames = doc["shared"]["frames"]
        got = collections.Counter()
        for profile in doc["profiles"]:
            for stack, weight in zip(profile["samples"], profile["weights"]):
                got[(profile["name"], tuple((frames[i]["name"], frames[i].get("file"), frames[i].get("line"))
                                            for i in stack))] += weight
        want = collections.Counter()
        for (thread, stack), count in read_stacks(fixture("basic.txt")).items():
            want[(unescape(thread), tuple(split_frame(f) for f in stack))] += count
        self.assertEqual(got, want)
        self.assertEqual([p["name"] for p in doc["profiles"]],
                         ["thread 100 (MainThread)", "thread 101 (worker;pool-1)", "thread 102"])
        self.assertEqual(doc["activeProfileIndex"], 0, "the busiest thread is shown first")
        names = [(f["name"], f.get("file"), f.get("line")) for f in frames]
        self.assertEqual(len(names), len(set(names)), "frames are shared, not repeated")

    def test_lines_off_frames_have_no_line(self):
        doc = self.convert(fixture("nolines.txt"))
        self.check_schema(doc)
        self.assertFalse(any("line" in f for f in doc["shared"]["frames"]))

    def test_rate_gives_milliseconds(self):
        doc = self.convert(fixture("basic.txt"), "--rate", "200")
        self.check_schema(doc)
        self.assertEqual({p["unit"] for p in doc["profiles"]}, {"milliseconds"})
        self.assertAlmostEqual(sum(sum(p["weights"]) for p in doc["profiles"]), 500.0)

    def test_output_file_and_unicode(self):
        out_path = os.path.join(self.tmp, "p.json")
        code, out, err = pysample("convert", fixture("escapes.txt"), "--to", "speedscope", "-o", out_path)
        self.assertEqual((code, out), (0, b""), err)
        with open(out_path, encoding="utf-8") as f:
            doc = json.load(f)
        self.check_schema(doc)
        self.assertIn("ünïcødé.函数", [f["name"] for f in doc["shared"]["frames"]])
        self.assertIn("ctl\x01\x7fx\r", [f["name"] for f in doc["shared"]["frames"]])


# ---------------------------------------------------------------------------
# convert --to speedscope, read by speedscope itself (npm package, headless
# chromium).  Skipped, with the reason, when chromium, npm or the package is
# not available (CI: .ci/run installs chromium).
# ---------------------------------------------------------------------------

SPEEDSCOPE_CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                "pysample", "npm")


def speedscope_release():
    """(speedscope's dist/release directory, None) or (None, why not).  The
    npm package is fetched once with `npm pack` into SPEEDSCOPE_CACHE,
    outside the repository, and reused."""
    if os.path.isdir(SPEEDSCOPE_CACHE):
        for name in sorted(os.listdir(SPEEDSCOPE_CACHE), reverse=True):
            release = os.path.join(SPEEDSCOPE_CACHE, name, "package", "dist", "release")
            if name.startswith("speedscope-") and os.path.isfile(os.path.join(release, "index.html")):
                return release, None
    npm = shutil.which("npm")
    if not npm:
        return None, "npm is not installed and %s has no speedscope package" % SPEEDSCOPE_CACHE
    os.makedirs(SPEEDSCOPE_CACHE, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".fetch-", dir=SPEEDSCOPE_CACHE)
    try:
        try:
            code, out, err = run([npm, "pack", "--silent", "speedscope"], cwd=work, timeout=90,
                                 env=clean_env(npm_config_update_notifier="false", npm_config_fund="false"))
        except subprocess.TimeoutExpired:
            return None, "`npm pack speedscope` timed out"
        tarballs = [n for n in os.listdir(work) if n.startswith("speedscope-") and n.endswith(".tgz")]
        if code != 0 or len(tarballs) != 1:
            return None, "`npm pack speedscope` failed: %s" % (err.strip().splitlines() or ["?"])[-1]
        import tarfile
        with tarfile.open(os.path.join(work, tarballs[0])) as tar:
            for member in tar.getmembers():
                if not member.name.startswith("package/") or ".." in member.name.split("/") \
                        or not (member.isfile() or member.isdir()):
                    return None, "unexpected member %r in %s" % (member.name, tarballs[0])
            tar.extractall(work)
        os.remove(os.path.join(work, tarballs[0]))
        final = os.path.join(SPEEDSCOPE_CACHE, tarballs[0][:-len(".tgz")])
        try:
            os.rename(work, final)   # atomic: a concurrent fetch may have won, which is fine
        except OSError:
            pass
    finally:
        shutil.rmtree(work, True)
    release = os.path.join(final, "package", "dist", "release")
    if not os.path.isfile(os.path.join(release, "index.html")):
        return None, "the speedscope package has no dist/release/index.html"
    return release, None


# Says its pid, then is busy in one function until 0.4 s of wall time
# has passed: samples whatever the machine's load.
# 0.4 s of its own CPU time, not of the wall clock: at load ~19 a 0.4 s
# wall-clock spin was sampled so little that `record` had no samples to
# convert (and so no file); the sampler ticks on the wall clock, which a
# loaded machine stretches along with the CPU-time spin.
SPEEDSCOPE_SPINNER = (
    "import os, time\n"
    "print(os.getpid())\n"
    "def speedscope_spin(end):\n"
    "    while time.process_time() < end:\n"
    "        sum(i * i for i in range(1000))\n"
    "speedscope_spin(time.process_time() + 0.4)\n"
)


class SpeedscopeImporterTests(TempDirTestCase):
    """Our speedscope files as speedscope's own importer reads them: the
    release page loaded in headless chromium from a local HTTP server (same
    origin, so no CORS), #profileURL= naming the file, and the DOM dumped
    after the import.  speedscope titles the page "<profile name> -
    speedscope" and lists each profile with its total weight when the
    import succeeds, and shows "Something went wrong" when it fails."""

    FAILED = "Something went wrong"

    def setUp(self):
        super().setUp()
        self.chromium = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))
                              if p), None)
        if not self.chromium:
            self.skipTest("chromium is not installed (CI: .ci/run installs it): speedscope import check skipped")
        release, why = speedscope_release()
        if not release:
            self.skipTest("speedscope npm package unavailable: %s" % why)
        self.root = os.path.join(self.tmp, "www")
        shutil.copytree(release, self.root)
        # speedscope reports some failures (a file of no known format) with
        # alert(), which blocks a headless browser until it is killed; the
        # served copy of its page records the message on <html> instead.
        # Nothing else of the page or its importer is changed.
        index = os.path.join(self.root, "index.html")
        with open(index, encoding="utf-8") as f:
            page = f.read()
        self.assertIn("<head>", page)
        page = page.replace("<head>", "<head><script>window.alert = function (m) {"
                            " document.documentElement.setAttribute('data-alert', String(m)); };</script>", 1)
        with open(index, "w", encoding="utf-8") as f:
            f.write(page)
        import functools
        import http.server
        import threading

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(Quiet, directory=self.root))
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(self.server.server_close)
        self.addCleanup(self.server.shutdown)

    def open_in_speedscope(self, doc_bytes, name="profile.speedscope.json"):
        """(page title, page text) once speedscope has imported the file."""
        with open(os.path.join(self.root, name), "wb") as f:
            f.write(doc_bytes)
        base = "http://127.0.0.1:%d/" % self.server.server_address[1]
        profile = tempfile.mkdtemp(prefix="chromium-", dir=self.tmp)
        # The virtual time budget lets the page's fetch and import finish
        # before the DOM is dumped, however slow the machine; the real
        # timeout only stops a hung browser.
        args = [self.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--user-data-dir=" + profile, "--virtual-time-budget=10000",
                "--dump-dom", base + "index.html#profileURL=" + base + name]
        try:
            code, out, err = run(args, env=clean_env(HOME=self.tmp), timeout=60)
        except subprocess.TimeoutExpired:
            self.fail("chromium did not finish with speedscope's page in 60 s")
        self.assertEqual(code, 0, err[-2000:])
        dom = out.decode("utf-8", "replace")
        self.assertIn("<body", dom, "chromium dumped no page: " + err[-2000:])
        title = re.search(r"<title>(.*?)</title>", dom, re.S)
        alert = re.search(r'data-alert="([^"]*)"', dom)
        text = re.sub(r"\s+", " ", re.sub(r"<[^>]*>", " ", dom))
        if alert:
            text = "alert: %s; %s" % (alert.group(1), text)
        return (title.group(1) if title else ""), text

    def convert_quality_fixture(self):
        path = os.path.join(self.tmp, "quality.txt")
        shutil.copy(fixture("quality.txt"), path)
        shutil.copy(fixture("quality.txt.quality.json"), path + ".quality.json")
        code, out, err = pysample("convert", path, "--to", "speedscope")
        self.assertEqual(code, 0, err)
        return out

    def test_speedscope_imports_profile_with_quality(self):
        out = self.convert_quality_fixture()
        doc = json.loads(out.decode("utf-8"))
        # What the converter wrote: the figures of the sidecar, typed, and
        # the summary in the exporter; the sidecar's rate gives milliseconds.
        with open(fixture("quality.txt.quality.json")) as f:
            sidecar = json.load(f)
        del sidecar["pid"]
        self.assertEqual(doc["pysample"], sidecar)
        self.assertRegex(doc["exporter"], r"^pysample \S+ \(98\.7 of 100 Hz, 99 samples\)$")
        self.assertEqual(doc["name"], "quality.txt")
        title, text = self.open_in_speedscope(out)
        self.assertNotIn(self.FAILED, text)
        self.assertNotIn("alert:", text)
        self.assertEqual(title, "quality.txt - speedscope", text[:500])
        # The profile picker: each thread, with its total weight in the
        # unit the file gives (97 and 2 samples at 100 Hz).
        self.assertRegex(text, r"thread 27467 \(MainThread\) 970(\.0+)?ms")
        self.assertRegex(text, r"thread 27470 \(flusher\) 20(\.0+)?ms")

    def test_speedscope_imports_a_recorded_profile(self):
        """record --format speedscope with the real library: its quality
        figures in the file, and the file imported."""
        library = built_library()
        script = self.write("spinner.py", SPEEDSCOPE_SPINNER)
        code, out, err = pysample("record", "--format", "speedscope", "--rate", "100",
                                  "-o", os.path.join(self.root, "rec.json"), "--", PYTHON, script,
                                  cwd=self.tmp, env=clean_env(PYSAMPLE_LIB=library))
        self.assertEqual(code, 0, err)
        pid = int(out)
        self.assertTrue(os.path.exists(os.path.join(self.root, "rec.json")), err)
        with open(os.path.join(self.root, "rec.json"), "rb") as f:
            data = f.read()
        doc = json.loads(data.decode("utf-8"))
        quality = doc["pysample"]
        self.assertEqual((quality["requested_rate_hz"], quality["how"]), (100, "PYSAMPLE_OUTPUT"), quality)
        self.assertRegex(quality["python"], r"^%d\.%d" % sys.version_info[:2])
        # At 100 Hz each sample weighs 10 ms; the figures count every sample.
        total = sum(sum(p["weights"]) for p in doc["profiles"])
        self.assertAlmostEqual(total, quality["samples"] * 10.0, delta=0.01)
        self.assertGreater(quality["samples"], 0)
        self.assertIn("(%s of 100 Hz, %d samples)" % (quality["achieved_rate_hz"], quality["samples"]),
                      doc["exporter"])
        self.assertIn("speedscope_spin", [f["name"] for f in doc["shared"]["frames"]])
        title, text = self.open_in_speedscope(data, "rec.json")
        self.assertNotIn(self.FAILED, text)
        self.assertNotIn("alert:", text)
        self.assertEqual(title, "rec.json - speedscope", text[:500])
        self.assertIn("thread %d (MainThread)" % pid, text)

    def test_speedscope_imports_a_recorded_timeline(self):
        """record --timeline --format speedscope with the real library, of
        a program that runs phase_a, phase_b, phase_a (each for 30 sampler
        ticks): the main thread's samples in that order, each weighing the
        time to the next, and the file imported by speedscope."""
        library = built_library()
        program = os.path.join(SOURCE_ROOT, "test", "integration", "programs", "phases.py")
        out_path = os.path.join(self.root, "tl.json")
        code, out, err = pysample("record", "--timeline", "--format", "speedscope", "--rate", "200",
                                  "-o", out_path, "--", PYTHON, program, "30",
                                  cwd=self.tmp, env=clean_env(PYSAMPLE_LIB=library))
        self.assertEqual(code, 0, err)
        with open(out_path, "rb") as f:
            data = f.read()
        doc = json.loads(data.decode("utf-8"))
        names = [f["name"] for f in doc["shared"]["frames"]]
        main = [p for p in doc["profiles"] if p["name"].endswith("(MainThread)")]
        self.assertEqual(len(main), 1, [p["name"] for p in doc["profiles"]])
        main = main[0]
        self.assertEqual((main["type"], main["unit"], main["startValue"]), ("sampled", "microseconds", 0))
        self.assertEqual(main["endValue"], sum(main["weights"]))
        self.assertTrue(all(w > 0 for w in main["weights"]), main["weights"])
        # The phases, in time order: one letter per sample, runs collapsed.
        phases = ""
        for sample in main["samples"]:
            frames = {names[i] for i in sample}
            letter = "a" if "phase_a" in frames else "b" if "phase_b" in frames else ""
            if letter and not phases.endswith(letter):
                phases += letter
        self.assertEqual(phases, "aba")
        # A sample weighs the time to the thread's next one: at 200 Hz about
        # 5 ms, never more than twice that (a longer gap is an empty sample).
        busy = [w for s, w in zip(main["samples"], main["weights"]) if s]
        self.assertLessEqual(max(busy), 10000)
        self.assertGreater(sum(busy), 0.5 * 5000 * len(busy))
        figures = doc["pysample"]["timeline"]
        self.assertEqual((figures["rate_hz"], figures["dropped_records"]), (200, 0))
        self.assertEqual(figures["samples"], sum(1 for s in main["samples"] if s)
                         + sum(sum(1 for s in p["samples"] if s) for p in doc["profiles"] if p is not main))
        title, text = self.open_in_speedscope(data, "tl.json")
        self.assertNotIn(self.FAILED, text)
        self.assertNotIn("alert:", text)
        self.assertEqual(title, "tl.json - speedscope", text[:500])
        self.assertIn(main["name"], text)

    def test_speedscope_reports_a_broken_file(self):
        """The check above can fail: speedscope's failure is seen."""
        doc = json.loads(self.convert_quality_fixture().decode("utf-8"))
        doc["profiles"][0]["samples"][0].append(len(doc["shared"]["frames"]))   # no such frame
        title, text = self.open_in_speedscope(json.dumps(doc).encode("utf-8"))
        self.assertIn(self.FAILED, text)
        self.assertNotIn("quality.txt", title)
        # Cut short, the file is not JSON: speedscope says it knows no such format.
        title, text = self.open_in_speedscope(self.convert_quality_fixture()[:300], "cut.json")
        self.assertRegex(text, r"^alert: Unrecognized format", text[:500])
        self.assertNotIn("quality.txt", title)


class PprofTests(TempDirTestCase):
    def convert(self, path, *args):
        out_path = os.path.join(self.tmp, "p.pb")
        code, out, err = pysample("convert", path, "--to", "pprof", "-o", out_path, *args)
        self.assertEqual(code, 0, err)
        with open(out_path, "rb") as f:
            data = f.read()
        self.assertNotEqual(data[:2], b"\x1f\x8b", "uncompressed")
        return out_path, decode_pprof(data)

    def stacks(self, prof):
        """{(thread label, root-first frames as (name, file, line)): counts}"""
        got = collections.Counter()
        for location_ids, values, labels in prof["samples"]:
            frames = []
            for lid in location_ids:
                mapping, lines = prof["locations"][lid]
                self.assertEqual(len(lines), 1)
                fid, line = lines[0]
                name, filename, _ = prof["functions"][fid]
                frames.append((name, filename or None, line or None))
            thread = "thread " + labels["thread_id"]
            if "thread_name" in labels:
                thread += " (%s)" % labels["thread_name"]
            got[(thread, tuple(reversed(frames)))] += values[0]
        return got

    def test_string_table_and_sample_types(self):
        _, prof = self.convert(fixture("basic.txt"))
        self.assertEqual(prof["strings"][0], "")
        self.assertEqual(len(prof["strings"]), len(set(prof["strings"])), "strings are stored once")
        self.assertEqual(prof["sample_type"], [("samples", "count")])
        self.assertEqual(prof["period_type"], ("samples", "count"))
        self.assertEqual(prof["period"], 1)
        self.assertTrue(any("pysample" in c for c in prof["comments"]))
        self.assertGreater(prof["time_nanos"], 0)

    def test_values_sum_to_the_total(self):
        _, prof = self.convert(fixture("basic.txt"))
        self.assertEqual(sum(values[0] for _, values, _ in prof["samples"]), 100)
        for _, values, _ in prof["samples"]:
            self.assertEqual(len(values), len(prof["sample_type"]))

    def test_stacks_functions_lines_and_thread_labels(self):
        _, prof = self.convert(fixture("basic.txt"))
        want = collections.Counter()
        for (thread, stack), count in read_stacks(fixture("basic.txt")).items():
            want[(unescape(thread), tuple(split_frame(f) for f in stack))] += count
        self.assertEqual(self.stacks(prof), want)
        names = set(name for name, _, _ in prof["functions"].values())
        self.assertTrue({"compute", "fib", "<module>", "weird%name;x", "[pysample: truncated]"} <= names)
        self.assertEqual(len(prof["functions"]), len(set(prof["functions"].values())),
                         "a function is listed once, whatever its lines")

    def test_ids_are_unique_and_nonzero(self):
        _, prof = self.convert(fixture("basic.txt"))
        self.assertNotIn(0, prof["functions"])
        self.assertNotIn(0, prof["locations"])
        mapping_ids = [one(m, 1) for m in prof["mappings"]]
        self.assertEqual(mapping_ids, [1])
        self.assertEqual(one(prof["mappings"][0], 7), 1, "has_functions: pprof must not symbolize")
        for mapping, lines in prof["locations"].values():
            self.assertIn(mapping, mapping_ids)
            for fid, _ in lines:
                self.assertIn(fid, prof["functions"])

    def test_leaf_first(self):
        _, prof = self.convert(fixture("basic.txt"))
        leaves = collections.Counter()
        for location_ids, values, _ in prof["samples"]:
            fid = prof["locations"][location_ids[0]][1][0][0]
            leaves[prof["functions"][fid][0]] += values[0]
        self.assertEqual(leaves["compute"], 50)
        self.assertEqual(leaves["main"], 0)

    def test_rate_adds_cpu_nanoseconds(self):
        _, prof = self.convert(fixture("basic.txt"), "--rate", "250", "--mode", "cpu")
        self.assertEqual(prof["sample_type"], [("samples", "count"), ("cpu", "nanoseconds")])
        self.assertEqual(prof["period_type"], ("cpu", "nanoseconds"))
        self.assertEqual(prof["period"], 4000000)
        self.assertEqual(prof["default_sample_type"], "cpu")
        for _, values, _ in prof["samples"]:
            self.assertEqual(values[1], values[0] * 4000000)

    def test_wall_profile_is_labelled_wall(self):
        """Issue #35: a wall profile came out as `cpu`.  Labelled by the
        profile's mode: its .quality.json's, else wall (the library's
        default, said in one line); cpu only for a cpu profile."""
        src = os.path.join(self.tmp, "prof.txt")
        shutil.copy(fixture("basic.txt"), src)
        out_path = os.path.join(self.tmp, "p.pb")
        code, _, err = pysample("convert", src, "--to", "pprof", "--rate", "100", "-o", out_path)
        self.assertEqual(code, 0, err)
        with open(out_path, "rb") as f:
            prof = decode_pprof(f.read())
        self.assertEqual(prof["sample_type"], [("samples", "count"), ("wall", "nanoseconds")])
        self.assertEqual(prof["period_type"], ("wall", "nanoseconds"))
        self.assertEqual(prof["default_sample_type"], "wall")
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("--mode cpu", err)
        for mode in ("wall", "cpu"):
            with open(src + ".quality.json", "w") as f:
                json.dump({"mode": mode, "requested_rate_hz": 100}, f)
            code, _, err = pysample("convert", src, "--to", "pprof", "-o", out_path)
            self.assertEqual((code, err), (0, ""))
            with open(out_path, "rb") as f:
                prof = decode_pprof(f.read())
            self.assertEqual(prof["sample_type"][1], (mode, "nanoseconds"))
            self.assertEqual(prof["default_sample_type"], mode)

    def test_lines_off(self):
        _, prof = self.convert(fixture("nolines.txt"))
        self.assertEqual({line for _, lines in prof["locations"].values() for _, line in lines}, {0})
        self.assertEqual(one(prof["mappings"][0], 9), 0, "has_line_numbers is false")

    def test_go_tool_pprof_reads_it(self):
        go = shutil.which("go")
        if not go:
            self.skipTest("go is not installed: `go tool pprof` check skipped")
        path, _ = self.convert(fixture("basic.txt"), "--rate", "100")
        code, out, err = run([go, "tool", "pprof", "-raw", path], env=go_env(self.tmp))
        self.assertEqual(code, 0, err)
        text = out.decode("utf-8", "replace")
        self.assertIn("compute /srv/app/work.py:5", text)
        self.assertIn("<module> /srv/app/main.py:30", text)
        code, out, err = run([go, "tool", "pprof", "-top", "-sample_index=samples", path],
                             env=go_env(self.tmp))
        self.assertEqual(code, 0, err)
        self.assertRegex(out.decode(), r"50\s+50(\.00)?%.*compute")

    def test_quality_figures_are_one_comment(self):
        """pprof prints every comment above every report: the figures used to
        be 17 lines at the head of `go tool pprof -top`."""
        profile = fixture("basic.txt")
        shutil.copy(profile, os.path.join(self.tmp, "basic.txt"))
        with open(os.path.join(self.tmp, "basic.txt.quality.json"), "w") as f:
            json.dump({"requested_rate_hz": 100, "achieved_rate_hz": 98.5, "samples": 100, "ticks": 101,
                       "mode": "wall", "python": "3.12", "dropped_unreadable": 2, "late_ticks": 1,
                       "truncated_stacks": 0, "budget_pct": 0.0, "duration_s": 1.0}, f)
        path, prof = self.convert(os.path.join(self.tmp, "basic.txt"), "--rate", "100")
        self.assertEqual(prof["comments"], ["converted by pysample %s from basic.txt: Python 3.12, wall-clock, "
                                            "98.5 of 100 Hz, 100 samples, 2 dropped" % pysample_tool.VERSION])
        go = shutil.which("go")
        if go:
            code, out, err = run([go, "tool", "pprof", "-top", path], env=go_env(self.tmp))
            self.assertEqual(code, 0, err)
            head = out.decode().split("\nType:")[0].splitlines()
            self.assertLessEqual(len(head), 2, "File: and the one comment above the report: %r" % head)

    def test_hostile_quality_figures_are_read_as_absent(self):
        """The figures come from the profiled process (its sidecar file or
        its control socket), which may write anything: text, NaN, infinity
        or a negative count used to stop convert, top and record with a
        ValueError traceback."""
        shutil.copy(fixture("basic.txt"), os.path.join(self.tmp, "basic.txt"))
        with open(os.path.join(self.tmp, "basic.txt.quality.json"), "w") as f:
            json.dump({"requested_rate_hz": "x", "achieved_rate_hz": "nan", "samples": "-5",
                       "mode": "wall", "dropped_unreadable": "1e400", "dropped_other": "many",
                       "truncated_stacks": "?", "budget_pct": "inf", "budget_adjustments": "-1"}, f)
        path, prof = self.convert(os.path.join(self.tmp, "basic.txt"), "--rate", "100")
        self.assertEqual(prof["comments"], ["converted by pysample %s from basic.txt: wall-clock, "
                                            "? samples, 0 dropped" % pysample_tool.VERSION])
        meta = {"requested_rate_hz": "100", "achieved_rate_hz": "-1", "budget_adjustments": "x",
                "duration_s": "1e309", "dropped_inconsistent": "2"}
        self.assertIn("2 dropped", pysample_tool.remote.describe_quality(meta))
        self.assertIn("achieved rate 0.0 Hz", pysample_tool.remote.low_rate_warning(meta))
        self.assertIn("0 dropped", pysample_tool.top.live_header(1, {"dropped_other": "x"})[1])


if __name__ == "__main__":
    unittest.main()
