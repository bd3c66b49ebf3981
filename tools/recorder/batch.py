"""One program for every batch size (--batch-sizes): the model recorded at each size, the
recordings found to run the same ops, and each tensor's bytes and each run's FLOPs fitted as
a + b x size from the two smallest sizes and checked exact at every other one. The program is
the first size's, with each b as `bytes_per_sample` / `flops_per_sample` and the sizes in its
`batch` key, so that `bucketsim gen program --batch-size N` emits the model at any N from the
smallest size up (src/gen/program_batch.h).

Why not from the smallest size down: a model can run other ops at another size (at batch size 1
PyTorch 1.13 takes a view where a reshape of a larger batch copies: measured on the example
GPT's attention), which the recordings show as different programs and this refuses."""

import functools

from .errors import UsageError

# The numbers that may differ between the recordings of one model at two batch sizes.
SIZES = ("bytes", "shape", "flops", "backward_flops")


def parse_sizes(text):
    """[sizes] from "2,4,8": at least 3 distinct integers >= 1 (two fit, the others check)."""
    try:
        sizes = [int(s) for s in text.split(",")]
    except ValueError:
        sizes = []
    if len(sizes) < 3 or len(set(sizes)) != len(sizes) or min(sizes) < 1:
        raise UsageError(f"--batch-sizes {text}: expected at least 3 distinct batch sizes >= 1, "
                         "separated by commas (2,4,8): two fit each tensor's bytes as "
                         "a + b x size, the others check the fit")
    return sizes


def sized(make_batch, size):
    """The batch function at one size: make_batch(size)."""
    @functools.wraps(make_batch)  # errors name the user's function (load.function_name)
    def call():
        return make_batch(size)
    return call


def skeleton(value):
    """The program without its sizes: what must be the same at every batch size."""
    if isinstance(value, dict):
        return {k: skeleton(v) for k, v in value.items() if k not in SIZES}
    if isinstance(value, list):
        return [skeleton(v) for v in value]
    return value


def _different_ops(programs, first, size):
    """The message for a recording at `size` that runs other ops than at `first`."""
    ops = {s: programs[s]["forward"] for s in (first, size)}
    for k, (a, b) in enumerate(zip(ops[first], ops[size])):
        if skeleton(a) != skeleton(b):
            return (f"--batch-sizes: at batch size {size} the forward is not the one at {first} "
                    f"(op {k}: {b.get('name', b['op'])!r} where {first} has "
                    f"{a.get('name', a['op'])!r}): the model runs other ops there; give sizes "
                    "that run the same ones (at batch size 1 PyTorch can take a view where a "
                    "larger batch copies: start from 2)")
    return (f"--batch-sizes: at batch size {size} the program is not the one at {first} (its "
            f"instances, inputs, {len(ops[size])} ops against {len(ops[first])}, or its loss)")


def _slots(program):
    """[(where, container, key)] of every size in a program, in one order: tensor bytes (inputs,
    outputs, fresh saves, workspace) and run FLOPs."""
    slots = [(f"input {t['id']}", t, "bytes") for t in program["inputs"]]
    for k, op in enumerate(program["forward"]):
        where = f"op {k} ({op.get('name', op['op'])})"
        for t in op.get("outputs", []):
            slots.append((f"tensor {t['id']} of {where}", t, "bytes"))
        for n, save in enumerate(op.get("saves", [])):
            if "tensor" not in save:
                slots.append((f"save {n} of {where}", save, "bytes"))
        for n, w in enumerate(op.get("workspace", [])):
            slots.append((f"workspace {n} of {where}", w, "bytes"))
        if op["op"] == "run":
            slots.append((f"the FLOPs of {where}", op, "flops"))
            if "backward_flops" in op:
                slots.append((f"the backward FLOPs of {where}", op, "backward_flops"))
    return slots


def _per_sample(values, sizes, where):
    """b of a + b x size through (sizes[0], values[0]) and (sizes[1], values[1]), checked at
    every size (the second too: bytes are whole numbers, so b must be one)."""
    s0, v0 = sizes[0], values[0]
    exact = all(isinstance(v, int) for v in values)
    slope = (values[1] - v0) // (sizes[1] - s0) if exact else (values[1] - v0) / (sizes[1] - s0)

    def on_line(s, v):
        expected = v0 + slope * (s - s0)
        return v == expected if exact else abs(v - expected) <= 1e-9 * max(1.0, abs(v))
    if slope < 0 or not all(on_line(s, v) for s, v in zip(sizes, values)):
        got = ", ".join(f"{v:,} at {s}" for s, v in zip(sizes, values))
        raise UsageError(f"--batch-sizes: {where} does not grow by the same amount with each "
                         f"sample ({got}): it cannot be put at another batch size")
    return slope


def fit(programs, order):
    """The program at order[0] (the first size given) with its per-sample parts fitted from
    `programs` (size -> program, every size of `order`) and its `batch` key."""
    first = order[0]
    sizes = sorted(order)
    base = programs[first]
    shape = skeleton({k: v for k, v in base.items() if k not in ("measured", "description")})
    for size in sizes:
        other = skeleton({k: v for k, v in programs[size].items()
                          if k not in ("measured", "description")})
        if other != shape:
            raise UsageError(_different_ops(programs, first, size))
    slots = {size: _slots(programs[size]) for size in sizes}
    for n, (where, container, key) in enumerate(_slots(base)):
        values = [slots[size][n][1].get(key, 0) for size in sizes]  # a run's flops: 0 absent
        slope = _per_sample(values, sizes, where)
        if slope:
            container[f"{key}_per_sample"] = slope
    base["batch"] = {"size": first, "checked": sizes}
    return base
