"""One program for every batch shape (--batch-sizes, --seq-lens): the model recorded at each
batch size, each sequence length, or each pair of the two, the recordings found to run the same
ops, and each tensor's bytes and each run's FLOPs fitted as a polynomial of degree 1 in the batch
size b and 2 in the length s (attention's scores are s x s): from the two smallest sizes and the
three smallest lengths, and checked at every other point (bytes exactly, FLOPs to a part in
10^9). The program is the one at the first size and length given, (b0, s0); the polynomial's
other coefficients, Taylor's about (b0, s0) and none negative (whole numbers of bytes), are its
growth terms (TERMS: `bytes_per_sample`, `flops_per_token2`, ...), and the sizes and lengths
are its `batch` and `seq` keys, so that `bucketsim gen program --batch-size N --seq-len L` emits
the model at any N and L from the smallest recorded up (src/gen/program_batch.h).

Why not from the smallest down: a model can run other ops at another shape (at batch size 1,
or length 1, PyTorch 1.13 takes a view where a reshape of a larger one copies: measured on the
example GPT's attention), which the recordings show as different programs and this refuses;
below the smallest size or length recorded no recording shows it, so the program's reader
refuses a size or length below the smallest checked."""

import functools
import itertools
from fractions import Fraction

from .errors import UsageError

# The numbers that may differ between the recordings of one model at two batch shapes.
SIZES = ("bytes", "shape", "flops", "backward_flops")

# The growth terms: (key suffix, power of b - b0, power of s - s0), as the program's reader
# names them (src/gen/model_program.h, kGrowthTerms).
TERMS = (("per_sample", 1, 0), ("per_token", 0, 1), ("per_token2", 0, 2),
         ("per_sample_token", 1, 1), ("per_sample_token2", 1, 2))


def _parse(text, flag, least, what, example, why):
    try:
        values = [int(s) for s in text.split(",")]
    except ValueError:
        values = []
    if len(values) < least or len(set(values)) != len(values) or min(values) < 1:
        raise UsageError(f"{flag} {text}: expected at least {least} distinct {what} >= 1, "
                         f"separated by commas ({example}): {why}")
    return values


def parse_sizes(text):
    """[sizes] from "2,4,8": at least 3 distinct integers >= 1 (two fit, the others check)."""
    return _parse(text, "--batch-sizes", 3, "batch sizes", "2,4,8",
                  "two fit each tensor's bytes as a + b x size, the others check the fit")


def parse_lengths(text):
    """[lengths] from "32,48,64,80": at least 4 distinct integers >= 1 (three fit a quadratic,
    the others check)."""
    return _parse(text, "--seq-lens", 4, "sequence lengths", "32,48,64,80",
                  "three fit each tensor's bytes as a quadratic of the length, the others check "
                  "the fit")


def sized(make_batch, size=None, length=None):
    """The batch function at one shape, called as --batch-sizes and --seq-lens say:
    make_batch(size), make_batch(seq_len=length) or make_batch(size, seq_len=length)."""
    args = () if size is None else (size,)
    kwargs = {} if length is None else {"seq_len": length}

    @functools.wraps(make_batch)  # errors name the user's function (load.function_name)
    def call():
        return make_batch(*args, **kwargs)
    return call


def skeleton(value):
    """The program without its sizes: what must be the same at every batch shape."""
    if isinstance(value, dict):
        return {k: skeleton(v) for k, v in value.items() if k not in SIZES}
    if isinstance(value, list):
        return [skeleton(v) for v in value]
    return value


class Shape:
    """The dimensions recorded: the sizes and lengths as given (None: that one not recorded),
    how a point is named in messages, and which growth terms exist."""

    def __init__(self, sizes, lengths):
        self.sizes, self.lengths = sizes, lengths
        self.first = (sizes[0] if sizes else None, lengths[0] if lengths else None)
        self.flags = " and ".join(f for f, v in (("--batch-sizes", sizes),
                                                 ("--seq-lens", lengths)) if v)

    def points(self):
        """Every (size, length) recorded, ascending (None for a dimension not recorded)."""
        return list(itertools.product(sorted(self.sizes) if self.sizes else [None],
                                      sorted(self.lengths) if self.lengths else [None]))

    def fitting_points(self):
        """The points that determine the polynomial: the two smallest sizes by the three
        smallest lengths."""
        return list(itertools.product(sorted(self.sizes)[:2] if self.sizes else [None],
                                      sorted(self.lengths)[:3] if self.lengths else [None]))

    def terms(self):
        """[(suffix, i, j)] of the growth terms of the dimensions recorded."""
        return [t for t in TERMS if (self.sizes or not t[1]) and (self.lengths or not t[2])]

    def name(self, point, bare=False):
        """"batch size 3", "sequence length 24", both; `bare`: the batch size alone as a number
        (the batch-only messages' "the one at 2")."""
        size, length = point
        if bare and length is None:
            return str(size)
        return ", ".join(s for s in ((f"batch size {size}" if size is not None else ""),
                                     (f"sequence length {length}" if length is not None else ""))
                         if s)

    def label(self, point):
        """A point in a list of values: "2", "16" or "(2, 16)"."""
        values = [v for v in point if v is not None]
        return str(values[0]) if len(values) == 1 else f"({values[0]}, {values[1]})"


