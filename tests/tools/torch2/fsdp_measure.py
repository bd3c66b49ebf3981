#!/usr/bin/env python3
"""Live bytes of real FSDP training (torch 2.6's FSDP1 and FSDP2, CPU, gloo), measured on every
rank at bucketsim's marks: the oracle of the sharded predictions.

    tools/torch2.sh ranks 2 tests/tools/torch2/fsdp_measure.py \
        tools/examples/resmlp.py:build_model --batch tools/examples/resmlp.py:make_batch \
        --wrap Block --impl fsdp1 --sharding-strategy FULL_SHARD --backward-prefetch pre \
        --json out.json

Each rank builds the model (seeded: every rank the same), wraps every module whose class is
named by --wrap as its own unit and then the root (FSDP1: ModuleWrapPolicy, device_id=cpu;
FSDP2: fully_shard on each such module, then on the root, with the CPU workarounds of
fsdp2_cpu_workarounds.py), builds the optimizer and the batch, and runs --iterations training
steps exactly as tools/recorder/measure.py does (run_step: the same marks "start", "after fwd",
"after bwd", "after step", "done", the same sentinel tensors, the same loss: the mean of the
output). Everything from before the model is built is under torch.profiler(profile_memory=True);
the figures are read from its Chrome trace (recorder.measure.chrome_trace_memory_events), raw and
with each allocation rounded up to 512 B. Every rank also logs the collectives FSDP issues
(the torch.distributed functions FSDP1 and FSDP2 call in 2.6: all_gather_into_tensor,
reduce_scatter_tensor, all_reduce; all_gather and broadcast as well): kind, bytes, dtype, the
group's ranks, the phase and the order.

Output (--json): {"torch_version", "world_size", "config", "wall_s", "ranks": [{"rank", "marks":
[{"name", "iteration", "allocated_bytes", "allocated_bytes_raw"}], "phase_peaks": [{"phase",
"iteration", "peak_allocated_bytes", "peak_allocated_bytes_raw"}], "collectives": [...],
"unprofiled_frees": [...], "mem_tracker" (with --mem-tracker): {"peak": {category: bytes},
"modules": {fqn: {"peak_forward"|"peak_backward": {category: bytes}}}}}]}.

--mem-tracker (fsdp2) runs one more training step after the profiled ones, outside the
profiler, under torch's own FSDPMemTracker (torch.distributed._tools.fsdp2_mem_tracker): a
second reference that splits the peak by FSDP2's categories ("Sharded Param", "Unsharded
Param", "All Gather", "Reduce Scatter", "Sharded Grad", "Unsharded Grad", "Activation", "Temp",
"OptState", "Inputs", "Buffer", and "Total"), as of its snapshot at the highest total it saw.
It counts the storages of tensors it saw created (under its dispatch mode) or was told of, not
the allocator: tensors from before (the mesh's) and allocations inside gloo are not in it.
Measured on resmlp (fsdp2, 2 ranks): marks, phase peaks and collectives equal with and
without it; the tracked step's collectives are not logged.

The late frees after backward (why the collectives are settled)
-----------------------------------------------------------------
Measured naively (--settle off), live bytes at "after bwd" (and so at "after step" and "done")
vary from run to run and rank to rank in steps of one unit's reduce-scatter input (2,104,320 B
for a Block, 2,054,048 B for the root at world size 2; 9.99, 11.95 and 12.00 MiB seen here
with the mean-of-logits resmlp, 14.0 in the reference). Cause, found in the Chrome
traces (--keep-traces): gloo's reduce_scatter_tensor (c10d::_reduce_scatter_base_, called by
FSDP1's _reduce_grad and FSDP2's foreach_reduce) clones its input on the calling thread
(aten::clone inside the c10d span, recorded) and keeps the clone in its work object; the clone
is freed when the work object dies. The work object has two owners: the caller (c10d's
reduce_scatter_tensor drops it right after work.wait() returns) and the gloo worker thread
that ran it (ProcessGroupGloo::runLoop holds it until it has finished with it, a moment after
marking it complete). Whichever lets go last frees the clone. The profiler records allocator
events only on threads where it is enabled: gloo's worker has it only while it executes a work
(its own temporaries, e.g. all_gather_into_tensor's flat output, 2,104,320 B, appear on the
worker's thread id, allocated and freed), not when it drops the work afterwards, so when the
worker is last the free is never recorded and the profile keeps the clone alive to the end.
Evidence, one FSDP1 FULL_SHARD run without a working settle (10 reduce-scatters on 2 ranks):
9 clones freed on the main thread inside FullyShardedDataParallel._post_backward_hook as the
collective call returned;
1 (rank 1, a Block's) never freed in the profile, that rank's "after bwd" 12.00 MiB and "done"
7.01 MiB where the other rank had 9.99 and 5.00; the allocator's own "Total Allocated" at the
last event equals the sum of the recorded events (7,348,176 B), so no profiled thread freed it.
gc.collect() cannot help (no Python object holds the work by then); a barrier was not tried
and would not order the other worker's release (gloo has 2 worker threads per group). It is
not a leak of FSDP's: settling, which only changes
which thread lets go of the work last, removes it (below).

On a GPU with NCCL the figure would not move: CUDA's caching allocator counts a free in
memory_allocated() on whichever thread makes it (its statistics are per device), record_stream
only delays the block's reuse, and NCCL's reduce-scatter needs no clone of its input.

The harness therefore settles each synchronous collective (--settle on, the default): it calls
the torch.distributed function with async_op=True, waits on the work, waits until every other
thread of the process sleeps (the worker that ran the work then has dropped it: it runs
until it sleeps on its queue, and nothing else wakes a gloo thread while no collective is
queued), and only then drops the work on the main thread and returns None as the synchronous
call does. The collective, its tensors, and FSDP's own references are unchanged; the work dies
where c10d's synchronous call would have dropped it, and its clone's free is recorded there.
Measured: 3 runs of FSDP1 FULL_SHARD (mean-of-logits loss), every rank 9.99 MiB after
backward, and each configuration of the branch's report equal on all ranks; with an earlier
settle that waited for the tensors but not for the work's owner, 2 of 4 ranks were high.
settle_timeouts counts collectives whose wait for sleeping threads timed out (none seen).
The all-gather's temporary on gloo's worker is recorded (it happens while the profiler is
enabled there) and counts in the phase peaks; on NCCL no such copy exists.
"""

