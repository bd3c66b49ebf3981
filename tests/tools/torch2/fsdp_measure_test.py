#!/usr/bin/env python3
"""The torch 2.6 FSDP oracle (fsdp_measure.py) on the resmlp example at 2 ranks: one FSDP1 and
one FSDP2 configuration, every mark and the forward, backward and step peaks on both ranks,
exactly (the figures are deterministic with the harness's settled collectives; see
fsdp_measure.py's docstring), and the shape of the collective log.

Run by ctest (Tools.Torch2FsdpMeasure) with the host's /usr/bin/python3, which calls
tools/torch2.sh; exit code 77 (skipped) when `tools/torch2.sh status` says the root cannot be
used. 73 s on 2 cores (2026-12-02).
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
TORCH2 = os.path.join(ROOT, "tools", "torch2.sh")
MODEL = os.path.join(ROOT, "tools", "examples", "resmlp.py")

# Measured on 2026-12-02 (torch 2.6.0+debian, 2 ranks, SGD): bytes rounded to 512 per
# allocation, the same on rank 0 and rank 1.
# marks: start, after fwd, after bwd, after step, done; peaks: forward, backward, step
EXPECTED = {
    "fsdp1": ({"marks": [5243904, 55476224, 10480128, 10480128, 5243904],
               "peaks": [59572224, 65772544, 10480128]},
              ["--impl", "fsdp1", "--sharding-strategy", "FULL_SHARD",
               "--backward-prefetch", "pre", "--limit-all-gathers", "on"]),
    "fsdp2": ({"marks": [5244416, 55476736, 10480640, 10480640, 5244416],
               "peaks": [61677056, 65773056, 10480640]},
              ["--impl", "fsdp2", "--reshard-after-forward", "true"]),
}
# The collectives of one step: the root and 4 Block units each all-gathered in forward, the
# 4 Blocks again in backward, and every unit reduce-scattered in backward (FSDP1: one flat
# parameter per unit; FSDP2: one all-gather and one reduce-scatter per unit as well).
EXPECTED_COLLECTIVES = {"all_gather": 9, "reduce_scatter": 5}


def measure(flags):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        run = subprocess.run([TORCH2, "ranks", "2", os.path.join(HERE, "fsdp_measure.py"),
                              f"{MODEL}:build_model", "--batch", f"{MODEL}:make_batch",
                              "--wrap", "Block", *flags, "--json", out],
                             capture_output=True, text=True, cwd=ROOT)
        if run.returncode != 0:
            raise AssertionError(f"fsdp_measure failed ({run.returncode}):\n{run.stderr[-4000:]}")
        with open(out) as f:
            return json.load(f)


class FsdpMeasure(unittest.TestCase):
    def check(self, impl):
        expected, flags = EXPECTED[impl]
        result = measure(flags)
        self.assertEqual(len(result["ranks"]), 2)
        for rank in result["ranks"]:
            marks = [m["allocated_bytes"] for m in rank["marks"]]
            peaks = [p["peak_allocated_bytes"] for p in rank["phase_peaks"][:3]]
            print(f"{impl} rank {rank['rank']}: marks {marks} peaks {peaks}", file=sys.stderr)
            self.assertEqual(marks, expected["marks"], f"{impl} rank {rank['rank']} marks")
            self.assertEqual(peaks, expected["peaks"], f"{impl} rank {rank['rank']} peaks")
            self.assertEqual(rank["settle_timeouts"], 0)
            kinds = {}
            for c in rank["collectives"]:
                kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
                self.assertEqual(c["group_ranks"], [0, 1])
            self.assertEqual(kinds, EXPECTED_COLLECTIVES, f"{impl} rank {rank['rank']}")

    def test_fsdp1_full_shard_backward_pre(self):
        self.check("fsdp1")

    def test_fsdp2_reshard_after_forward(self):
        self.check("fsdp2")


if __name__ == "__main__":
    status = subprocess.run([TORCH2, "status"], capture_output=True, text=True)
    if status.returncode != 0:
        print(f"fsdp_measure_test: {(status.stdout + status.stderr).strip()}: skipped")
        sys.exit(77)
    unittest.main()
