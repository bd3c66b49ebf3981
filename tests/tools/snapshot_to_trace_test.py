#!/usr/bin/env python3
"""Tests of tools/snapshot_to_trace.py on pickles that Python's pickle module writes at test time
from the snapshot dicts of tests/tools/snapshot_fixtures.py (two PyTorch generations), and on
malformed pickles. Run by ctest: python3 -m unittest (see tests/tools/CMakeLists.txt)."""

import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(ROOT, "tools", "snapshot_to_trace.py")
sys.path.insert(0, HERE)

import snapshot_fixtures as fx  # noqa: E402

MIB = 1 << 20


class ImporterCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def pickle(self, name, obj=None, data=None):
        p = self.path(name + ".pickle")
        with open(p, "wb") as f:
            if data is not None:
                f.write(data)
            else:
                pickle.dump(obj, f)
        return p

    def run_tool(self, snapshot, *extra):
        out = self.path("out.json")
        run = subprocess.run([sys.executable, TOOL, snapshot, "-o", out, *extra],
                             capture_output=True, text=True)
        return run, out

    def convert(self, name, obj, *extra):
        run, out = self.run_tool(self.pickle(name, obj), *extra)
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(out) as f:
            text = f.read()
        trace = json.loads(text)
        self.assertEqual(list(trace)[-1], "events")  # the reader streams: events come last
        return trace, run.stderr

    def expect_error(self, snapshot, *fragments):
        out = self.path("out.json")
        with open(out, "w") as f:
            f.write("previous contents")
        run = subprocess.run([sys.executable, TOOL, snapshot, "-o", out],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertTrue(run.stderr.startswith("snapshot_to_trace: error: " + snapshot + ": "),
                        run.stderr)
        for fragment in fragments:
            self.assertIn(fragment, run.stderr)
        with open(out) as f:
            self.assertEqual(f.read(), "previous contents")  # nothing written
        leftovers = [n for n in os.listdir(self.dir.name) if n.startswith(".snapshot_to_trace")]
        self.assertEqual(leftovers, [])


class Conversion(ImporterCase):
    def test_fixtures_cover_every_action_kind(self):
        seen = set()
        for build in fx.SCENARIOS.values():
            for trace in build()["device_traces"]:
                seen.update(e["action"] for e in trace)
        self.assertEqual(seen, {"alloc", "free_requested", "free_completed", "segment_alloc",
                                "segment_free", "segment_map", "segment_unmap", "oom",
                                "snapshot"})

    def test_old_generation_default_config(self):
        trace, _ = self.convert("old", fx.default_config(False))
        self.assertEqual(trace["schema_version"], 3)
        self.assertNotIn("alloc_conf", trace)
        self.assertEqual(trace["streams"], ["cuda stream 0x0"])
        s1, s2, s3 = fx.BASE, fx.BASE + 0x2000000, fx.BASE + 0x4000000
        self.assertEqual(trace["events"], [
            {"ev": "segment_alloc", "addr": s1, "bytes": 26 * MIB, "stream": 0},
            {"ev": "alloc", "id": s1, "bytes": 25 * MIB, "stream": 0, "cat": "other"},
            {"ev": "segment_alloc", "addr": s2, "bytes": 14 * MIB, "stream": 0},
            {"ev": "alloc", "id": s2, "bytes": 13107200, "stream": 0, "cat": "other"},
            {"ev": "free", "id": s1},  # free_requested; its free_completed followed at once
            {"ev": "segment_alloc", "addr": s3, "bytes": 30 * MIB, "stream": 0},
            {"ev": "alloc", "id": s3, "bytes": 30 * MIB, "stream": 0, "cat": "other"},
            {"ev": "alloc", "id": s1, "bytes": 20 * MIB, "stream": 0, "cat": "other"},
            # the dump: 20 + 12.5 + 30 MiB allocated (§6.1: 65,536,000), 26 + 14 + 30 reserved
            {"ev": "snapshot", "bytes": 65536000, "allocated_bytes": 65536000,
             "reserved_bytes": 73400320, "requested_bytes": 65536000},
        ])

    def test_new_generation_keeps_times_settings_and_synthesizes_empty_cache(self):
        trace, _ = self.convert("new", fx.default_config(True))
        self.assertEqual(trace.get("alloc_conf"), None)  # the defaults: nothing to say
        events = trace["events"]
        self.assertEqual(events[0]["time_us"], 1_700_000_000_000_007)
        self.assertEqual([e["ev"] for e in events],
                         ["segment_alloc", "alloc", "segment_alloc", "alloc", "free",
                          "segment_alloc", "alloc", "alloc", "free", "segment_free",
                          "empty_cache", "snapshot"])
        # The free keeps free_requested's time (entry 4 of the device trace).
        self.assertEqual(events[4], {"ev": "free", "id": fx.BASE,
                                     "time_us": 1_700_000_000_000_000 + 7 * 5})
        self.assertEqual(events[-1]["reserved_bytes"], 40 * MIB)

    def test_expandable_segments_become_alloc_conf_and_map_events(self):
        trace, _ = self.convert("exp", fx.expandable())
        self.assertEqual(trace["alloc_conf"], "expandable_segments:True")
        kinds = [e["ev"] for e in trace["events"]]
        self.assertEqual(kinds, ["segment_map", "alloc", "alloc", "free", "segment_map", "alloc",
                                 "segment_unmap", "empty_cache", "snapshot"])
        self.assertEqual(trace["events"][6]["bytes"], 20 * MIB)
        self.assertEqual(trace["events"][-1]["reserved_bytes"], 60 * MIB)

    def test_other_settings_become_alloc_conf(self):
        snap = fx.default_config(True)
        settings = snap["allocator_settings"]
        settings["max_split_size"] = 128 * MIB
        settings["roundup_power2_divisions"]["4"] = 8
        settings["garbage_collection_threshold"] = 0.6
        settings["PYTORCH_CUDA_ALLOC_CONF"] = "max_split_size_mb:128,max_non_split_rounding_mb:64"
        trace, _ = self.convert("settings", snap)
        self.assertEqual(trace["alloc_conf"],
                         "max_split_size_mb:128,roundup_power2_divisions:[1:0,2:0,4:8,8:0,16:0,"
                         "32:0,64:0,128:0,256:0,512:0,1024:0,2048:0,4096:0,8192:0,16384:0,"
                         "32768:0],garbage_collection_threshold:0.6,max_non_split_rounding_mb:64")

    def test_max_split_size_minus_one_is_no_limit(self):
        # Every default snapshot carries -1 (int64_t(SIZE_MAX)): no max_split_size_mb at all.
        snap = fx.default_config(True)
        self.assertEqual(snap["allocator_settings"]["max_split_size"], -1)
        trace, _ = self.convert("minus-one", snap)
        self.assertNotIn("alloc_conf", trace)
        trace, _ = self.convert("minus-one-exp", fx.expandable())
        self.assertEqual(trace["alloc_conf"], "expandable_segments:True")

    def test_max_split_size_unsigned_size_max_is_no_limit(self):
        snap = fx.default_config(True)
        snap["allocator_settings"]["max_split_size"] = (1 << 64) - 1
        trace, _ = self.convert("size-max", snap)
        self.assertNotIn("alloc_conf", trace)

    def test_unknown_keys_everywhere_are_ignored(self):
        # A newer PyTorch's keys change nothing: the same trace, event for event.
        for name, build in fx.SCENARIOS.items():
            with self.subTest(scenario=name):
                plain, _ = self.convert(name, build())
                newer, _ = self.convert(name + "-newer", fx.with_newer_keys(build()))
                self.assertEqual(newer["events"], plain["events"])
                self.assertEqual(newer.get("alloc_conf"), plain.get("alloc_conf"))

    def test_deferred_free_becomes_record_stream_and_sync(self):
        trace, _ = self.convert("deferred", fx.streams_and_deferred_free())
        self.assertEqual(trace["streams"],
                         ["cuda stream 0x0", "cuda stream 0x55d0c0de1230", "deferred_free 0"])
        small = fx.BASE
        events = trace["events"]
        self.assertEqual(events[4]["stream"], 1)  # the second stream's alloc
        self.assertEqual(events[6:13], [
            {"ev": "alloc", "id": small, "bytes": 1000, "stream": 0, "cat": "other"},
            {"ev": "record_stream", "id": small, "stream": 2},
            {"ev": "free", "id": small},
            {"ev": "snapshot", "bytes": 5 * MIB + 1024},
            {"ev": "sync", "stream": 2},  # the free_completed: reusable from here
            {"ev": "alloc", "id": small, "bytes": 512, "stream": 0, "cat": "other"},
            {"ev": "oom", "bytes": 80 * 1024 * MIB, "stream": 0, "device_free": 3 * MIB},
        ])

    def test_wrapped_ring_buffer_synthesizes_the_start(self):
        trace, _ = self.convert("wrapped", fx.wrapped())
        self.assertIn("2 allocation(s) and 1 segment(s) alive at the start", trace["description"])
        self.assertEqual(trace["events"][:4], [
            {"ev": "segment_alloc", "addr": fx.BASE, "bytes": 20 * MIB, "stream": 0},
            {"ev": "alloc", "id": fx.BASE, "bytes": 4 * MIB, "stream": 0, "cat": "other"},
            {"ev": "alloc", "id": fx.BASE + 4 * MIB, "bytes": 3 * MIB, "stream": 0,
             "cat": "other"},
            {"ev": "free", "id": fx.BASE, "time_us": 1_700_000_000_000_007},
        ])

    def test_pending_free_at_the_start(self):
        snap = fx.wrapped()
        snap["device_traces"][0].insert(0, {"action": "free_completed", "addr": fx.BASE + 0x8000,
                                            "size": 100, "stream": 0})
        trace, _ = self.convert("pending", snap)
        self.assertIn({"ev": "record_stream", "id": fx.BASE + 0x8000, "stream": 1},
                      trace["events"])
        self.assertIn({"ev": "sync", "stream": 1}, trace["events"])

    def test_two_devices_default_and_choice(self):
        trace, note = self.convert("two", fx.two_devices())
        self.assertIn("importing device 0 (choose another with --device N)", note)
        self.assertEqual(len(trace["events"]), 12)
        trace, note = self.convert("two", fx.two_devices(), "--device", "1")
        self.assertEqual(note, "")
        self.assertIn("device 1", trace["description"])
        self.assertEqual([e["ev"] for e in trace["events"]], ["segment_alloc", "alloc", "snapshot"])

    def test_segments_only_list(self):
        trace, _ = self.convert("list", fx.default_config(False)["segments"])
        self.assertEqual([e["ev"] for e in trace["events"]],
                         ["segment_alloc"] * 3 + ["alloc"] * 3 + ["snapshot"])

    def test_profiler_categories(self):
        snap = fx.default_config(False)
        snap["device_traces"][0][1]["category"] = "ACTIVATION"
        trace, _ = self.convert("cat", snap)
        self.assertEqual(trace["events"][1]["cat"], "activation")


class Malformed(ImporterCase):
    def test_truncated(self):
        data = pickle.dumps(fx.default_config(True))
        self.expect_error(self.pickle("cut", data=data[: len(data) // 2]), "truncated")

    def test_empty(self):
        self.expect_error(self.pickle("empty", data=b""), "the file is empty")

    def test_not_a_pickle(self):
        self.expect_error(self.pickle("text", data=b"hello, world\n"), "not a readable pickle")

    def test_missing_file(self):
        self.expect_error(self.path("nope.pickle"), "cannot open")

    def test_object_of_a_class(self):
        self.expect_error(self.pickle("cls", {"segments": [], "device_traces": [],
                                              "x": unittest.TestCase}),
                          "refers to unittest.case.TestCase")

    def test_wrong_top_level(self):
        self.expect_error(self.pickle("int", 42), "the snapshot must be a dict")

    def test_missing_top_level_key(self):
        self.expect_error(self.pickle("nokey", {"segments": []}),
                          "top level: missing key 'device_traces'")

    def test_missing_entry_key(self):
        snap = fx.default_config(True)
        del snap["device_traces"][0][3]["size"]
        self.expect_error(self.pickle("nosize", snap),
                          "device_traces[0][3] (alloc): missing key 'size'")

    def test_wrong_entry_type(self):
        snap = fx.default_config(False)
        snap["device_traces"][0][1]["addr"] = "0x7f00"
        self.expect_error(self.pickle("str", snap),
                          "device_traces[0][1] (alloc): 'addr' must be an int, got str")

    def test_bool_is_not_an_int(self):
        snap = fx.default_config(False)
        snap["device_traces"][0][1]["stream"] = True
        self.expect_error(self.pickle("bool", snap), "'stream' must be an int, got bool")

    def test_negative_size(self):
        snap = fx.default_config(False)
        snap["device_traces"][0][1]["size"] = -5
        self.expect_error(self.pickle("neg", snap), "'size' must not be negative (got -5)")

    def test_negative_max_split_size_other_than_minus_one(self):
        snap = fx.default_config(True)
        snap["allocator_settings"]["max_split_size"] = -2
        self.expect_error(self.pickle("split", snap),
                          "allocator_settings: 'max_split_size' must be a size in bytes or -1 "
                          "(no limit), got -2")

    def test_max_split_size_not_an_int(self):
        snap = fx.default_config(True)
        snap["allocator_settings"]["max_split_size"] = "unlimited"
        self.expect_error(self.pickle("split-str", snap),
                          "allocator_settings: 'max_split_size' must be an int, got str")

    def test_known_setting_of_the_wrong_type_among_unknown_keys(self):
        snap = fx.with_newer_keys(fx.default_config(True))
        snap["allocator_settings"]["expandable_segments"] = "yes"
        self.expect_error(self.pickle("exp-str", snap),
                          "allocator_settings: 'expandable_segments' must be a bool, got str")

    def test_known_entry_key_still_checked_among_unknown_keys(self):
        snap = fx.with_newer_keys(fx.default_config(True))
        snap["device_traces"][0][1]["size"] = -1
        self.expect_error(self.pickle("entry-neg", snap),
                          "device_traces[0][1] (alloc): 'size' must not be negative (got -1)")

    def test_known_block_key_still_checked_among_unknown_keys(self):
        snap = fx.with_newer_keys(fx.default_config(True))
        snap["segments"][0]["blocks"][0]["size"] = 1.5
        self.expect_error(self.pickle("block-float", snap),
                          "segments[0].blocks[0]: 'size' must be an int, got float")

    def test_unknown_action(self):
        snap = fx.default_config(True)
        snap["device_traces"][0][2]["action"] = "segment_resize"
        self.expect_error(self.pickle("action", snap),
                          "device_traces[0][2]: unknown action 'segment_resize'")

    def test_bad_segment(self):
        snap = fx.default_config(True)
        snap["segments"][1]["blocks"][0]["state"] = "allocated"
        self.expect_error(self.pickle("state", snap),
                          "segments[1].blocks[0]: unknown state 'allocated'")

    def test_trace_not_a_list(self):
        self.expect_error(self.pickle("tl", {"segments": [], "device_traces": [{}]}),
                          "device_traces[0] must be a list, got dict")

    def test_device_out_of_range(self):
        run, out = self.run_tool(self.pickle("dev", fx.default_config(True)), "--device", "5")
        self.assertEqual(run.returncode, 2)
        self.assertIn("--device 5", run.stderr)
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main()