import argparse
import inspect
import json
import os
import socket
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from recorder import measure  # noqa: E402
from recorder.load import load_function  # noqa: E402
from recorder.step import run_step, to_loss  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# The torch.distributed functions FSDP1 and FSDP2 issue in 2.6 (fsdp/_flat_param.py,
# _runtime_utils.py, _fully_shard/_fsdp_collectives.py), by the kind bucketsim names them.
COLLECTIVES = {"all_gather_into_tensor": "all_gather", "all_gather": "all_gather",
               "reduce_scatter_tensor": "reduce_scatter", "all_reduce": "all_reduce",
               "broadcast": "broadcast"}
SETTLE_TIMEOUT_S = 10.0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Measure real FSDP1/FSDP2 training memory on every "
                                            "rank (run by tools/torch2.sh ranks N).")
    p.add_argument("model", help="FILE.py:FUNCTION returning the nn.Module")
    p.add_argument("--batch", required=True, help="FILE.py:FUNCTION returning the input(s)")
    p.add_argument("--wrap", action="append", default=[], help="class name of a unit (repeat)")
    p.add_argument("--impl", required=True, choices=["fsdp1", "fsdp2"])
    p.add_argument("--as-built", action="store_true",
                   help="the model function returns the model already wrapped with --impl "
                        "(its units and their settings its own): measured as it is, --wrap and "
                        "the settings below unused (FSDP2's CPU workarounds are applied first)")
    p.add_argument("--optimizer", default="sgd", choices=["sgd", "sgd-momentum", "adam"])
    p.add_argument("--iterations", type=int, default=1)
    p.add_argument("--checkpoint-wrap", action="append", default=[], metavar="CLASS",
                   help="checkpoint every module of this class (repeat) as "
                        "apply_activation_checkpointing does with a checkpoint_wrapper of "
                        "--checkpoint-impl, inside its FSDP unit: FSDP1 wraps first, FSDP2 "
                        "shards the wrapper")
    p.add_argument("--checkpoint-impl", default="reentrant",
                   choices=["reentrant", "no-reentrant"],
                   help="the checkpoint_wrapper's CheckpointImpl: REENTRANT (default here) or "
                        "NO_REENTRANT (apply_activation_checkpointing's own default)")
    p.add_argument("--checkpoint-save", default="none", metavar="SPEC",
                   help="selective checkpointing in each no-reentrant wrapper: a sac_policy.py "
                        "SPEC, as bucketsim's gen program --checkpoint-save")
    p.add_argument("--checkpoint-every", type=int, default=1, metavar="N",
                   help="wrap only the N-th, 2N-th, ... module of --checkpoint-wrap's classes")
    p.add_argument("--checkpoint-early-stop", default="true", choices=["true", "false"])
    p.add_argument("--hsdp-shape", help="R,S: a (replicate, shard) device mesh (HYBRID_SHARD "
                                        "for fsdp1, HSDP for fsdp2)")
    g = p.add_argument_group("fsdp1")
    g.add_argument("--sharding-strategy", default="FULL_SHARD",
                   choices=["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD"])
    g.add_argument("--backward-prefetch", default="pre", choices=["pre", "post", "none"])
    g.add_argument("--forward-prefetch", action="store_true")
    g.add_argument("--limit-all-gathers", default="on", choices=["on", "off"])
    g.add_argument("--use-orig-params", action="store_true")
    g.add_argument("--param-dtype", choices=sorted(DTYPES))
    g.add_argument("--reduce-dtype", choices=sorted(DTYPES))
    g.add_argument("--buffer-dtype", choices=sorted(DTYPES))
    g = p.add_argument_group("fsdp2")
    g.add_argument("--reshard-after-forward", default="true", help="true, false or N")
    g.add_argument("--mp-param-dtype", choices=sorted(DTYPES))
    g.add_argument("--mp-reduce-dtype", choices=sorted(DTYPES))
    g.add_argument("--modules-to-forward-prefetch", type=int, default=0, metavar="N",
                   help="each unit set_modules_to_forward_prefetch(the next N), as PyTorch's "
                        "FSDP2 example")
    g.add_argument("--modules-to-backward-prefetch", type=int, default=0, metavar="N",
                   help="each unit set_modules_to_backward_prefetch(the N before it)")
    g.add_argument("--mp-output-dtype", choices=sorted(DTYPES),
                   help="the root's MixedPrecisionPolicy.output_dtype (the units' have none)")
    p.add_argument("--settle", default="on", choices=["on", "off"],
                   help="wait for gloo's thread to let go of each collective's tensors "
                        "(module docstring); off measures the race")
    p.add_argument("--mem-tracker", action="store_true",
                   help="fsdp2: after the profiled iterations, one more under torch's "
                        "FSDPMemTracker; its peak by category goes under \"mem_tracker\"")
    p.add_argument("--keep-traces", metavar="DIR", help="keep each rank's Chrome trace here")
    p.add_argument("--json", metavar="OUT", help="write the result here (else print it)")
    args = p.parse_args(argv)
    if args.hsdp_shape:
        args.hsdp_shape = tuple(int(n) for n in args.hsdp_shape.split(","))
    if args.mem_tracker and args.impl != "fsdp2":
        p.error("--mem-tracker needs --impl fsdp2 (FSDPMemTracker tracks fully_shard modules)")
    if args.sharding_strategy == "HYBRID_SHARD" and not args.hsdp_shape:
        p.error("--sharding-strategy HYBRID_SHARD needs --hsdp-shape R,S")
    return args


