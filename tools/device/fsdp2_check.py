#!/usr/bin/env python3
"""bucketsim's prediction of real FSDP2 steps (tools/device/fsdp2_step.py's measurements) from one
model program, side by side: peak allocated and peak reserved of the second iteration.

    python3 tools/device/fsdp2_check.py PROGRAM.json MEASURED.json... [--bucketsim BIN]
        [--json OUT]

For each measurement the program is emitted with the flags of the run's configuration (`gen
program --fsdp-impl fsdp2 --world-size W --param-dtype bf16 --reduce-dtype fp32 --optimizer
adamw --optimizer-impl foreach --iterations 2`, with `--checkpoint CLASS --checkpoint-impl
no-reentrant`, `--offload-params true`, `--unit-setting last:reshard_after_forward=false` as the
run had them) and replayed under the fsdp2 policy with the run's PYTORCH_CUDA_ALLOC_CONF
(`compare --alloc-conf`) and its device's capacity (`--device-memory`, total_memory). Prints a
row per measurement: measured, predicted and their relative difference; exits 0 (the figures are
findings), 2 when a step fails.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def gen_flags(config, world_size):
    flags = ["--fsdp-impl", "fsdp2", "--world-size", str(world_size),
             "--param-dtype", config["param_dtype"], "--reduce-dtype", config["reduce_dtype"],
             "--optimizer", "adamw", "--optimizer-impl", "foreach", "--iterations", "2"]
    if config["checkpoint"] == "full":
        flags += ["--checkpoint", ",".join(config["wrap"]), "--checkpoint-impl", "no-reentrant"]
    if config.get("offload"):
        flags += ["--offload-params", "true"]
    if config.get("last_reshard") == "false":
        flags += ["--unit-setting", "last:reshard_after_forward=false"]
    return flags


def predicted(bucketsim, program, measured, workdir, index):
    trace = os.path.join(workdir, f"trace-{index}.json")
    gen = [bucketsim, "gen", "program", program, *gen_flags(measured["config"],
                                                            measured["world_size"]), "-o", trace]
    run = subprocess.run(gen, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(gen)}: {run.stderr.strip()}")
    compare = [bucketsim, "compare", trace, "--policy", "fsdp2", "--format", "json",
               "--alloc-conf", measured.get("alloc_conf", "")]
    if measured.get("total_memory_bytes"):
        compare += ["--device-memory", str(measured["total_memory_bytes"])]
    run = subprocess.run(compare, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(compare)}: {run.stderr.strip()}")
    policy = json.loads(run.stdout)["policies"][0]
    second = [p for p in policy["phases"] if p["iteration"] == 1]
    return {"max_allocated_bytes": max(p["peak_bytes"] for p in second),
            "max_reserved_bytes": max(p["peak_reserved_bytes"] for p in second),
            "command": " ".join(gen)}


def label(measured):
    c = measured["config"]
    parts = [f"ckpt {c['checkpoint']}"]
    if c.get("offload"):
        parts.append("offload")
    if c.get("last_reshard") == "false":
        parts.append("last unit kept")
    parts.append(measured.get("alloc_conf") or "default allocator")
    return ", ".join(parts)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("program")
    p.add_argument("measured", nargs="+")
    p.add_argument("--bucketsim", default=os.environ.get("BUCKETSIM",
                                                         os.path.join(ROOT, "build", "bucketsim")))
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for index, path in enumerate(args.measured):
            with open(path) as f:
                measured = json.load(f)
            figures = measured["iterations"][-1]
            if not figures:
                print(f"fsdp2_check: {path}: no memory figures (not a CUDA run)")
                continue
            try:
                guess = predicted(args.bucketsim, args.program, measured, workdir, index)
            except RuntimeError as error:
                print(f"fsdp2_check: {path}: {error}", file=sys.stderr)
                return 2
            row = {"config": label(measured), "gpu": measured.get("gpu")}
            for key in ("max_allocated_bytes", "max_reserved_bytes"):
                row[key] = {"measured": figures[key], "predicted": guess[key],
                            "relative": (guess[key] - figures[key]) / figures[key]}
            row["command"] = guess["command"]
            rows.append(row)
    print(f"{'configuration':<58} {'allocated: measured':>20} {'predicted':>14} {'diff':>8}"
          f" {'reserved: measured':>19} {'predicted':>14} {'diff':>8}")
    for row in rows:
        a, r = row["max_allocated_bytes"], row["max_reserved_bytes"]
        print(f"{row['config']:<58} {a['measured']:>20,} {a['predicted']:>14,}"
              f" {a['relative']:>+8.2%} {r['measured']:>19,} {r['predicted']:>14,}"
              f" {r['relative']:>+8.2%}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
