#!/usr/bin/env python3
"""`bucketsim compare --memory-viz DIR`: the PyTorch memory snapshots it writes, read back.

    memory_viz_test.py [-v]            Tools.MemoryVizRoundTrip: host python3, standard library
    memory_viz_test.py --torch2 [-v]   Tools.MemoryVizTorch2: torch 2.6's _memory_viz reads them
                                       (tools/torch2.sh); exit 77 (skipped) where that root is
                                       not usable

The round trip: tools/snapshot_to_trace.py turns a written snapshot back into a trace; that trace
replayed by `bucketsim compare` under the same policy must give the same peak allocated and peak
reserved bytes, and its own snapshot the same allocator events (action, address, size, in
order; streams up to their numbering, which the importer renumbers by first use) and the same
final segments. BUCKETSIM names the binary (ctest sets it)."""

import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
IMPORTER = os.path.join(ROOT, "tools", "snapshot_to_trace.py")
TORCH2 = os.path.join(ROOT, "tools", "torch2.sh")
DEFAULT_TRACE = os.path.join(ROOT, "traces", "gpt-24l-h1024-ws8.json")
BUCKETSIM = os.environ.get("BUCKETSIM", os.path.join(ROOT, "build", "bucketsim"))
MIB = 1 << 20

# A trace whose block 1 is used on stream 1 (record_stream) and freed: its free completes only at
# the sync of stream 1, after block 2 was allocated; block 3 then reuses block 1's memory.
RECORD_STREAM_TRACE = {
    "schema_version": 3, "description": "record_stream, a pending free", "world_size": 1,
    "rank": 0, "streams": ["compute", "side"],
    "events": [
        {"ev": "alloc", "id": 1, "bytes": 3 * MIB, "stream": 0, "cat": "activation"},
        {"ev": "record_stream", "id": 1, "stream": 1},
        {"ev": "free", "id": 1},
        {"ev": "alloc", "id": 2, "bytes": 3 * MIB, "stream": 0, "cat": "activation"},
        {"ev": "sync", "stream": 1},
        {"ev": "alloc", "id": 3, "bytes": 2 * MIB, "stream": 0, "cat": "grad"},
        {"ev": "alloc", "id": 4, "bytes": 1000, "stream": 1, "cat": "other"},
        {"ev": "free", "id": 2},
        {"ev": "free", "id": 3},
    ],
}


def run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, **kwargs)


def load(path):
    with open(path, "rb") as f:
        return pickle.load(f)


def allocator_events(snapshot):
    """(action, addr, size, stream) of device 0's trace, streams renumbered by first use."""
    streams = {}
    out = []
    for e in snapshot["device_traces"][0]:
        stream = streams.setdefault(e["stream"], len(streams))
        out.append((e["action"], e.get("addr"), e["size"], stream))
    return out, streams


def final_segments(snapshot, streams):
    return [(s["address"], s["total_size"], streams.get(s["stream"], s["stream"]),
             s["is_expandable"],
             [(b["address"], b["size"], b["requested_size"], b["state"]) for b in s["blocks"]])
            for s in snapshot["segments"]]


class Case(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, *names):
        return os.path.join(self.tmp.name, *names)

    def compare(self, trace, out_dir, report, *extra):
        r = run([BUCKETSIM, "compare", trace, "--memory-viz", out_dir, "--json", report, *extra])
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(report) as f:
            return r.stdout, json.load(f)["policies"]