# What to give instead when a recording runs other ops than the first, by Shape.flags.
OTHER_OPS_HINTS = {
    "--batch-sizes": "give sizes that run the same ones (at batch size 1 PyTorch can take a view "
                     "where a larger batch copies: start from 2)",
    "--seq-lens": "give lengths that run the same ones (at length 1 PyTorch can take a view "
                  "where a longer sequence copies: start from 2)",
    "--batch-sizes and --seq-lens": "give sizes and lengths that run the same ones (at batch "
                                    "size or length 1 PyTorch can take a view where a larger "
                                    "one copies: start from 2)",
}


# CUDA's embedding backward takes its sorting kernel, with an fp32 workspace, above 3072 indices
# (target.py, fix_embedding_run): no polynomial crosses that.
EMBEDDING_HINT = ("recorded for CUDA, an embedding's backward has a workspace above 3072 indices "
                  "(batch size x sequence length) and none at or below: give shapes all on one "
                  "side of it")


def _different_ops(programs, shape, point):
    """The message for a recording at `point` that runs other ops than at the first."""
    first = shape.first
    at, base = shape.name(point), shape.name(first, bare=True)
    ops = {p: programs[p]["forward"] for p in (first, point)}
    for k, (a, b) in enumerate(zip(ops[first], ops[point])):
        if skeleton(a) == skeleton(b):
            continue
        name_a, name_b = a.get("name", a["op"]), b.get("name", b["op"])
        if name_a != name_b:
            return (f"{shape.flags}: at {at} the forward is not the one at {base} (op {k}: "
                    f"{name_b!r} where {base} has {name_a!r}): the model runs other ops "
                    f"there; {OTHER_OPS_HINTS[shape.flags]}")
        key = next(key for key in sorted((set(a) | set(b)) - set(SIZES))
                   if skeleton(a.get(key)) != skeleton(b.get(key)))
        hint = (EMBEDDING_HINT if key == "workspace" and "embedding" in name_a
                else OTHER_OPS_HINTS[shape.flags])
        return (f"{shape.flags}: at {at} op {k} ({name_a!r}) is not the one at {base}: its "
                f"{key!r} differs; {hint}")
    return (f"{shape.flags}: at {at} the program is not the one at {base} (its instances, "
            f"inputs, {len(ops[point])} ops against {len(ops[first])}, or its loss)")


def _slots(program):
    """[(where, container, key[, bound])] of every size in a program, in one order: tensor bytes
    (inputs, outputs, fresh saves, workspace) and run FLOPs; `bound`: a kernel's workspace, which
    may round (_bound)."""
    slots = [(f"input {t['id']}", t, "bytes") for t in program["inputs"]]
    for k, op in enumerate(program["forward"]):
        where = f"op {k} ({op.get('name', op['op'])})"
        for t in op.get("outputs", []):
            slots.append((f"tensor {t['id']} of {where}", t, "bytes"))
        for n, save in enumerate(op.get("saves", [])):
            if "tensor" not in save:
                slots.append((f"save {n} of {where}", save, "bytes"))
        for n, w in enumerate(op.get("workspace", [])):
            slots.append((f"workspace {n} of {where}", w, "bytes", True))
        if op["op"] == "run":
            slots.append((f"the FLOPs of {where}", op, "flops"))
            if "backward_flops" in op:
                slots.append((f"the backward FLOPs of {where}", op, "backward_flops"))
    return slots


def _solve(rows, values):
    """x of rows x = values, exactly (Fractions; the rows of a tensor-product Vandermonde
    matrix over distinct points, so one solution)."""
    n = len(rows)
    m = [list(r) + [v] for r, v in zip(rows, values)]
    for c in range(n):
        pivot = next(r for r in range(c, n) if m[r][c] != 0)
        m[c], m[pivot] = m[pivot], m[c]
        for r in range(n):
            if r != c and m[r][c] != 0:
                f = m[r][c] / m[c][c]
                m[r] = [a - f * b for a, b in zip(m[r], m[c])]
    return [m[r][n] / m[r][r] for r in range(n)]


