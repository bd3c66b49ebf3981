#!/usr/bin/env python3
"""Live bytes of one real PyTorch training step, measured at bucketsim's marks.

One step is: build the model and its batch and optimizer ("start"), forward and the loss
("after fwd"), loss.backward() ("after bwd"), optimizer.step() ("after step"),
zero_grad(set_to_none=True) and dropping the loss ("done"). bucketsim's emitter puts its marks at
the same places (src/gen/fsdp_program.cc), so a replay at world size 1 can be compared mark by
mark and phase by phase (forward = after "start" up to "after fwd", backward up to "after bwd",
step up to "after step", zero_grad up to "done").

On CPU the allocator is observed through torch.profiler(profile_memory=True): every allocation
and free made while profiling is an event with its size, in the order they happened (one thread;
the profiler keeps them in order). Marks are found by a sentinel: a MARK_BYTES uint8 tensor made
and dropped at once, whose two events are left out of every figure. Each figure is given twice:
raw (the sum of the requested sizes) and rounded (each allocation rounded up to 512 B, as
torch.cuda.memory_allocated and bucketsim's exact memory model count it). On CUDA the figures are
torch.cuda.memory_allocated() at each mark and torch.cuda.max_memory_allocated() since the
previous mark (reset at every mark).

    from torch_memory import measure_step
    result = measure_step(build_model, make_batch, make_optimizer, device="cpu")
    result["marks"]        -> [{"name": "start", "allocated_bytes": ...}, ...]
    result["phase_peaks"]  -> [{"phase": "forward", "peak_allocated_bytes": ...}, ...]

    torch_memory.py FILE.py:build_model --batch FILE.py:make_batch [--optimizer sgd]
        [--optimizer-impl for-loop|foreach|fused] [--weight-decay X] [--json]

Needs only torch (Debian's python3-torch 1.13 under /usr/bin/python3 here).
"""

import argparse
import json
import sys
from collections.abc import Mapping

import torch

MARKS = ("start", "after fwd", "after bwd", "after step", "done")
# The phase that ends at each mark after the first.
PHASES = ("forward", "backward", "step", "zero_grad")
MARK_BYTES = 1234567  # odd, unlikely to be a real tensor's size; checked to occur as a pair
BLOCK_BYTES = 512     # CUDA caching allocator's granularity (caching_allocator.md §2)


def round_up(n, to=BLOCK_BYTES):
    return (n + to - 1) // to * to


class LossError(ValueError):
    """The forward's output holds no loss bucketsim can take: the message says what it held."""


class BatchError(ValueError):
    """make_batch() returned what cannot be the forward's arguments: the message says why."""


def to_loss(out):
    """The loss backward() is called on, from the forward's output: a scalar tensor is the loss;
    another tensor's mean is (a mean over an activation, as fairscale's memory test and
    bucketsim's presets do); a tuple or list gives its first element (Hugging Face's
    return_dict=False puts the loss first); a mapping (a dict, Hugging Face's ModelOutput) its
    "loss", which must be there: the mean of some other entry would be a guess."""
    if isinstance(out, (tuple, list)):
        if not out:
            raise LossError(f"the forward returned an empty {type(out).__name__}")
        out = out[0]
    if isinstance(out, Mapping):
        loss = out.get("loss")
        if loss is None:
            keys = ", ".join(repr(k) for k in out.keys()) or "none"
            raise LossError(f"the forward returned a {type(out).__name__} without a 'loss' "
                            f"(its keys: {keys}): give the model what it computes its loss "
                            "from (e.g. 'labels' in the batch dict), or return the loss")
        out = loss
    if not isinstance(out, torch.Tensor):
        raise LossError(f"the forward returned {type(out).__name__}, not a tensor, a tuple or a "
                        "dict with a 'loss'")
    return out if out.dim() == 0 else out.mean()


# Values a batch may pass to the forward as they are (not tensors: no memory of their own).
PLAIN = (bool, int, float, str, type(None))