class RoundTrip(Case):
    def round_trip(self, trace, *extra):
        """Replays `trace` with --memory-viz, imports each snapshot, replays that under the same
        policy; returns the number of snapshots checked."""
        stdout, runs = self.compare(trace, self.path("viz"), self.path("report.json"), *extra)
        for policy in runs:
            name = policy["policy"]
            with self.subTest(policy=name):
                snapshot_path = self.path("viz", re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".pickle")
                self.assertIn(f"memory snapshot ({name}): {snapshot_path}", stdout)
                original = load(snapshot_path)
                imported = self.path(name + ".trace.json")
                r = run([sys.executable, IMPORTER, snapshot_path, "-o", imported])
                self.assertEqual(r.returncode, 0, r.stderr)
                again_dir = self.path("again-" + name)
                _, again_runs = self.compare(imported, again_dir, self.path("again.json"),
                                             "--policy", name)
                again = again_runs[0]
                self.assertEqual(again["peak_allocated_bytes"], policy["peak_allocated_bytes"])
                self.assertEqual(again["peak_reserved_bytes"], policy["peak_reserved_bytes"])
                replayed = load(os.path.join(again_dir, os.listdir(again_dir)[0]))
                events, streams = allocator_events(original)
                events_again, streams_again = allocator_events(replayed)
                self.assertGreater(len(events), 0)
                self.assertEqual(events_again, events)
                self.assertEqual(final_segments(replayed, streams_again),
                                 final_segments(original, streams))
                self.assertEqual(replayed["allocator_settings"]["expandable_segments"],
                                 original["allocator_settings"]["expandable_segments"])
        return len(runs)

    def test_default_trace_every_policy(self):
        self.assertEqual(self.round_trip(DEFAULT_TRACE), 4)

    def test_expandable_segments(self):
        self.round_trip(DEFAULT_TRACE, "--policy", "backward-only", "--policy",
                        "lifetime=always,key=members,cap=50",
                        "--alloc-conf", "expandable_segments:True")
        snapshot = load(self.path("viz", "backward-only.pickle"))
        actions = {e["action"] for e in snapshot["device_traces"][0]}
        self.assertIn("segment_map", actions)
        self.assertNotIn("segment_alloc", actions)
        self.assertTrue(all(s["is_expandable"] for s in snapshot["segments"]))

    def test_pending_free_completes_at_the_sync(self):
        trace = self.path("record_stream.json")
        with open(trace, "w") as f:
            json.dump(RECORD_STREAM_TRACE, f)
        self.round_trip(trace, "--policy", "backward-only")
        events, _ = allocator_events(load(self.path("viz", "backward-only.pickle")))
        actions = [e[0] for e in events]
        # Block 1's free is requested, block 2 allocated, then its free completes (the sync).
        first_request = actions.index("free_requested")
        self.assertEqual(actions[first_request + 1:first_request + 3], ["alloc", "free_completed"])


class Contents(Case):
    def test_frames_name_the_category_event_and_phase(self):
        self.compare(DEFAULT_TRACE, self.path("viz"), self.path("r.json"), "--policy",
                     "backward-only")
        snapshot = load(self.path("viz", "backward-only.pickle"))
        trace = snapshot["device_traces"][0]
        names = set()
        for e in trace:
            if e["action"] != "alloc":
                continue
            category, phase = e["frames"]
            self.assertEqual(category["filename"], DEFAULT_TRACE)
            self.assertIsInstance(category["line"], int)
            self.assertRegex(phase["name"], r"^(init|forward|backward|step|zero_grad), "
                             r"iteration \d+$")
            names.add(category["name"])
        # Trace tensors and the policy's bucket buffers alike.
        self.assertTrue({"param", "activation", "bucket_data", "bucket_output"} <= names, names)
        # A free shows its allocation's frames.
        alloc_frames = {}
        for e in trace:
            if e["action"] == "alloc":
                alloc_frames[e["addr"]] = e["frames"]
            elif e["action"] == "free_requested":
                self.assertEqual(e["frames"], alloc_frames[e["addr"]])
        # Every segment is tiled by its blocks, as _memory_viz's stats asserts.
        for s in snapshot["segments"]:
            self.assertEqual(sum(b["size"] for b in s["blocks"]), s["total_size"])
            self.assertEqual(s["device"], 0)

    def test_out_of_memory_is_the_last_entry(self):
        stdout, runs = self.compare(DEFAULT_TRACE, self.path("viz"), self.path("r.json"),
                                    "--policy", "always-allocated", "--device-memory", "1GiB",
                                    "--device-overhead", "0")
        self.assertIsNotNone(runs[0]["oom"])
        last = load(self.path("viz", "always-allocated.pickle"))["device_traces"][0][-1]
        self.assertEqual(last["action"], "oom")
        self.assertNotIn("addr", last)
        self.assertGreaterEqual(last["device_free"], 0)
        self.assertLessEqual(last["device_free"], 1 << 30)

    def test_a_policy_name_becomes_a_file_name(self):
        stdout, _ = self.compare(DEFAULT_TRACE, self.path("viz"), self.path("r.json"), "--policy",
                                 "lifetime=always,key=members,cap=50")
        self.assertEqual(os.listdir(self.path("viz")),
                         ["lifetime_always_key_members_cap_50.pickle"])