def _bound(values, row):
    """The least polynomial above `values`, its growth coefficients those of the least-squares
    fit through every point rounded to whole bytes (a negative one to 0), or None when it is
    more than a part in 10^3 above a value. A kernel's workspace can be a rounded function of
    the tokens, which no polynomial is: CUDA's embedding backward sums into numel // 10 +
    min(numel, V) fp32 rows (target.py), 16 KiB off a line at dim 4096 every tenth token. Its
    prediction at another batch shape is then within that rounding and never below at the
    shapes recorded."""
    points = list(values)
    a = [row(p) for p in points]
    n = len(a[0])
    normal = [[sum(r[i] * r[j] for r in a) for j in range(n)] for i in range(n)]
    rhs = [sum(r[i] * values[p] for r, p in zip(a, points)) for i in range(n)]
    fitted = _solve(normal, rhs)
    growth = [Fraction(max(0, round(c))) for c in fitted[1:]]
    grown = {p: sum(c * r for c, r in zip(growth, row(p)[1:])) for p in points}
    base = max(values[p] - grown[p] for p in points)
    if any(base + grown[p] - values[p] > Fraction(values[p], 1000) for p in points):
        return None
    return [base] + growth


def _growth(values, shape, where, whole, bound=False):
    """{suffix: coefficient} of the polynomial through `values` ({point: value}) about the
    first point, checked at every point: exact for whole numbers, to a part in 10^9 otherwise
    (FLOPs). The coefficients must not be negative, and with `whole` (bytes) be whole numbers.
    With `bound` (a workspace), a rounded size is fitted from above (_bound), and its value at
    the first point is under the key "" when it moves."""
    b0, s0 = shape.first
    monomials = [("", 0, 0)] + shape.terms()

    def row(point):
        b, s = point
        return [Fraction((b - b0) ** i if i else 1) * ((s - s0) ** j if j else 1)
                for _, i, j in monomials]
    fitting = shape.fitting_points()
    coefficients = _solve([row(p) for p in fitting], [Fraction(values[p]) for p in fitting])
    exact = all(isinstance(v, int) for v in values.values())
    scale = max(1.0, max(abs(v) for v in values.values()))

    def fits(point):
        predicted = sum(c * r for c, r in zip(coefficients, row(point)))
        v = values[point]
        return predicted == v if exact else abs(float(predicted) - v) <= 1e-9 * scale
    if not exact:  # a coefficient a rounding error below 0 is 0
        coefficients = [Fraction(0) if c < 0 and abs(c) <= 1e-9 * scale else c
                        for c in coefficients]
    good = all(fits(p) for p in values) and \
        all(c >= 0 and (c.denominator == 1 or not whole) for c in coefficients[1:])
    base = {}
    if not good and bound and exact:
        bounded = _bound(values, row)
        if bounded is not None:
            good, coefficients = True, bounded
            if coefficients[0] != values[shape.first]:
                base = {"": int(coefficients[0])}
    if not good:
        got = ", ".join(f"{values[p]:,} at {shape.label(p)}" for p in shape.points())
        if not shape.lengths:
            raise UsageError(f"--batch-sizes: {where} does not grow by the same amount with each "
                             f"sample ({got}): it cannot be put at another batch size")
        what, other = (("the sequence length (quadratic)", "sequence length") if not shape.sizes
                       else ("the batch size (linear) and the sequence length (quadratic)",
                             "batch size or sequence length"))
        raise UsageError(f"{shape.flags}: {where} does not grow as a polynomial of {what} with "
                         f"{'whole, ' if whole else ''}non-negative coefficients ({got}): it "
                         f"cannot be put at another {other}")
    return base | {suffix: (int(c) if exact and c.denominator == 1 else float(c))
                   for (suffix, _, _), c in zip(monomials[1:], coefficients[1:]) if c != 0}


def fit(programs, sizes, lengths=None):
    """The program at the first size and length given with its growth terms fitted from
    `programs` ({(size, length): program}, every point of the grid; a dimension not recorded is
    None in the key and its list) and its `batch` and `seq` keys. `fit({size: program}, sizes)`
    is the batch sizes alone."""
    if lengths is None and all(not isinstance(k, tuple) for k in programs):
        programs = {(size, None): p for size, p in programs.items()}
    shape = Shape(sizes, lengths)
    base = programs[shape.first]
    head = skeleton({k: v for k, v in base.items() if k not in ("measured", "description")})
    for point in shape.points():
        other = skeleton({k: v for k, v in programs[point].items()
                          if k not in ("measured", "description")})
        if other != head:
            raise UsageError(_different_ops(programs, shape, point))
    slots = {p: _slots(programs[p]) for p in shape.points()}
    for n, (where, container, key, *bound) in enumerate(_slots(base)):
        values = {p: slots[p][n][1].get(key, 0) for p in slots}  # a run's flops: 0 absent
        for suffix, coefficient in _growth(values, shape, where, key == "bytes",
                                           bool(bound)).items():
            container[f"{key}_{suffix}" if suffix else key] = coefficient
    if sizes:
        base["batch"] = {"size": shape.first[0], "checked": sorted(sizes)}
    if lengths:
        base["seq"] = {"length": shape.first[1], "checked": sorted(lengths)}
    return base