def config_of(args, world_size):
    """The configuration as written in the output: only the options of the chosen impl."""
    common = {"impl": args.impl, "world_size": world_size, "model": args.model,
              "batch": args.batch, "wrap": args.wrap, "optimizer": args.optimizer,
              "iterations": args.iterations, "hsdp_shape": args.hsdp_shape,
              "checkpoint_wrap": args.checkpoint_wrap, "checkpoint_impl": args.checkpoint_impl,
              "checkpoint_save": args.checkpoint_save, "checkpoint_every": args.checkpoint_every,
              "checkpoint_early_stop": args.checkpoint_early_stop,
              "settle": args.settle == "on", "as_built": args.as_built}
    if args.impl == "fsdp1":
        return dict(common, sharding_strategy=args.sharding_strategy,
                    backward_prefetch=args.backward_prefetch,
                    forward_prefetch=args.forward_prefetch,
                    limit_all_gathers=args.limit_all_gathers == "on",
                    use_orig_params=args.use_orig_params, param_dtype=args.param_dtype,
                    reduce_dtype=args.reduce_dtype, buffer_dtype=args.buffer_dtype)
    return dict(common, reshard_after_forward=args.reshard_after_forward,
                mp_param_dtype=args.mp_param_dtype, mp_reduce_dtype=args.mp_reduce_dtype,
                mp_output_dtype=args.mp_output_dtype)


