"""How long the model's Python code keeps each tensor alive (`releases`).

The Recorder keeps every tensor it sees, so the recorded forward says nothing about when the
real one lets a tensor go. A tensor dies when nothing references it: autograd's saves, or a
Python variable of the model's code. The emitter frees a tensor after its last reader unless
something saves it; a local variable that outlives its last reader (nanoGPT's `tok_emb` and
`pos_emb`, alive until GPT.forward returns; a `logits` whose shifted slice the loss reads) is
memory the real run still holds, often where the forward's peak is (the loss).

So the forward runs a second time, under no_grad (nothing but Python keeps a tensor there), and
weakref finalizers note after which op each new storage died. Where that is after the tensor's
last reader in the recorded program, the run it died after gets it in `releases`. One pass over
the whole step's forward (the model and the loss) covers checkpointed regions too: their real
forward runs under no_grad as this one does. Where the second run does not make the ops the
recording did (code that branches on grad mode or on random numbers), each checkpointed region
is run again on its own instead, as its recompute will, and the rest of the forward is left as
recorded (a warning says so)."""

import warnings
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .meta import meta_fallback
from .tensors import storage_key, storage_bytes

# The run the recorder writes for torch.utils.checkpoint's CPU RNG state (checkpoint.region):
# no ATen op makes it, so a second run does not see it.
RNG_STATE_RUN = "checkpoint rng state"


def _run_name(op):
    return op["name"].split(":")[-1]


def _regions(ops):
    """For each op index, the index of the checkpoint_begin of the region it is in, or None."""
    region, inside = [], None
    for k, op in enumerate(ops):
        if op["op"] == "checkpoint_begin":
            inside = k
        region.append(inside)
        if op["op"] == "checkpoint_end":
            inside = None
    return region


def _attribute(rec, begin, end, call):
    """Runs call() under no_grad and attributes the deaths of the storages it makes to the runs
    of ops[begin:end] that make storages, in order; a release goes to a run of the same
    checkpointed region as the tensor's maker (or of none, where the maker is in none), or to a
    run after the maker's region, where something holds it past the region: autocast's cache
    its weight copies, until the forward's autocast exits (a recompute holds such a tensor
    until it ends). Not to a region's run for a tensor made outside regions: the recompute would
    release it again. Returns False (and changes nothing) when call() raises or makes other ops
    than the recording."""
    ops = rec.program_ops
    # The runs that make a storage (a view or in-place op only makes a tensor on one: grad
    # mode adds some, a detach, that no_grad does not).
    runs = [k for k in range(begin, end) if ops[k]["op"] == "run" and
            _run_name(ops[k]) != RNG_STATE_RUN and
            any("alias" not in e for e in ops[k]["outputs"])]
    mode = _Lifetimes(rec)
    rec.replaying = True
    try:
        # torch.utils.checkpoint warns under no_grad that no input requires grad.
        with torch.no_grad(), mode, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = call()
        mode.done = True
        del out
    except Exception:  # it ran once already; a second run is the user's code's call
        return False
    finally:
        rec.replaying = False
    if mode.op_names != [_run_name(ops[k]) for k in runs]:
        return False
    region = _regions(ops)
    last_use = {}  # storage key -> position of the last run that reads or makes it
    for position, k in enumerate(runs):
        op = ops[k]
        for i in op.get("inputs", []) + [e["id"] for e in op["outputs"]]:
            tid = i if isinstance(i, str) else i["tensor"]
            last_use[rec.id_storage.get(tid)] = position
    released = {tid for op in ops for tid in op.get("releases", [])}
    for (position, m), died in sorted(mode.deaths.items()):
        maker, releaser = runs[position], runs[died]
        tid = [e["id"] for e in ops[maker]["outputs"] if "alias" not in e][m]
        if died > last_use.get(rec.id_storage[tid], position) and \
                (region[maker] == region[releaser] or region[maker] is not None) and \
                tid not in released:
            ops[releaser].setdefault("releases", []).append(tid)
            released.add(tid)
    return True


def attribute_releases(rec, forward):
    """Gives each run the tensors the model's code keeps alive until it has run (`releases`),
    from a second run of `forward` (the step's forward and loss, as recorded). Returns what was
    left out: "forward" when that run did not repeat the recording, and then the index of each
    checkpointed region that did not run again on its own as recorded."""
    ops = rec.program_ops
    if _attribute(rec, 0, len(ops), forward):
        return []
    skipped = ["forward"]
    for begin, function, args, kwargs in rec.regions:
        end = next(k for k in range(begin, len(ops)) if ops[k]["op"] == "checkpoint_end")
        if not _attribute(rec, begin + 1, end, lambda: function(*args, **kwargs)):
            skipped.append(begin)
    return skipped


class _Lifetimes(TorchDispatchMode):
    """The forward, or a checkpointed region's function, run again: the ops that make a new
    storage (outputs that are no parameter or buffer, as the recorder counts them), and for each
    new storage the op after which its last tensor (views included) died (weakref finalizers: a
    tensor's Python object lives exactly as long as the tensor)."""

    def __init__(self, rec):
        super().__init__()
        self.rec = rec
        self.op_names = []
        self.maker = {}    # storage key -> (op position, index among its new outputs)
        self.alive = {}    # storage key -> tensors on it still alive
        self.deaths = {}   # (op position, index) -> op position after which it died
        self.done = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.rec.meta:
            try:
                out = func(*args, **kwargs)
            except (NotImplementedError, RuntimeError):
                out = meta_fallback(func, args, kwargs)
        else:
            out = func(*args, **kwargs)
        made = []
        outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        target = self.rec.target
        host = target.host_outputs(func, outs) if target is not None else []
        for o in outs:
            if o.layout != torch.strided or any(o is h for h in host):
                continue
            key = storage_key(o)
            if key in self.rec.param_instance or key in self.rec.buffers:
                continue
            if key in self.maker or key in self.rec.tensors:
                made.append((o, key, False))
            elif storage_bytes(o) > 0:
                made.append((o, key, True))
        if any(fresh for _, _, fresh in made):
            self.op_names.append(target.op_name(func) if target is not None
                                 else func.overloadpacket.__name__)
        position = len(self.op_names) - 1
        if made:
            new = 0
            for o, key, fresh in made:
                if fresh:
                    self.maker[key] = (position, new)
                    new += 1
                if key in self.maker:
                    self.alive[key] = self.alive.get(key, 0) + 1
                    weakref.finalize(o, self._died, key)
        return out

    def _died(self, key):
        self.alive[key] -= 1
        if self.alive[key] == 0:
            made = self.maker.pop(key)  # the key may name a new storage from now on
            if not self.done:
                self.deaths[made] = len(self.op_names) - 1
