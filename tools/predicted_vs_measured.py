#!/usr/bin/env python3
"""bucketsim's prediction for a world-size-1 trace beside what real PyTorch measured.

    tools/predicted_vs_measured.py TRACE --measured MODEL.json [--bucketsim BIN] [--json]

TRACE is a trace of one iteration at world size 1 (`bucketsim gen program MODEL.json
--world-size 1 --iterations 1 ...` or a preset with the same options); MODEL.json is the
recorder's program (its `measured` block) or a bare measured block (tools/torch_memory.py
--json). The prediction is `bucketsim compare TRACE --policy unbucketed --allocator exact`:
"start" is the forward phase's start_bytes, "after fwd", "after bwd", "after step" are the
trace's marks, "done" the zero_grad phase's end_bytes; the phase peaks are the forward and
backward phases' peak_bytes. Prints one line per figure with the relative difference
(predicted - measured) / measured.
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def predicted_figures(trace, bucketsim=None, policy="unbucketed"):
    """{"marks": {name: bytes}, "phase_peaks": {phase: bytes}} of iteration 0 of `trace` replayed
    under `policy` (fsdp1 and fsdp2 for traces emitted for PyTorch's FSDP)."""
    bucketsim = bucketsim or os.environ.get("BUCKETSIM") or os.path.join(ROOT, "build",
                                                                          "bucketsim")
    run = subprocess.run([bucketsim, "compare", trace, "--policy", policy, "--allocator",
                          "exact", "--format", "json"], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"bucketsim compare {trace} failed ({run.returncode}): {run.stderr}")
    report = json.loads(run.stdout)
    policy = report["policies"][0]
    phases = [p for p in policy["phases"] if p["iteration"] == 0]
    by_phase = {p["phase"]: p for p in phases}
    marks = {"start": by_phase["forward"]["start_bytes"]}
    for m in policy["marks"]:
        if m.get("iteration", 0) == 0 and m["name"] not in marks:
            marks[m["name"]] = m["allocated_bytes"]
    marks["done"] = by_phase["zero_grad"]["end_bytes"]
    peaks = {phase: by_phase[phase]["peak_bytes"] for phase in ("forward", "backward", "step",
                                                                 "zero_grad") if phase in by_phase}
    return {"marks": marks, "phase_peaks": peaks}


def measured_figures(measured):
    if "measured" in measured:
        measured = measured["measured"]
    return {"marks": {m["name"]: m["allocated_bytes"] for m in measured["marks"]},
            "phase_peaks": {p["phase"]: p["peak_allocated_bytes"]
                            for p in measured["phase_peaks"]}}


def side_by_side(predicted, measured):
    """[(kind, name, measured, predicted, relative difference)] for every measured figure."""
    rows = []
    for kind in ("marks", "phase_peaks"):
        for name, real in measured[kind].items():
            pred = predicted[kind].get(name)
            rel = None if pred is None or real == 0 else (pred - real) / real
            rows.append((kind, name, real, pred, rel))
    return rows


def check_within(predicted, measured, limits, digits=2):
    """The oracle tests' comparison: (report, failures). `limits` has a relative limit for
    "marks" (every mark) and for each phase peak it checks (a phase it lacks is shown, not
    checked); `report` has one line per figure, `failures` one per figure beyond its limit or
    without a prediction."""
    rows = side_by_side(predicted, measured)
    report = "\n".join(f"  {kind:11} {name:10} measured {real:>11,} predicted "
                       f"{pred if pred is not None else '-':>11,} {100 * rel:+7.{digits}f}%"
                       for kind, name, real, pred, rel in rows if rel is not None)
    failures = []
    for kind, name, real, pred, rel in rows:
        limit = limits["marks"] if kind == "marks" else limits.get(name)
        if limit is None:
            continue
        if pred is None:
            failures.append(f"no predicted {kind} {name}")
        elif abs(rel) > limit:
            failures.append(f"{kind} {name}: measured {real}, predicted {pred} "
                            f"({100 * rel:+.{digits}f}%, limit {100 * limit}%)")
    return report, failures


def main(argv=None):
    parser = argparse.ArgumentParser(description="Predicted beside measured at world size 1.")
    parser.add_argument("trace")
    parser.add_argument("--measured", required=True,
                        help="the recorder's program (with `measured`) or a measured block")
    parser.add_argument("--bucketsim", default=None, help="the binary (default build/bucketsim)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with open(args.measured) as f:
        measured = json.load(f)
    if "measured" not in measured and "marks" not in measured:
        print(f"predicted_vs_measured: error: {args.measured} has no measured block (record on "
              "cpu or cuda)", file=sys.stderr)
        return 2
    rows = side_by_side(predicted_figures(args.trace, args.bucketsim), measured_figures(measured))
    if args.json:
        print(json.dumps([dict(zip(("kind", "name", "measured_bytes", "predicted_bytes",
                                    "relative_difference"), r)) for r in rows], indent=1))
        return 0
    print(f"{'figure':<22} {'measured B':>14} {'predicted B':>14} {'diff':>8}")
    for kind, name, real, pred, rel in rows:
        label = name if kind == "marks" else f"peak {name}"
        diff = "" if rel is None else f"{100 * rel:+.2f}%"
        print(f"{label:<22} {real:>14,} {pred if pred is not None else '-':>14,} {diff:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