def format_size(num):
    """_memory_viz's own _format_size."""
    for unit in ["", "Ki", "Mi", "Gi", "Ti"]:
        if abs(num) < 1024.0:
            return f"{num:3.1f}{unit}B"
        num /= 1024.0
    return f"{num:.1f}PiB"


def torch2_python(*args):
    return run([TORCH2, "python", *args], cwd=ROOT)


class Torch2MemoryViz(Case):
    """torch 2.6's own reader of snapshots (torch/cuda/_memory_viz.py) on what we write."""

    @classmethod
    def setUpClass(cls):
        cls.shared = tempfile.TemporaryDirectory(dir="/tmp")
        cls.viz = os.path.join(cls.shared.name, "viz")
        r = run([BUCKETSIM, "compare", DEFAULT_TRACE, "--policy", "backward-only",
                 "--memory-viz", cls.viz])
        assert r.returncode == 0, r.stderr
        cls.file = os.path.join(cls.viz, "backward-only.pickle")
        cls.snapshot = load(cls.file)

    @classmethod
    def tearDownClass(cls):
        cls.shared.cleanup()

    def memory_viz(self, *args):
        r = torch2_python("-m", "torch.cuda._memory_viz", *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_stats(self):
        out = self.memory_viz("stats", self.file)
        reserved = sum(s["total_size"] for s in self.snapshot["segments"])
        self.assertIn(f"segments: {len(self.snapshot['segments'])}\n", out)
        self.assertIn(f"total_reserved: {format_size(reserved)}\n", out)

    def test_trace_lists_every_event(self):
        out = self.memory_viz("trace", self.file)
        trace = self.snapshot["device_traces"][0]
        self.assertIn(f"\n{len(trace)} entries\n", out)
        lines = out.split("\n")
        count = {action: sum(1 for e in trace if e["action"] == action)
                 for action in ("alloc", "free_requested", "free_completed", "segment_alloc")}
        self.assertGreater(count["alloc"], 1000)
        self.assertEqual(sum(1 for l in lines if re.match(r"^\w+ = \w+\[\d+:", l)),
                         count["alloc"])
        self.assertEqual(sum(1 for l in lines if l.startswith("del ")), count["free_requested"])
        self.assertEqual(sum(1 for l in lines if l.startswith("# free completed for ")),
                         count["free_completed"])
        self.assertEqual(sum(1 for l in lines if " = cudaMalloc(" in l), count["segment_alloc"])

    def test_segments_flamegraph_input(self):
        # The `segments` command pipes these lines into flamegraph.pl, which it downloads: offline
        # here, so the lines themselves are checked (one per block).
        code = ("import pickle, sys; from torch.cuda import _memory_viz as v; "
                "d = pickle.load(open(sys.argv[1], 'rb')); "
                "sys.stdout.write(v.segments(d, format_flamegraph=lambda lines: lines))")
        r = torch2_python("-c", code, self.file)
        self.assertEqual(r.returncode, 0, r.stderr)
        blocks = sum(len(s["blocks"]) for s in self.snapshot["segments"])
        # One line per block, and one more for the rounding of each allocated one.
        lines = r.stdout.splitlines()
        self.assertEqual(sum(1 for line in lines if ";<gaps> " not in line), blocks)
        self.assertIn(";active_allocated;", r.stdout)
        self.assertIn("gpt-24l-h1024-ws8.json:", r.stdout)

    def test_trace_plot_writes_the_page(self):
        page = os.path.join(self.shared.name, "page.html")
        self.memory_viz("trace_plot", self.file, "-o", page)
        with open(page) as f:
            html = f.read()
        self.assertIn("MemoryViz.js", html)
        self.assertIn('"name": "snapshot.pickle", "base64": "', html)
        self.assertGreater(len(html), os.path.getsize(self.file))


def main():
    argv = sys.argv[1:]
    if "--torch2" in argv:
        argv.remove("--torch2")
        status = run([TORCH2, "status"])
        if status.returncode != 0:
            print(f"skipped: tools/torch2.sh status: {status.stdout}{status.stderr}".strip())
            return 77
        tests = [Torch2MemoryViz]
    else:
        tests = [RoundTrip, Contents]
    loader = unittest.TestLoader()
    suite = unittest.TestSuite(loader.loadTestsFromTestCase(t) for t in tests)
    verbosity = 2 if "-v" in argv else 1
    result = unittest.TextTestRunner(verbosity=verbosity).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