def as_call(batch):
    """The forward's (args, kwargs) from what make_batch() returned: a tensor is the one
    argument, a tuple or list the positional arguments, a mapping the keyword arguments
    (model(**batch), the Hugging Face convention). Each value is a tensor or a plain Python
    value (bool, int, float, str, None)."""
    if isinstance(batch, Mapping):
        args, kwargs = [], dict(batch)
        bad = [k for k in kwargs if not isinstance(k, str)]
        if bad:
            raise BatchError(f"make_batch() returned a {type(batch).__name__} with key {bad[0]!r}: "
                             "keyword arguments are named by strings")
    elif isinstance(batch, (tuple, list)):
        args, kwargs = list(batch), {}
    else:
        args, kwargs = [batch], {}
    for where, value in [(f"[{i}]", v) for i, v in enumerate(args)] + \
                        [(f"[{k!r}]", v) for k, v in kwargs.items()]:
        if not isinstance(value, (torch.Tensor,) + PLAIN):
            raise BatchError(f"make_batch(){where} is a {type(value).__name__}: the forward's "
                             "arguments must be tensors or plain values (bool, int, float, str, "
                             "None); make_batch() returns a tensor, a tuple of them, or a dict "
                             "of keyword arguments")
    return args, kwargs


def batch_on(call, device):
    """(args, kwargs) with every tensor moved to `device`."""
    args, kwargs = call
    move = (lambda v: v.to(device) if isinstance(v, torch.Tensor) else v)
    return [move(v) for v in args], {k: move(v) for k, v in kwargs.items()}


OPTIMIZERS = ("sgd", "sgd-momentum", "adam", "adamw")
# torch.optim's three implementations of a step: a Python loop over the parameters (foreach=False),
# torch._foreach_* ops over all of them (foreach=True), one fused kernel (fused=True).
IMPLS = ("for-loop", "foreach", "fused")


class OptimizerError(ValueError):
    """An optimizer, implementation or setting this torch cannot make: the message says why."""


def _optimizer_class(name):
    if name not in OPTIMIZERS:
        raise OptimizerError(f"unknown optimizer '{name}' (expected {', '.join(OPTIMIZERS)})")
    return {"sgd": torch.optim.SGD, "sgd-momentum": torch.optim.SGD, "adam": torch.optim.Adam,
            "adamw": torch.optim.AdamW}[name]


def default_weight_decay(name):
    """torch's default weight decay of the optimizer `name` (0 for SGD and Adam, 0.01 for
    AdamW), read from its constructor."""
    import inspect
    return float(inspect.signature(_optimizer_class(name).__init__)
                 .parameters["weight_decay"].default)


def default_impl(device):
    """The implementation torch picks when neither foreach nor fused is given: torch 2.x's
    _default_to_fused_or_foreach picks foreach where every parameter is on CUDA, else the loop;
    torch 1.x always the loop (torch 1.13's Adam, AdamW and SGD set foreach = False when it is
    None)."""
    if device == "cuda" and int(torch.__version__.split(".")[0]) >= 2:
        return "foreach"
    return "for-loop"


def _fused_devices():
    """The device types with fused optimizer kernels in this torch (torch 1.13 has no list: its
    only fused optimizer, Adam, runs on CUDA alone)."""
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices
    except ImportError:
        return ["cuda"]
    return _get_fused_kernels_supported_devices()


