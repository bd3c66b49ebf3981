"""Live bytes of one real PyTorch training step, measured at bucketsim's marks.

One step is: build the model and its batch and optimizer ("start"), forward and the loss
("after fwd"), loss.backward() ("after bwd"), optimizer.step() ("after step"),
zero_grad(set_to_none=True) and dropping the loss ("done") (step.run_step). bucketsim's emitter
puts its marks at the same places (src/gen/fsdp_emitter.cc), so a replay at world size 1 can be
compared mark by mark and phase by phase (forward = after "start" up to "after fwd", backward up
to "after bwd", step up to "after step", zero_grad up to "done").

On CPU the allocator is observed through torch.profiler(profile_memory=True): every allocation
and free made while profiling is an event with its size, in the order they happened (one thread;
the profiler keeps them in order). Marks are found by a sentinel: a MARK_BYTES uint8 tensor made
and dropped at once, whose two events are left out of every figure. Each figure is given twice:
raw (the sum of the requested sizes) and rounded (each allocation rounded up to 512 B, as
torch.cuda.memory_allocated and bucketsim's exact memory model count it). On CUDA the figures are
torch.cuda.memory_allocated() at each mark and torch.cuda.max_memory_allocated() since the
previous mark (reset at every mark).

    from recorder.measure import measure_step
    result, raw = measure_step(build_model, make_batch, "sgd", device="cpu")
    result["marks"]        -> [{"name": "start", "allocated_bytes": ...}, ...]
    result["phase_peaks"]  -> [{"phase": "forward", "peak_allocated_bytes": ...}, ...]

The recorder's `measured` block is measure_step's result (measured_block); the measuring has a
command of its own:

    tools/torch_memory.py FILE.py:build_model --batch FILE.py:make_batch [--optimizer sgd]
        [--optimizer-impl for-loop|foreach|fused] [--weight-decay X] [--json]

Needs only torch (Debian's python3-torch 1.13 under /usr/bin/python3 here).
"""

import argparse
import json
import sys

import torch

from .errors import UsageError
from .load import load_function
from .optimizer import IMPLS, OPTIMIZERS, OptimizerError, measured_step, step_note
from .step import run_step

MARKS = ("start", "after fwd", "after bwd", "after step", "done")
# The phase that ends at each mark after the first.
PHASES = ("forward", "backward", "step", "zero_grad")
MARK_BYTES = 1234567  # odd, unlikely to be a real tensor's size; checked to occur as a pair
BLOCK_BYTES = 512     # CUDA caching allocator's granularity (caching_allocator.md §2)


def round_up(n, to=BLOCK_BYTES):
    return (n + to - 1) // to * to


def sentinel():
    """The mark: a MARK_BYTES tensor made and dropped at once (two allocator events)."""
    t = torch.empty(MARK_BYTES, dtype=torch.uint8)
    del t


def figures_from_events(sizes, expected=len(MARKS)):
    """Marks and phase peaks from the signed allocation sizes in order (sentinels included):
    `expected` marks, each a (raw, rounded) pair, and a (raw, rounded) peak for each phase
    between two marks."""
    raw = rounded = 0
    marks, peaks = [], []
    peak_raw = peak_rounded = None
    i = 0
    while i < len(sizes):
        n = sizes[i]
        if n == MARK_BYTES and i + 1 < len(sizes) and sizes[i + 1] == -MARK_BYTES:
            if marks:
                peaks.append((peak_raw, peak_rounded))
            marks.append((raw, rounded))
            peak_raw, peak_rounded = raw, rounded
            i += 2
            continue
        raw += n
        rounded += round_up(n) if n > 0 else -round_up(-n)
        if peak_raw is not None:
            peak_raw = max(peak_raw, raw)
            peak_rounded = max(peak_rounded, rounded)
        i += 1
    if len(marks) != expected:
        raise RuntimeError(f"found {len(marks)} mark sentinels in the profile, expected "
                           f"{expected}: is a {MARK_BYTES}-byte tensor part of the model?")
    return marks, peaks


def chrome_trace_memory_events(path):
    """The CPU allocator's [memory] events of a torch 2.x profile written by
    prof.export_chrome_trace, in the order they happened: dicts with bytes (signed),
    total_allocated (the allocator's own running total after the event), addr, tid and ts (us).
    Only this file has each event's address and thread (prof.events() has no memory events in
    2.x, kineto_results.events() only their sizes); torch 1.13 writes no memory events into it.
    Sorted by time, stably: in the file they are already in order."""
    with open(path) as f:
        trace = json.load(f)
    events = []
    for e in trace["traceEvents"]:
        args = e.get("args", {})
        if e.get("name") != "[memory]" or args.get("Device Type", 0) != 0:
            continue
        events.append({"bytes": int(args["Bytes"]), "total_allocated": int(args["Total Allocated"]),
                       "addr": int(args["Addr"]), "tid": e.get("tid"), "ts": float(e["ts"])})
    events.sort(key=lambda e: e["ts"])
    return events