def _dtype(name):
    return DTYPES[name] if name else None


def _mesh(args, world_size):
    from torch.distributed.device_mesh import init_device_mesh
    if args.hsdp_shape:
        return init_device_mesh("cpu", args.hsdp_shape, mesh_dim_names=("replicate", "shard"))
    return init_device_mesh("cpu", (world_size,))


def _unit_classes(model, names):
    classes = {type(m) for m in model.modules() if type(m).__name__ in names}
    missing = set(names) - {c.__name__ for c in classes}
    if missing:
        raise SystemExit(f"--wrap: the model has no module of class {', '.join(sorted(missing))}")
    return classes


def checkpoint_wrap(model, names, impl="reentrant", save="none", every=1, early_stop=True):
    """apply_activation_checkpointing with a checkpoint_wrapper (CheckpointImpl.REENTRANT, or
    NO_REENTRANT for impl "no-reentrant") around each module of the classes `names`
    (torch.distributed.algorithms._checkpoint.checkpoint_wrapper, as PyTorch's FSDP tutorial
    applies it); the model, changed in place. Selective checkpointing as torchtitan applies it:
    `save` a sac_policy.py SPEC (op-level: context_fn), `every` N: only the N-th, 2N-th, ...
    module visited is wrapped (layer-level, torchtitan's selective_ac_option), both with
    preserve_rng_state=False as torchtitan passes it; `early_stop` torch 2.6's global
    set_checkpoint_early_stop (read when each region's forward runs)."""
    import functools
    import torch.utils.checkpoint
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper)
    import sac_policy
    classes = _unit_classes(model, names)
    kwargs = {}
    if save != "none":
        kwargs = {"context_fn": sac_policy.context_fn(save), "preserve_rng_state": False}
    elif every > 1:
        kwargs = {"preserve_rng_state": False}
    torch.utils.checkpoint._enable_checkpoint_early_stop = early_stop
    visited = [0]

    def check(module):
        if not isinstance(module, tuple(classes)):
            return False
        visited[0] += 1
        return visited[0] % every == 0
    apply_activation_checkpointing(
        model, check_fn=check,
        checkpoint_wrapper_fn=functools.partial(
            checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT
            if impl == "reentrant" else CheckpointImpl.NO_REENTRANT, **kwargs))
    return model


