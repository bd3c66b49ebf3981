#!/usr/bin/env python3
"""PyTorch's own FSDPMemTracker (torch.distributed._tools.fsdp2_mem_tracker) at any world size on
this CPU: the real FSDP2 code (fully_shard, MixedPrecisionPolicy) on fake tensors
(FakeTensorMode: shapes, dtypes and storages, no memory, no arithmetic) with a fake process group
(backend "fake", torch.testing._internal.distributed.fake_pg.FakeStore: every collective returns
at once), as shared/reference/torch2_on_cpu.md ("FSDPMemTracker at full scale") sets it up. The
mesh is on fake CPU: SDPA on fake CUDA aborts a CPU-only torch; on CPU it takes
_scaled_dot_product_flash_attention_for_cpu, whose saved set is CUDA flash's.

One configuration per process (the fake group's world size is fixed at init):

    tools/torch2.sh python tests/tools/torch2/fake_mem_tracker.py \\
        tools/examples/llama.py:build_model_8b --batch tools/examples/llama.py:make_batch_8b \\
        --wrap TransformerBlock --world-size 8 --checkpoint none --json out.json

prints and writes {"peak": {category: bytes, "Total": bytes}, "seconds": {...}}: the tracker's
snapshot at the highest total it saw in the second of two iterations (AdamW's state exists from
the first step on; the tracker's stats are reset after the first), by its categories
(_FSDPRefType: "Sharded Param", "Unsharded Param", "Buffer", "Sharded Grad", "Unsharded Grad",
"Activation", "Temp", "All Gather", "Reduce Scatter", "OptState", "Inputs"). The recipe is
torchtitan's FSDP2 one: each wrapped block fully_shard'ed (reshard_after_forward=True; the root
too), MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), AdamW(foreach=True); with
--checkpoint full each block inside a non-reentrant checkpoint_wrapper, sharded around it.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tools"))

START = time.perf_counter()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", help="FILE.py:FUNCTION returning the nn.Module (built on meta)")
    p.add_argument("--batch", required=True, help="FILE.py:FUNCTION returning the forward's "
                   "arguments (made under FakeTensorMode: fake CPU tensors)")
    p.add_argument("--wrap", required=True, action="append", help="a module class to fully_shard "
                   "in its own unit (repeatable); the root is a unit too")
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--checkpoint", choices=("none", "full"), default="none",
                   help="full: every --wrap module in a non-reentrant checkpoint_wrapper")
    p.add_argument("--checkpoint-save", default="none", metavar="SPEC",
                   help="with --checkpoint full: selective checkpointing, a sac_policy.py SPEC "
                        "(torchtitan's form of policy), as bucketsim's --checkpoint-save")
    p.add_argument("--checkpoint-every", type=int, default=1, metavar="N",
                   help="with --checkpoint full: only every N-th module (layer-level)")
    p.add_argument("--param-dtype", choices=DTYPES, default="bf16")
    p.add_argument("--reduce-dtype", choices=DTYPES, default="fp32")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--json", help="write the result here too")
    return p.parse_args(argv)


def by_category(snapshot):
    """The tracker's snapshot of its one device as {category's own name: bytes}, Total too."""
    (device,) = snapshot.values()
    return {getattr(k, "value", k): v for k, v in device.items()}


def main(argv=None):
    args = parse_args(argv)
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import fsdp2_cpu_workarounds
    from fsdp_measure import _unit_classes, checkpoint_wrap
    from recorder.load import load_function

    fsdp2_cpu_workarounds.apply()
    build = load_function(args.model, "model")
    make_batch = load_function(args.batch, "batch")
    dist.init_process_group("fake", rank=0, world_size=args.world_size, store=FakeStore())
    try:
        mesh = init_device_mesh("cpu", (args.world_size,))
        mp = MixedPrecisionPolicy(param_dtype=DTYPES[args.param_dtype],
                                  reduce_dtype=DTYPES[args.reduce_dtype])
        seconds = {"import": time.perf_counter() - START}
        with FakeTensorMode():
            started = time.perf_counter()
            with torch.device("meta"):
                model = build()
            classes = tuple(_unit_classes(model, args.wrap))
            units = [m for m in model.modules() if m is not model and isinstance(m, classes)]
            if args.checkpoint == "full":
                # The wrapper is sharded in its block's place, as torchtitan does.
                checkpoint_wrap(model, args.wrap, "no-reentrant", args.checkpoint_save,
                                args.checkpoint_every)
                wrapper = {m._checkpoint_wrapped_module: m for m in model.modules()
                           if hasattr(m, "_checkpoint_wrapped_module")}
                units = [wrapper.get(m, m) for m in units]
            for unit in units:
                fully_shard(unit, mesh=mesh, reshard_after_forward=True, mp_policy=mp)
            fully_shard(model, mesh=mesh, reshard_after_forward=True, mp_policy=mp)
            model.to_empty(device="cpu")
            opt = torch.optim.AdamW(model.parameters(), lr=args.lr, foreach=True)
            batch = make_batch()
            batch = batch if isinstance(batch, (tuple, list)) else (batch,)
            tracker = FSDPMemTracker(mod=model, optm=opt)
            tracker.track_inputs(tuple(batch))
            seconds["build"] = time.perf_counter() - started
            with tracker:
                for iteration in range(2):
                    started = time.perf_counter()
                    loss = model(*batch)
                    loss.backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    del loss
                    seconds[f"iteration {iteration}"] = time.perf_counter() - started
                    if iteration == 0:
                        tracker.reset_mod_stats()
            peak = by_category(tracker.get_tracker_snapshot("peak"))
    finally:
        dist.destroy_process_group()
    seconds["total"] = time.perf_counter() - START
    result = {"world_size": args.world_size, "checkpoint": args.checkpoint,
              "checkpoint_save": args.checkpoint_save, "checkpoint_every": args.checkpoint_every,
              "units": len(units) + 1, "peak": peak, "seconds": seconds}
    text = json.dumps(result, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
