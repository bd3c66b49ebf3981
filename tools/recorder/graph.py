"""What the autograd graph of the recorded forward adds to its runs: after the forward, the
graph walked from the loss gives each run its `saves` (what its nodes saved) and its
`param_reads` (the parameters whose gradient its backward makes); on cpu and cuda, a backward
with hooks on every program tensor gives each input its gradient kind (`pass` or `new`) as
autograd made it."""

import torch

from .ops import input_ref
from .errors import UsageError
from .tensors import DTypeError, dtype_name, storage_bytes, storage_key


def saved_tensors_of(node):
    """The tensors an autograd node saved (its _saved_* attributes, or a custom Function's
    ctx.saved_tensors); strided ones only."""
    out = []
    names = [n for n in dir(node) if n.startswith("_saved_")]
    for n in names:
        try:
            v = getattr(node, n)
        except RuntimeError:
            continue
        vs = v if isinstance(v, (tuple, list)) else [v]
        out.extend(t for t in vs if isinstance(t, torch.Tensor) and t.layout == torch.strided)
    if not names and hasattr(node, "saved_tensors"):  # a custom autograd.Function's ctx
        try:
            out.extend(t for t in node.saved_tensors if isinstance(t, torch.Tensor))
        except RuntimeError:
            pass
    return out


def attribute_saves(rec, loss):
    """Gives every run the saves of the nodes it produced (deduplicated by storage: the real
    sizes), so bucketsim releases each at that run's backward, as autograd does
    (Node::release_variables). Parameters, buffers and tensors on another device saved by a
    node are left out. Returns how many saved tensors could not be attributed to a run."""
    rec.settle()
    seen, stack = set(), [loss.grad_fn] if loss.grad_fn is not None else []
    unattributed = 0
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.extend(n for n, _ in node.next_functions)
        saved = saved_tensors_of(node)
        if not saved:
            continue
        index = rec.node_run.get(node)
        if index is None:
            # A node no recorded op produced (e.g. a composite's own node): its saves go to
            # the run that made what it saved, released at that run's backward.
            keys = [storage_key(t) for t in saved if storage_key(t) in rec.producer]
            index = rec.producer.get(keys[0]) if keys else None
        if index is None:
            unattributed += len(saved)
            continue
        run = rec.program_ops[index]
        have = {s.get("tensor") for s in run["saves"]}
        for t in saved:
            key = storage_key(t)
            if key in rec.param_instance or key in rec.buffers or key in rec.host_keys:
                continue
            # A CPU scalar of a CUDA (or meta) op (a Python number wrapped as a tensor)
            # is not the device's memory.
            if t.device.type != rec.device:
                continue
            if key in rec.tensors:
                # The run's own input or output of that storage, else the storage's first
                # tensor: a save names a tensor made by this run or an earlier one.
                own = [i if isinstance(i, str) else i["tensor"] for i in run["inputs"]]
                own += [e["id"] for e in run["outputs"]]
                same = [i for i in own if rec.id_storage.get(i) == key]
                tid = same[0] if same else rec.tensors[key]
                if tid not in have:
                    run["saves"].append({"tensor": tid})
                    have.add(tid)
            else:  # made by autograd itself for saving: only the backward keeps it
                rec.keep.append(t)
                rec.tensors[key] = f"saved{len(rec.tensors)}"
                try:
                    dtype = dtype_name(t.dtype)
                except DTypeError as e:
                    raise UsageError(f"{e}: a tensor {type(node).__name__} saved (shape "
                                     f"{list(t.shape)}), for run '{run['name']}'")
                run["saves"].append({"bytes": storage_bytes(t), "dtype": dtype,
                                     "shape": list(t.shape)})
    return unattributed


def attribute_param_reads(rec, loss):
    """Sets every run's param_reads: the parameters whose gradient its backward makes. The
    autograd graph from the loss is what the engine follows: from each node a run produced,
    the edges are followed through the nodes no run produced (the t(), view or expand of a
    parameter, whose backward passes the gradient on) down to parameters' AccumulateGrad
    nodes; the walk stops at another run's node. A parameter two runs read gets both, and
    bucketsim sums them as autograd's input buffer does. The graph is there on every
    device, meta too, so this needs no backward. A parameter's instance missing from the
    run's uses is added to them."""
    rec.settle()
    reads = {}  # op index -> set of parameter storage keys
    for node, index in rec.node_run.items():
        found = reads.setdefault(index, set())
        seen, stack = set(), [n for n, _ in node.next_functions]
        while stack:
            n = stack.pop()
            if n is None or n in seen:
                continue
            seen.add(n)
            variable = getattr(n, "variable", None)
            if isinstance(variable, torch.Tensor):
                if storage_key(variable) in rec.param_instance:
                    found.add(storage_key(variable))
                continue
            if n in rec.node_run:
                continue
            stack.extend(c for c, _ in n.next_functions)
    order = {key: k for k, key in enumerate(rec.param_name)}
    for index, op in enumerate(rec.program_ops):
        if op["op"] != "run":
            continue
        keys = sorted(reads.get(index, ()), key=order.get)
        uses = op.setdefault("uses", [])
        for key in keys:
            f = rec.instance_names[rec.param_instance[key]]
            if f not in uses:
                uses.append(f)
        if uses:
            op["param_reads"] = [rec.param_name[key] for key in keys]


def measure_grad_kinds(rec, loss):
    """Runs the backward with a hook on every program tensor that requires grad and sets
    each run input's gradient kind from what autograd did: `pass` where the input's
    gradient shares the storage of the run's first output's gradient, else `new`. Only for
    inputs that one run reads (a tensor read by several gets the sum of their gradients,
    a new tensor whatever each did): the others keep the table's kind (ops.grad_kind).
    Returns how many kinds were measured and how many of those the table had wrong."""
    grads = {}
    tensors = {}
    for t in rec.keep:
        tid = rec.ids.get(t._cdata)
        if tid is not None and t.requires_grad and tid not in tensors:
            tensors[tid] = t
    for tid, t in tensors.items():
        # The grads are kept: a freed gradient's storage could be reused by the next one.
        t.register_hook(lambda g, tid=tid: grads.__setitem__(tid, g))
    loss.backward()
    readers = {}
    for op in rec.program_ops:
        for i in op.get("inputs", []):
            tid = i if isinstance(i, str) else i["tensor"]
            readers[tid] = readers.get(tid, 0) + 1
    measured = wrong = 0
    for op in rec.program_ops:
        if op["op"] != "run" or not op["outputs"]:
            continue
        out_grad = grads.get(op["outputs"][0]["id"])
        for k, i in enumerate(op.get("inputs", [])):
            tid = i if isinstance(i, str) else i["tensor"]
            table = "new" if isinstance(i, str) else i["grad"]
            if out_grad is None or tid not in grads or readers[tid] != 1 or table == "none":
                continue
            kind = ("pass" if storage_key(grads[tid]) == storage_key(out_grad) else "new")
            measured += 1
            wrong += kind != table
            op["inputs"][k] = input_ref(tid, kind)
    return measured, wrong
