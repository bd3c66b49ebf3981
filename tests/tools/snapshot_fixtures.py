#!/usr/bin/env python3
"""PyTorch memory snapshots for the importer's tests, built as dicts with the exact structure
torch.cuda.memory._snapshot() returns (shared reference caching_allocator.md §5.2) and pickled
with Python's own pickle module, as torch.cuda.memory._dump_snapshot does.

Two PyTorch generations are modelled:
  old (about 2.1, Module.cpp 87a08c1): trace entries {action, addr, size, stream, frames}, no
      time_us, no allocator_settings, segments without is_expandable;
  new (2.5+, memory_snapshot.cpp 127b7ad): time_us, compile_context, user_metadata on entries;
      segments with is_expandable, segment_pool_id tuples, shared frame lists (pickle memo
      references); allocator_settings.

The allocator decisions in the scenarios are those of caching_allocator.md §6 (default config,
§6.1; expandable segments, §6.2), so bucketsim's caching model should agree with them exactly.

    snapshot_fixtures.py OUTDIR    writes every scenario as OUTDIR/<name>.pickle
"""

import os
import pickle
import sys

MIB = 1 << 20
BASE = 0x7F3A00000000  # device addresses are above 2^31 (pickled with LONG1)
STREAM0 = 0
STREAM1 = 0x55D0C0DE1230  # a raw cudaStream_t
FRAMES = [{"filename": "train.py", "line": 42, "name": "forward"}]  # one shared object
# PyTorch writes allocator_settings.max_split_size as int64_t(max_split_size): the default
# (no limit, SIZE_MAX) is -1 in every snapshot (caching_allocator.md §5.2).
NO_LIMIT = -1


class Recorder:
    """Builds a device trace the way one PyTorch generation writes its entries."""

    def __init__(self, new):
        self.new = new
        self.entries = []
        self.clock = 1_700_000_000_000_000

    def add(self, action, **fields):
        e = {"action": action}
        e.update(fields)
        if self.new:
            self.clock += 7
            e["time_us"] = self.clock
            e["compile_context"] = "N/A"
            e["user_metadata"] = ""
        if action in ("alloc", "free_requested", "free_completed"):
            e["frames"] = FRAMES
        self.entries.append(e)
        return self

    def seg(self, action, addr, size, stream=STREAM0):
        return self.add(action, addr=addr, size=size, stream=stream)

    def alloc(self, addr, size, stream=STREAM0):
        return self.add("alloc", addr=addr, size=size, stream=stream)

    def free(self, addr, size, stream=STREAM0):
        self.add("free_requested", addr=addr, size=size, stream=stream)
        return self.add("free_completed", addr=addr, size=size, stream=stream)


def segment(new, address, total, stream, blocks, expandable=False):
    """blocks: [(size, requested, state)] from the segment start, contiguous."""
    out, at = [], address
    for size, requested, state in blocks:
        out.append({"address": at, "size": size, "requested_size": requested, "state": state,
                    "frames": FRAMES if state != "inactive" else []})
        at += size
    assert at == address + total, (hex(address), at - address, total)
    seg = {"device": 0, "address": address, "total_size": total, "stream": stream,
           "segment_type": "large",
           "allocated_size": sum(b[0] for b in blocks if b[2] == "active_allocated"),
           "active_size": sum(b[0] for b in blocks if b[2] != "inactive"),
           "requested_size": sum(b[1] for b in blocks if b[2] != "inactive"),
           "blocks": out, "frames": []}
    if new:
        seg["segment_pool_id"] = (0, 0)
        seg["is_expandable"] = expandable
    return seg