def _checkpoint_wrap(model, args):
    return checkpoint_wrap(model, args.checkpoint_wrap, args.checkpoint_impl,
                           args.checkpoint_save, args.checkpoint_every,
                           args.checkpoint_early_stop == "true")


def wrap_fsdp1(model, args, world_size):
    from torch.distributed.fsdp import (BackwardPrefetch, FullyShardedDataParallel,
                                        MixedPrecision, ShardingStrategy)
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    prefetch = {"pre": BackwardPrefetch.BACKWARD_PRE, "post": BackwardPrefetch.BACKWARD_POST,
                "none": None}[args.backward_prefetch]
    mp = None
    if args.param_dtype or args.reduce_dtype or args.buffer_dtype:
        mp = MixedPrecision(param_dtype=_dtype(args.param_dtype),
                            reduce_dtype=_dtype(args.reduce_dtype),
                            buffer_dtype=_dtype(args.buffer_dtype))
    mesh = _mesh(args, world_size) if args.sharding_strategy == "HYBRID_SHARD" else None
    fsdp = FullyShardedDataParallel(
        model, auto_wrap_policy=ModuleWrapPolicy(_unit_classes(model, args.wrap)),
        sharding_strategy=ShardingStrategy[args.sharding_strategy], backward_prefetch=prefetch,
        forward_prefetch=args.forward_prefetch, limit_all_gathers=args.limit_all_gathers == "on",
        use_orig_params=args.use_orig_params, mixed_precision=mp, device_id=torch.device("cpu"),
        device_mesh=mesh)
    # After wrapping: each checkpoint wrapper lands inside its FSDP unit.
    return _checkpoint_wrap(fsdp, args) \
        if args.checkpoint_wrap else fsdp


def wrap_fsdp2(model, args, world_size):
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    import fsdp2_cpu_workarounds
    fsdp2_cpu_workarounds.apply()
    raf = args.reshard_after_forward.lower()
    reshard = {"true": True, "false": False}[raf] if raf in ("true", "false") else int(raf)
    mp = MixedPrecisionPolicy(param_dtype=_dtype(args.mp_param_dtype),
                              reduce_dtype=_dtype(args.mp_reduce_dtype))
    # output_dtype on the root alone (the model's outputs, as `gen --output-dtype`): on every
    # unit, the root's own ops after the last unit would get its outputs in that dtype.
    root_mp = MixedPrecisionPolicy(param_dtype=mp.param_dtype, reduce_dtype=mp.reduce_dtype,
                                   output_dtype=_dtype(args.mp_output_dtype))
    mesh = _mesh(args, world_size)
    classes = _unit_classes(model, args.wrap)
    units = [m for m in model.modules() if type(m) in classes and m is not model]
    if args.checkpoint_wrap:
        # Before sharding, and the wrapper of a unit sharded in its place (as torchtitan does):
        # FSDP2's hooks then run around the checkpoint, as FSDP1's do.
        _checkpoint_wrap(model, args)
        wrapper = {m._checkpoint_wrapped_module: m for m in model.modules()
                   if hasattr(m, "_checkpoint_wrapped_module")}
        units = [wrapper.get(m, m) for m in units]
    for module in units:
        fully_shard(module, mesh=mesh, reshard_after_forward=reshard, mp_policy=mp)
    root = fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=root_mp)
    # Explicit prefetch as pytorch/examples distributed/FSDP2/example.py sets it, over the units
    # in the order the forward calls them (model.modules()'s, for the example models).
    ahead, behind = args.modules_to_forward_prefetch, args.modules_to_backward_prefetch
    for i, unit in enumerate(units):
        if ahead and i < len(units) - ahead:
            unit.set_modules_to_forward_prefetch([units[i + j] for j in range(1, ahead + 1)])
        if behind and i >= behind:
            unit.set_modules_to_backward_prefetch([units[i - j] for j in range(1, behind + 1)])
    return root


