"""The program file (traces/program-v1.schema.json): a recording assembled into its JSON
document, written, and summed up in one line."""

import json
import os

from .errors import UsageError


def instance_params(params, flatten):
    """An instance's parameters, from its (name, numel, size in dim 0) triples: fairscale's
    flatten_parameters=True (its default) gives one flat parameter, whose views are the original
    parameters (FlattenParamsWrapper's split + view, in this order); else the module's own, each
    its own allocation. Each original parameter says its `dim0` where it is not 1-D (FSDP2
    shards dim 0: torch.chunk)."""
    def original(name, numel, dim0):
        entry = {"name": name, "numel": numel}
        if dim0 != numel and numel:
            entry["dim0"] = dim0
        return entry
    if not params:
        return []
    if flatten:
        return [{"name": "flat_param_0", "numel": sum(numel for _, numel, _ in params),
                 "views": [original(*p) for p in params]}]
    return [original(*p) for p in params]


def prune(op):
    """Drops a run's empty lists (the format's defaults; an empty param_reads says the run's
    backward makes no parameter gradient, and stays)."""
    return {k: v for k, v in op.items()
            if not (isinstance(v, list) and not v and k not in ("outputs", "param_reads"))}


def program_of(description, instances, inputs, forward, loss, flatten, held=(), fsdp=None,
               modules=()):
    """The program document: `instances` as (name, [(parameter name, numel, dim0)]) pairs, the
    forward's ops pruned of empty lists; `held`, `fsdp` and `modules` (the module calls) only
    where there are any. The recorder adds `measured` and `optimizer` after."""
    program = {
        "format": "bucketsim-program",
        "schema_version": 1,
        "description": description,
        "instances": [{"name": n, "params": instance_params(params, flatten)}
                      for n, params in instances],
        "inputs": inputs,
        "forward": [prune(op) for op in forward],
        "loss": loss,
    }
    if held:
        program["held"] = list(held)
    if fsdp is not None:
        program["fsdp"] = fsdp
    if modules:
        program["modules"] = list(modules)
    return program


def write(program, path):
    """Writes the program as JSON (one-space indent, a final newline), whole or not at all:
    to PATH.tmp, then renamed."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(program, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except OSError as e:
        raise UsageError(f"cannot write '{path}': {e.strerror}")


def summary(program, path):
    """The line the recorder prints for a written program: instances, runs, parameters, and
    the device measured on, if any."""
    runs = sum(1 for op in program["forward"] if op["op"] == "run")
    numel = sum(p["numel"] for i in program["instances"] for p in i["params"])
    measured = program.get("measured")
    return (f"record_program: {path}: {len(program['instances'])} instance(s), {runs} runs, "
            f"{numel:,} parameters" + (", measured on " + measured["device"] if measured else "") +
            (", and its bf16 recording (low_precision)" if "low_precision" in program else ""))