def make_optimizer(name, params, lr=0.01, impl=None, weight_decay=None):
    """sgd (no state), sgd-momentum (one buffer per parameter), adam and adamw (two, and a step
    count per parameter): bucketsim's --optimizer names, with bucketsim's --optimizer-impl names
    (IMPLS) and a weight decay (None: torch's default, default_weight_decay). impl None is what
    this tool always made: torch's default, but adam's loop asked for by name (foreach=False),
    which is torch's default on the CPU anyway."""
    params = list(params)
    cls = _optimizer_class(name)
    kwargs = {"lr": lr}
    if name == "sgd-momentum":
        kwargs["momentum"] = 0.9
    if weight_decay is not None:
        kwargs["weight_decay"] = weight_decay
    if impl is None and name == "adam":
        impl = "for-loop"
    if impl == "for-loop":
        kwargs["foreach"] = False
    elif impl == "foreach":
        kwargs["foreach"] = True
    elif impl == "fused":
        import inspect
        if "fused" not in inspect.signature(cls.__init__).parameters:
            raise OptimizerError(f"--optimizer-impl fused: torch {torch.__version__}'s "
                                 f"{cls.__name__} has no fused implementation (later torch "
                                 "versions have one)")
        devices = {p.device.type for p in params} - set(_fused_devices())
        if devices:
            raise OptimizerError(f"--optimizer-impl fused: torch {torch.__version__}'s fused "
                                 f"{cls.__name__} does not run on "
                                 f"{', '.join(sorted(devices))} (only on "
                                 f"{', '.join(_fused_devices())})")
        kwargs["fused"] = True
    elif impl is not None:
        raise OptimizerError(f"unknown optimizer implementation '{impl}' (expected "
                             f"{', '.join(IMPLS)})")
    return cls(params, **kwargs)


def run_step(build_model, make_batch, optimizer, device, mark, iterations=1, impl=None,
             weight_decay=None):
    """Training steps with `mark(name)` called at each of MARKS: "start" once, then the other
    marks in every one of `iterations` steps; the optimizer is make_optimizer(optimizer, ...,
    impl=impl, weight_decay=weight_decay)."""
    model = build_model().to(device)
    model.train()
    args, kwargs = batch_on(as_call(make_batch()), device)
    opt = make_optimizer(optimizer, model.parameters(), impl=impl, weight_decay=weight_decay)
    mark("start")
    for _ in range(iterations):
        loss = to_loss(model(*args, **kwargs))
        mark("after fwd")
        loss.backward()
        mark("after bwd")
        opt.step()
        mark("after step")
        opt.zero_grad(set_to_none=True)
        del loss
        mark("done")
    return model, (args, kwargs), opt  # alive until the caller has read its figures


def _sentinel():
    t = torch.empty(MARK_BYTES, dtype=torch.uint8)
    del t


def _figures_from_events(sizes, expected=len(MARKS)):
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
        keep = run_step(build_model, make_batch, optimizer, "cpu", lambda name: _sentinel(),
                        **settings)
    del keep
    cpu = torch._C._autograd.DeviceType.CPU
    sizes = [e.nbytes() for e in prof.profiler.kineto_results.events()
             if e.name() == "[memory]" and e.device_type() == cpu]
    return _figures_from_events(sizes)


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


def load_function(spec, what):
    """FILE.py:NAME -> the function NAME defined in FILE.py (imported as a module)."""
    import importlib.util
    import os
    if ":" not in spec:
        raise SystemExit(f"{what}: '{spec}' must be FILE.py:FUNCTION")
    path, name = spec.rsplit(":", 1)
    if not os.path.isfile(path):
        raise SystemExit(f"{what}: no such file '{path}'")
    module_name = "user_" + os.path.splitext(os.path.basename(path))[0]
    if module_name in sys.modules:
        module = sys.modules[module_name]
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module
        try:
            loader_spec.loader.exec_module(module)
        except Exception as e:  # the user's code: say where it failed
            del sys.modules[module_name]
            raise SystemExit(f"{what}: importing '{path}' failed: {type(e).__name__}: {e}")
    fn = getattr(module, name, None)
    if fn is None:
        names = sorted(n for n in dir(module) if callable(getattr(module, n))
                       and not n.startswith("_"))
        raise SystemExit(f"{what}: '{path}' defines no '{name}' (it defines: "
                         f"{', '.join(names) or 'nothing callable'})")
    if not callable(fn):
        raise SystemExit(f"{what}: '{path}:{name}' is not callable")
    return fn


def main(argv=None):
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


if __name__ == "__main__":
    sys.exit(main())