class CollectiveLog:
    """Wraps the torch.distributed functions FSDP calls: logs each call with the phase it falls
    in and, with settle, returns only once gloo's thread has let go of its tensors (module
    docstring). Installed on the torch.distributed module, where FSDP looks them up per call."""

    def __init__(self, settle):
        self.settle = settle
        self.entries = []
        self.phase, self.iteration = "init", 0
        self.settle_timeouts = 0

    def install(self):
        for name, kind in COLLECTIVES.items():
            setattr(dist, name, self._wrap(getattr(dist, name), name, kind))

    def at_mark(self, name):
        """Called at each mark: the phase the next collectives fall in."""
        if name == "start":
            self.phase = "forward"
        elif name == "done":
            self.phase, self.iteration = "forward", self.iteration + 1
        else:
            self.phase = measure.PHASES[measure.MARKS.index(name)]

    def _wrap(self, original, name, kind):
        signature = inspect.signature(original)

        def call(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            self._log(name, kind, bound.arguments)
            if not self.settle:
                return original(*bound.args, **bound.kwargs)
            return self._settled(original, bound)

        call.__wrapped__ = original
        return call

    def _log(self, name, kind, arguments):
        tensors = [(k, v) for k, v in arguments.items() if isinstance(v, torch.Tensor)]
        lists = [(k, v) for k, v in arguments.items() if isinstance(v, list)]
        sizes = {k: v.numel() * v.element_size() for k, v in tensors}
        sizes.update({k: sum(t.numel() * t.element_size() for t in v) for k, v in lists})
        group = arguments.get("group")
        ranks = dist.get_process_group_ranks(group) if group is not None else \
            list(range(dist.get_world_size()))
        op = arguments.get("op")
        self.entries.append({
            "index": len(self.entries), "kind": kind, "function": name,
            "bytes": max(sizes.values()), "tensor_bytes": sizes,
            "dtype": str(next(iter(tensors))[1].dtype).replace("torch.", "") if tensors else None,
            "op": str(op).split(".")[-1] if op is not None else None,
            "group_ranks": ranks, "phase": self.phase, "iteration": self.iteration})

    def _settled(self, original, bound):
        """original(), waited, and its work object released on this thread once gloo's worker
        threads have gone idle (module docstring): the work's last reference, and with it
        whatever gloo allocated for the call (reduce_scatter_tensor's clone of its input), goes
        here, where the profiler records the free, at the point where the caller's own
        reduce_scatter_tensor(async_op=False) would have dropped it."""
        arguments = dict(bound.arguments)
        if arguments.get("async_op"):  # the caller waits (FSDP2's unshard_async_op)
            return original(**arguments)
        arguments["async_op"] = True
        work = original(**arguments)
        work.wait()
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while not _other_threads_asleep():
            if time.monotonic() > deadline:
                self.settle_timeouts += 1
                break
            time.sleep(0)
        del work
        return None


def _other_threads_asleep():
    """Whether every thread of this process but the caller sleeps (state S in
    /proc/self/task/TID/stat). After work.wait() the gloo worker that ran the work only has to
    drop its references and wait on its queue's condition variable: it runs (R) until it
    sleeps there, and nothing else wakes a gloo thread while no collective is queued."""
    me = threading.get_native_id()
    for tid in os.listdir("/proc/self/task"):
        if int(tid) == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:  # the thread ended
            continue
        if state != "S":
            return False
    return True


def unprofiled_frees(events, phase_of_event):
    """Allocations the profile never saw freed although the allocator handed their address out
    again: frees made on a thread the profiler does not record. Each with its size and the
    phases it was allocated and its address reused in."""
    live, found = {}, []
    for i, e in enumerate(events):
        if e["bytes"] > 0:
            if e["addr"] in live:
                j, size = live[e["addr"]]
                found.append({"bytes": size, "allocated_in": phase_of_event[j],
                              "address_reused_in": phase_of_event[i]})
            live[e["addr"]] = (i, e["bytes"])
        else:
            live.pop(e["addr"], None)
    return found


def caller_thread_events(events):
    """The events of the allocations the calling thread made (the first event's thread: the
    sentinels and the training loop), a free counted with its allocation wherever it happens:
    what is left when the buffers gloo's worker threads make inside a collective are taken out."""
    caller = events[0]["tid"]
    owner, kept = {}, []
    for e in events:
        if e["bytes"] > 0:
            owner[e["addr"]] = e["tid"]
            if e["tid"] == caller:
                kept.append(e)
        elif owner.pop(e["addr"], caller) == caller:
            kept.append(e)
    return kept


def _phases_of(events, iterations):
    """The phase label ("init", "forward#0", ...) of each event, by the sentinels."""
    labels = ["init"] + [f"{p}#{i}" for i in range(iterations) for p in measure.PHASES]
    out, k, i = [], 0, 0
    while i < len(events):
        e = events[i]
        if e["bytes"] == measure.MARK_BYTES and i + 1 < len(events) and \
                events[i + 1]["bytes"] == -measure.MARK_BYTES:
            out += [labels[k], labels[k]]
            k, i = min(k + 1, len(labels) - 1), i + 2
            continue
        out.append(labels[k])
        i += 1
    return out


def measure_rank(rank, args, world_size):
    """One rank's figures: run --iterations steps under the profiler, read the trace."""
    from torch.profiler import ProfilerActivity, profile
    build = load_function(args.model, "model")
    batch = load_function(args.batch, "--batch")
    wrap = wrap_fsdp1 if args.impl == "fsdp1" else wrap_fsdp2
    if args.as_built:
        if args.impl == "fsdp2":
            import fsdp2_cpu_workarounds
            fsdp2_cpu_workarounds.apply()
        wrap = lambda model, args, world_size: model  # noqa: E731
    log = CollectiveLog(args.settle == "on")
    log.install()

    def mark(name):
        measure.sentinel()
        log.at_mark(name)

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        keep = run_step(lambda: wrap(build(), args, world_size), batch, args.optimizer, "cpu",
                        mark, args.iterations)
    trace_dir = args.keep_traces or tempfile.mkdtemp(prefix="fsdp_measure.")
    os.makedirs(trace_dir, exist_ok=True)
    path = os.path.join(trace_dir, f"rank{rank}.trace.json")
    prof.export_chrome_trace(path)
    events = measure.chrome_trace_memory_events(path)
    if not args.keep_traces:
        os.remove(path)
        os.rmdir(trace_dir)
    count = 1 + 4 * args.iterations
    marks, peaks = measure.figures_from_events([e["bytes"] for e in events], count)
    caller_marks, caller_peaks = measure.figures_from_events(
        [e["bytes"] for e in caller_thread_events(events)], count)
    names = [("start", 0)] + [(n, i) for i in range(args.iterations)
                              for n in measure.MARKS[1:]]
    phases = [(p, i) for i in range(args.iterations) for p in measure.PHASES]
    result = {
        "rank": rank,
        "marks": [{"name": n, "iteration": i, "allocated_bytes": m[1], "allocated_bytes_raw": m[0]}
                  for (n, i), m in zip(names, marks)],
        "phase_peaks": [{"phase": p, "iteration": i, "peak_allocated_bytes": pk[1],
                         "peak_allocated_bytes_raw": pk[0]} for (p, i), pk in zip(phases, peaks)],
        # What the caller's thread allocated (the sentinels are its own): without the buffers
        # gloo's worker threads allocate and free inside a collective (the all-gather's staging
        # copy of the output, the unsharded size), which NCCL on a GPU does not make.
        "caller_thread": {
            "marks": [{"name": n, "iteration": i, "allocated_bytes": m[1]}
                      for (n, i), m in zip(names, caller_marks)],
            "phase_peaks": [{"phase": p, "iteration": i, "peak_allocated_bytes": pk[1]}
                            for (p, i), pk in zip(phases, caller_peaks)]},
        "collectives": list(log.entries),
        "settle_timeouts": log.settle_timeouts,
        "unprofiled_frees": unprofiled_frees(events, _phases_of(events, args.iterations)),
        "other_threads_events": sum(1 for e in events if e["tid"] != events[0]["tid"]),
    }
    if args.mem_tracker:
        result["mem_tracker"] = tracked_iteration(*keep)
    return result


def _by_category(snapshot):
    """One device's FSDPMemTracker snapshot as {category: bytes}, "Total" included, keyed by the
    category's own name (_FSDPRefType's values: "Sharded Param", "All Gather", ...)."""
    (device_snapshot,) = snapshot.values()  # one device: the CPU
    return {getattr(k, "value", k): v for k, v in device_snapshot.items()}


def tracked_iteration(model, batch, opt):
    """One more training step (run_step's, without marks) under torch's FSDPMemTracker, after
    the profiled ones and outside the profiler, so the profiled figures are those of a run
    without it: its peak by category (the snapshot it takes whenever its running total reaches
    a new maximum, counted by storage, raw bytes on the CPU) and each FSDP module's peak forward
    and backward snapshots. The batch is tracked as "Inputs"; what else was alive before (the
    mesh's tensors, the profiled run's leftovers) is not seen by the tracker."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker, _FSDPModState
    from torch.distributed.fsdp import FSDPModule
    args, kwargs = batch  # run_step's: the forward's arguments (recorder.step.as_call)
    tracker = FSDPMemTracker(model, opt)
    tracker.track_inputs(tuple(args) + tuple(kwargs.values()))
    tracker.reset_mod_stats()
    with tracker:
        loss = to_loss(model(*args, **kwargs))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss
    units = {name or "root" for name, m in model.named_modules() if isinstance(m, FSDPModule)}
    modules = {}
    for stats in tracker.memory_tracking.values():
        fqn = stats.mod_fqn.split(".", 1)[1] if "." in stats.mod_fqn else "root"
        if fqn not in units:
            continue
        modules[fqn] = {state: _by_category(stats.snapshots[key][-1])
                        for state, key in (("peak_forward", _FSDPModState.PEAK_FW),
                                           ("peak_backward", _FSDPModState.PEAK_BW))
                        if stats.snapshots.get(key) and stats.snapshots[key][-1]}
    return {"peak": _by_category(tracker.get_tracker_snapshot("peak")), "modules": modules}


def rank_main(rank, args, world_size, port, out_dir):
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        result = measure_rank(rank, args, world_size)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    args = parse_args(argv)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fsdp_measure.") as out_dir:
        torch.multiprocessing.spawn(rank_main, args=(args, world_size, free_port(), out_dir),
                                    nprocs=world_size)
        ranks = []
        for r in range(world_size):
            with open(os.path.join(out_dir, f"rank{r}.json")) as f:
                ranks.append(json.load(f))
    result = {"torch_version": torch.__version__, "world_size": world_size,
              "config": config_of(args, world_size), "wall_s": round(time.monotonic() - started, 1),
              "ranks": ranks}
    text = json.dumps(result, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    for r in ranks:
        figures = " ".join(f"{m['name']}={m['allocated_bytes'] / 2**20:.2f}"
                           for m in r["marks"][:5])
        peaks = " ".join(f"{p['phase']}={p['peak_allocated_bytes'] / 2**20:.2f}"
                         for p in r["phase_peaks"][:3])
        print(f"rank {r['rank']}: {figures} | peaks {peaks} MiB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
