#!/usr/bin/env python3
"""Speed of tools/snapshot_to_trace.py: a synthetic PyTorch memory snapshot of ACTIONS trace
entries (default 1,000,000) is pickled as torch.cuda.memory._dump_snapshot would (shared frame
lists, 0x7f... addresses, time_us), then converted REPEAT times; the best time is reported as MB/s
of pickle and entries/s. With --bucketsim BINARY, `bucketsim validate` of the written trace (its
read, both replays and the segment comparison) is timed as well.

    bench/snapshot_import_bench.py [--actions N] [--repeat R] [--bucketsim build/bucketsim]

Not run by ctest (docs/development.md, "Performance").
"""

import argparse
import os
import pickle
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import snapshot_to_trace  # noqa: E402

MIB = 1 << 20
FRAMES = [{"filename": "model.py", "line": 120, "name": "forward"},
          {"filename": "train.py", "line": 42, "name": "step"}]


def synthetic_snapshot(actions, seed=1):
    """A run on two streams: small (512 B - 1 MiB) and large (1 - 64 MiB) tensors allocated and
    freed in a sliding window, a new segment whenever the (rough) cache has no room, one in 64
    frees deferred by record_stream. Realistic in mix, not an allocator simulation."""
    rng = random.Random(seed)
    streams = [0, 0x55D0C0DE1230]
    entries = []
    clock = 1_700_000_000_000_000
    live = []
    next_addr = 0x7F0000000000
    cached = {s: 0 for s in streams}
    pending = []

    def add(action, **fields):
        nonlocal clock
        clock += rng.randint(1, 50)
        fields.update(action=action, time_us=clock, compile_context="N/A", user_metadata="")
        if action in ("alloc", "free_requested", "free_completed"):
            fields["frames"] = FRAMES
        entries.append(fields)

    while len(entries) < actions - 2 * 257:
        if live and (len(live) > 256 or rng.random() < 0.45):
            addr, size, stream = live.pop(rng.randrange(len(live)))
            add("free_requested", addr=addr, size=size, stream=stream)
            if rng.random() < 1 / 64:
                pending.append((addr, size, stream))
            else:
                add("free_completed", addr=addr, size=size, stream=stream)
            cached[stream] += size
            continue
        stream = rng.choice(streams)
        size = rng.randint(512, MIB) if rng.random() < 0.7 else rng.randint(MIB, 64 * MIB)
        for addr_p, size_p, stream_p in pending:
            add("free_completed", addr=addr_p, size=size_p, stream=stream_p)
        pending.clear()
        if cached[stream] < size:
            seg = max(2 * MIB, (size + 2 * MIB - 1) // (2 * MIB) * (2 * MIB))
            add("segment_alloc", addr=next_addr, size=seg, stream=stream)
            cached[stream] += seg
        add("alloc", addr=next_addr, size=size, stream=stream)
        cached[stream] -= size
        live.append((next_addr, size, stream))
        next_addr += (size + 511) // 512 * 512
    for addr, size, stream in live + pending:  # a consistent end: nothing alive at the dump
        if (addr, size, stream) in live:
            add("free_requested", addr=addr, size=size, stream=stream)
        add("free_completed", addr=addr, size=size, stream=stream)
    return {"segments": [], "device_traces": [entries],
            "allocator_settings": {"expandable_segments": False}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bucketsim", help="also time `bucketsim validate` of the trace")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = os.path.join(tmp, "snapshot.pickle")
        trace = os.path.join(tmp, "trace.json")
        data = synthetic_snapshot(args.actions)
        entries = len(data["device_traces"][0])
        with open(snapshot, "wb") as f:
            pickle.dump(data, f)
        mb = os.path.getsize(snapshot) / 1e6
        best = best_cpu = float("inf")
        for _ in range(args.repeat):
            start, start_cpu = time.perf_counter(), time.process_time()
            if snapshot_to_trace.main([snapshot, "-o", trace]) != 0:
                sys.exit("conversion failed")
            best = min(best, time.perf_counter() - start)
            best_cpu = min(best_cpu, time.process_time() - start_cpu)
        out_mb = os.path.getsize(trace) / 1e6
        print(f"snapshot: {entries} entries, {mb:.1f} MB pickle -> {out_mb:.1f} MB trace")
        print(f"import: best of {args.repeat}: {best:.2f} s = {mb / best:.1f} MB/s of pickle, "
              f"{entries / best / 1e6:.2f} M entries/s (CPU time {best_cpu:.2f} s = "
              f"{mb / best_cpu:.1f} MB/s: the machine may be shared)")
        if args.bucketsim:
            start = time.perf_counter()
            run = subprocess.run([args.bucketsim, "validate", trace], capture_output=True,
                                 text=True)
            took = time.perf_counter() - start
            print(f"bucketsim validate: {took:.2f} s = {out_mb / took:.1f} MB/s of trace "
                  f"(exit {run.returncode})")


if __name__ == "__main__":
    main()