def settings(expandable=False, conf=""):
    return {"PYTORCH_CUDA_ALLOC_CONF": conf, "max_split_size": NO_LIMIT,
            "garbage_collection_threshold": 0.0, "expandable_segments": expandable,
            "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {str(1 << k): 0 for k in range(16)}}


def default_config(new):
    """§6.1: A 25 MiB, B 12.5 MiB, free A, C 30 MiB, D 20 MiB (reuses A's segment, split); the
    new generation then frees C and calls empty_cache (segment_free of C's 30 MiB segment)."""
    s1, s2, s3 = BASE, BASE + 0x2000000, BASE + 0x4000000
    r = Recorder(new)
    r.seg("segment_alloc", s1, 26 * MIB).alloc(s1, 25 * MIB)
    r.seg("segment_alloc", s2, 14 * MIB).alloc(s2, 12 * MIB + MIB // 2)
    r.free(s1, 25 * MIB)
    r.seg("segment_alloc", s3, 30 * MIB).alloc(s3, 30 * MIB)
    r.alloc(s1, 20 * MIB)
    segments = [
        segment(new, s1, 26 * MIB, STREAM0,
                [(20 * MIB, 20 * MIB, "active_allocated"), (6 * MIB, 0, "inactive")]),
        segment(new, s2, 14 * MIB, STREAM0,
                [(12 * MIB + MIB // 2, 12 * MIB + MIB // 2, "active_allocated"),
                 (MIB + MIB // 2, 0, "inactive")]),
    ]
    if new:
        r.free(s3, 30 * MIB)
        r.seg("segment_free", s3, 30 * MIB)
    else:
        segments.append(segment(new, s3, 30 * MIB, STREAM0,
                                [(30 * MIB, 30 * MIB, "active_allocated")]))
    snap = {"segments": segments, "device_traces": [r.entries]}
    if new:
        snap["allocator_settings"] = settings()
        snap["external_annotations"] = []
    return snap


def expandable():
    """§6.2 with expandable_segments:True, then empty_cache unmaps the whole free page."""
    s = BASE
    r = Recorder(True)
    r.seg("segment_map", s, 40 * MIB).alloc(s, 25 * MIB)
    r.alloc(s + 25 * MIB, 12 * MIB + MIB // 2)
    r.free(s, 25 * MIB)
    r.seg("segment_map", s + 40 * MIB, 40 * MIB).alloc(s + 37 * MIB + MIB // 2, 30 * MIB)
    r.seg("segment_unmap", s, 20 * MIB)
    segments = [segment(True, s + 20 * MIB, 60 * MIB, STREAM0,
                        [(5 * MIB, 0, "inactive"),
                         (12 * MIB + MIB // 2, 12 * MIB + MIB // 2, "active_allocated"),
                         (30 * MIB, 30 * MIB, "active_allocated"),
                         (12 * MIB + MIB // 2, 0, "inactive")], expandable=True)]
    return {"segments": segments, "device_traces": [r.entries],
            "allocator_settings": settings(True, "expandable_segments:True")}


def streams_and_deferred_free():
    """Two streams (§6.3: a block freed on S0 is not reused by S1), a small-pool block freed
    while in use on another stream (free_completed only at a later malloc), a snapshot call and
    an OOM. Old generation (no time_us)."""
    small = BASE
    large0, large1 = BASE + 0x10000000, BASE + 0x20000000
    r = Recorder(False)
    r.seg("segment_alloc", large0, 20 * MIB).alloc(large0, 5 * MIB)
    r.free(large0, 5 * MIB)
    r.seg("segment_alloc", large1, 20 * MIB, STREAM1).alloc(large1, 5 * MIB, STREAM1)
    r.seg("segment_alloc", small, 2 * MIB).alloc(small, 1000)
    r.add("free_requested", addr=small, size=1000, stream=STREAM0)  # record_stream'ed: deferred
    r.add("snapshot", addr=0, size=5 * MIB + 1024, stream=0)
    r.add("free_completed", addr=small, size=1000, stream=STREAM0)  # at the next malloc
    r.alloc(small, 512)
    r.add("oom", device_free=3 * MIB, size=80 * 1024 * MIB, stream=STREAM0)
    segments = [
        segment(False, small, 2 * MIB, STREAM0,
                [(512, 512, "active_allocated"), (2 * MIB - 512, 0, "inactive")]),
        segment(False, large0, 20 * MIB, STREAM0, [(20 * MIB, 0, "inactive")]),
        segment(False, large1, 20 * MIB, STREAM1,
                [(5 * MIB, 5 * MIB, "active_allocated"), (15 * MIB, 0, "inactive")]),
    ]
    return {"segments": segments, "device_traces": [r.entries]}


def wrapped():
    """The ring buffer wrapped: the kept trace starts with a free of a block allocated before it,
    and a live block (X) the trace never mentions. Segment S1 (20 MiB) existed before the start;
    S2 is made in the kept window."""
    s1, s2 = BASE, BASE + 0x2000000
    r = Recorder(True)
    r.free(s1, 4 * MIB)                                # lost alloc: alive at the start
    r.seg("segment_alloc", s2, 2 * MIB).alloc(s2, 4096)
    segments = [
        segment(True, s1, 20 * MIB, STREAM0,
                [(4 * MIB, 0, "inactive"), (3 * MIB, 3 * MIB, "active_allocated"),
                 (13 * MIB, 0, "inactive")]),
        segment(True, s2, 2 * MIB, STREAM0, [(4096, 4096, "active_allocated"),
                                             (2 * MIB - 4096, 0, "inactive")]),
    ]
    return {"segments": segments, "device_traces": [r.entries],
            "allocator_settings": settings()}


def two_devices():
    """Events on devices 0 and 1: the importer takes device 0 unless told."""
    snap = default_config(True)
    other = Recorder(True).seg("segment_alloc", BASE, 2 * MIB).alloc(BASE, 512).entries
    snap["device_traces"].append(other)
    snap["segments"].append(dict(segment(True, BASE, 2 * MIB, STREAM0,
                                         [(512, 512, "active_allocated"),
                                          (2 * MIB - 512, 0, "inactive")]), device=1))
    return snap


def with_newer_keys(snap):
    """The same snapshot as a newer PyTorch writes it: keys the importer does not know in
    allocator_settings, segments, blocks, frames and trace entries, and at the top level."""
    settings = snap.setdefault("allocator_settings", {"max_split_size": NO_LIMIT})
    settings["graph_capture_record_stream_reuse"] = False
    settings["trace_alloc_max_entries"] = 100000
    settings["trace_alloc_overflowed"] = False
    settings["some_future_setting"] = {"nested": [1, 2.5, None]}
    snap["external_annotations"] = [{"name": "step", "stage": "START", "device": 0,
                                     "time_us": 1_700_000_000_000_001}]
    snap["some_future_top_level"] = ("a", 1)
    for seg in snap["segments"]:
        seg["segment_pool_id"] = (0, 0)
        seg["future_segment_key"] = 3.5
        for b in seg["blocks"]:
            b["future_block_key"] = None
            b["frames"] = [dict(f, fx_node_op="call_function", fx_node_name="mm")
                           for f in b.get("frames", [])]
    for trace in snap["device_traces"]:
        for e in trace:
            e["compile_context"] = "N/A"
            e["user_metadata"] = {"stage": "forward"}
            e["future_entry_key"] = [0]
    return snap


SCENARIOS = {
    "default-old": lambda: default_config(False),
    "default-new": lambda: default_config(True),
    "expandable": expandable,
    "streams-deferred": streams_and_deferred_free,
    "wrapped": wrapped,
    "two-devices": two_devices,
}


def write_all(outdir):
    os.makedirs(outdir, exist_ok=True)
    for name, build in SCENARIOS.items():
        with open(os.path.join(outdir, f"{name}.pickle"), "wb") as f:
            pickle.dump(build(), f)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: snapshot_fixtures.py OUTDIR")
    write_all(sys.argv[1])
