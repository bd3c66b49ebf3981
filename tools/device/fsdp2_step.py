#!/usr/bin/env python3
"""A real FSDP2 training step on this machine's accelerator, measured as bucketsim predicts it:
torch.cuda.max_memory_allocated() and max_memory_reserved() over the second of two iterations
(the optimizer's state exists from the first step on; the peak statistics are reset before it).

    python3 tools/device/fsdp2_step.py tools/examples/llama.py:build_model \\
        --batch tools/examples/llama.py:make_batch --wrap TransformerBlock \\
        --checkpoint full --json out.json

The recipe is torchtitan's FSDP2 one, as tests/tools/torch2/fake_mem_tracker.py runs it under
FakeTensorMode: the model built on meta, each --wrap module fully_shard'ed
(reshard_after_forward=True, or False for the last with --last-reshard false, bucketsim's
`--unit-setting last:reshard_after_forward=false`), then the root;
MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32); with --checkpoint full each block in a
non-reentrant checkpoint_wrapper sharded in its place; --offload adds CPUOffloadPolicy() (the
sharded parameters, gradients and optimizer state in pinned host memory); AdamW(foreach=True).
The model is materialized with to_empty on the device and initialised there (llama.py's
init_weights when the model file has one). World size 1 unless launched by torchrun.

The allocator's settings are PYTORCH_CUDA_ALLOC_CONF's, read when CUDA starts: run the script
once per setting (tools/device-check.sh runs expandable_segments on and off).

On a machine without CUDA (`--device cpu`, gloo, with FSDP2's CPU workarounds) it runs the same
steps and reports no memory figures: the rehearsal of tools/device-check.sh on this CPU.

Output (--json and stdout): {"torch", "device", "config", "alloc_conf", "iterations":
[{"max_allocated_bytes", "max_reserved_bytes", "allocated_after_bytes"}], "total_memory_bytes",
"seconds"}.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "tests", "tools", "torch2"))

START = time.perf_counter()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", help="FILE.py:FUNCTION returning the nn.Module (built on meta)")
    p.add_argument("--batch", required=True, help="FILE.py:FUNCTION returning the forward's "
                   "arguments (CPU tensors: moved to the device)")
    p.add_argument("--wrap", required=True, action="append",
                   help="a module class to fully_shard in its own unit (repeatable)")
    p.add_argument("--checkpoint", choices=("none", "full"), default="none")
    p.add_argument("--last-reshard", choices=("true", "false"), default="true",
                   help="reshard_after_forward of the last --wrap unit")
    p.add_argument("--offload", action="store_true", help="CPUOffloadPolicy() on every unit")
    p.add_argument("--param-dtype", choices=DTYPES, default="bf16")
    p.add_argument("--reduce-dtype", choices=DTYPES, default="fp32")
    p.add_argument("--device", choices=("cuda", "cpu"),
                   default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--json", help="write the result here too")
    return p.parse_args(argv)


def init_distributed(device):
    if dist.is_initialized():
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    dist.init_process_group("nccl" if device == "cuda" else "gloo", rank=rank, world_size=world)


def main(argv=None):
    args = parse_args(argv)
    if args.offload and args.device != "cuda":
        raise SystemExit("fsdp2_step: --offload needs CUDA (CPUOffloadPolicy pins host memory "
                         "for the device)")
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    from fsdp_measure import _unit_classes, checkpoint_wrap
    from recorder.load import load_function

    if args.device == "cpu":
        import fsdp2_cpu_workarounds
        fsdp2_cpu_workarounds.apply()
    build = load_function(args.model, "model")
    make_batch = load_function(args.batch, "batch")
    init_distributed(args.device)
    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    device = torch.device(args.device, torch.cuda.current_device()) if cuda else \
        torch.device("cpu")
    result = {"torch": torch.__version__, "device": args.device,
              "config": {k: v for k, v in vars(args).items() if k != "json"},
              "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
              "world_size": dist.get_world_size(), "iterations": []}
    if cuda:
        props = torch.cuda.get_device_properties(device)
        result["gpu"] = props.name
        result["total_memory_bytes"] = props.total_memory
    seconds = {"import": time.perf_counter() - START}
    try:
        started = time.perf_counter()
        mesh = init_device_mesh(args.device, (dist.get_world_size(),))
        mp = MixedPrecisionPolicy(param_dtype=DTYPES[args.param_dtype],
                                  reduce_dtype=DTYPES[args.reduce_dtype])
        extra = {"offload_policy": CPUOffloadPolicy()} if args.offload else {}
        with torch.device("meta"):
            model = build()
        classes = tuple(_unit_classes(model, args.wrap))
        units = [m for m in model.modules() if m is not model and isinstance(m, classes)]
        if args.checkpoint == "full":
            checkpoint_wrap(model, args.wrap, "no-reentrant")
            wrapper = {m._checkpoint_wrapped_module: m for m in model.modules()
                       if hasattr(m, "_checkpoint_wrapped_module")}
            units = [wrapper[m] for m in units]
        for i, unit in enumerate(units):
            last = i == len(units) - 1
            fully_shard(unit, mesh=mesh, mp_policy=mp,
                        reshard_after_forward=not (last and args.last_reshard == "false"),
                        **extra)
        fully_shard(model, mesh=mesh, reshard_after_forward=True, mp_policy=mp, **extra)
        # Offloaded shards live on the host; the rest on the device.
        model.to_empty(device="cpu" if args.offload else device)
        module = sys.modules[build.__module__]
        if hasattr(module, "init_weights"):
            module.init_weights(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        batch = make_batch()
        batch = tuple(t.to(device) for t in (batch if isinstance(batch, (tuple, list))
                                             else (batch,)))
        seconds["build"] = time.perf_counter() - started
        for iteration in range(2):
            started = time.perf_counter()
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            loss = model(*batch)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del loss
            figures = {}
            if cuda:
                torch.cuda.synchronize()
                figures = {"max_allocated_bytes": torch.cuda.max_memory_allocated(),
                           "max_reserved_bytes": torch.cuda.max_memory_reserved(),
                           "allocated_after_bytes": torch.cuda.memory_allocated()}
            result["iterations"].append(figures)
            seconds[f"iteration {iteration}"] = time.perf_counter() - started
    finally:
        dist.destroy_process_group()
    seconds["total"] = time.perf_counter() - START
    result["seconds"] = seconds
    text = json.dumps(result, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