def _measure_cpu(build_model, make_batch, optimizer, settings):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        keep = run_step(build_model, make_batch, optimizer, "cpu", lambda name: sentinel(),
                        **settings)
    del keep
    cpu = torch._C._autograd.DeviceType.CPU
    sizes = [e.nbytes() for e in prof.profiler.kineto_results.events()
             if e.name() == "[memory]" and e.device_type() == cpu]
    return figures_from_events(sizes)


def _measure_cuda(build_model, make_batch, optimizer, settings):
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    marks, peaks = [], []

    def mark(name):
        torch.cuda.synchronize()
        now = torch.cuda.memory_allocated() - base
        if marks:
            peak = torch.cuda.max_memory_allocated() - base
            peaks.append((peak, peak))
        marks.append((now, now))
        torch.cuda.reset_peak_memory_stats()

    keep = run_step(build_model, make_batch, optimizer, "cuda", mark, **settings)
    del keep
    return marks, peaks


def measure_step(build_model, make_batch, optimizer="sgd", device="cpu", impl=None,
                 weight_decay=None):
    """Runs one training step of build_model() on make_batch() with
    make_optimizer(optimizer, ..., impl=impl, weight_decay=weight_decay) and returns
    {"device", "torch_version", "marks": [...], "phase_peaks": [...], "raw": {...}}: the program
    format's `measured` block (traces/program-v1.schema.json), plus raw sums on CPU."""
    settings = {"impl": impl, "weight_decay": weight_decay}
    if device == "cpu":
        marks, peaks = _measure_cpu(build_model, make_batch, optimizer, settings)
        note = ("CPU, torch.profiler(profile_memory=True): every allocation rounded up to 512 B as "
                "torch.cuda.memory_allocated counts it")
    elif device == "cuda":
        marks, peaks = _measure_cuda(build_model, make_batch, optimizer, settings)
        note = ("CUDA: torch.cuda.memory_allocated at each mark, max_memory_allocated since the "
                "previous mark, less what was allocated before the model was built")
    else:
        raise ValueError(f"cannot measure on device '{device}' (cpu or cuda)")
    result = {
        "device": device,
        "torch_version": torch.__version__,
        "world_size": 1,
        "iterations": 1,
        "note": note,
        "marks": [{"name": name, "iteration": 0, "allocated_bytes": m[1]}
                  for name, m in zip(MARKS, marks)],
        "phase_peaks": [{"phase": phase, "iteration": 0, "peak_allocated_bytes": p[1]}
                        for phase, p in zip(PHASES, peaks)],
    }
    raw = {"marks": {name: m[0] for name, m in zip(MARKS, marks)},
           "phase_peaks": {phase: p[0] for phase, p in zip(PHASES, peaks)}}
    return result, raw


def measured_block(build_model, make_batch, key, device):
    """The program's `measured` block: one step of build_model() on make_batch() on `device`,
    with the optimizer of the program's optimizer key (optimizer.measured_step), which the
    note names."""
    step = measured_step(key, device)
    try:
        measured, _ = measure_step(build_model, make_batch, step["name"], device, step["impl"],
                                   step["weight_decay"])
    except OptimizerError as e:
        raise UsageError(f"{e}; --no-measure records the program without running the step")
    measured["note"] += step_note(step, key)
    return measured


def main(argv=None):
    """The measuring command (tools/torch_memory.py): prints the figures, or JSON."""
    parser = argparse.ArgumentParser(description="Measure the live bytes of one real training "
                                                 "step at bucketsim's marks.")
    parser.add_argument("model", help="FILE.py:FUNCTION returning the nn.Module")
    parser.add_argument("--batch", required=True, help="FILE.py:FUNCTION returning the input(s)")
    parser.add_argument("--optimizer", default="sgd", choices=OPTIMIZERS)
    parser.add_argument("--optimizer-impl", choices=IMPLS,
                        help="torch.optim's implementation of the step (default: torch's, but "
                             "adam's for-loop)")
    parser.add_argument("--weight-decay", type=float, metavar="X",
                        help="the optimizer's weight decay (default: torch's, 0.01 for adamw, "
                             "else 0)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    build = load_function(args.model, "model")
    batch = load_function(args.batch, "--batch")
    try:
        result, raw = measure_step(build, batch, args.optimizer, args.device,
                                   args.optimizer_impl, args.weight_decay)
    except OptimizerError as e:
        print(f"torch_memory: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"measured": result, "raw": raw}, indent=2))
        return 0
    for m in result["marks"]:
        print(f"{m['name']:>10}: {m['allocated_bytes']:>14,} B")
    for p in result["phase_peaks"]:
        print(f"peak {p['phase']:>9}: {p['peak_allocated_bytes']:>14,} B")
    return 0
