"""Activation checkpointing, seen by the recorder: torch.utils.checkpoint.checkpoint replaced
(before the user's code is imported) by a function that, while a recording is under way, writes
the call as a checkpoint_begin ... checkpoint_end region; and each region's second run under
no_grad, as the real forward runs it, that finds the tensors a region's Python code keeps alive
past their last reader (`releases`)."""

import contextlib
import weakref

import torch
import torch.utils.checkpoint
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .meta import meta_fallback
from .tensors import storage_bytes, storage_key

_original_checkpoint = torch.utils.checkpoint.checkpoint
_active_recorder = None


def _checkpoint(function, *args, **kwargs):
    """torch.utils.checkpoint.checkpoint, unchanged unless a recording is under way."""
    if _active_recorder is None:
        return _original_checkpoint(function, *args, **kwargs)
    return region(_active_recorder, function, args, kwargs)


# Installed before the user's code is imported, so `from torch.utils.checkpoint import
# checkpoint` binds this one too.
torch.utils.checkpoint.checkpoint = _checkpoint


@contextlib.contextmanager
def recording(rec):
    """checkpoint() calls become regions of `rec`'s program while this is entered."""
    global _active_recorder
    _active_recorder = rec
    try:
        yield
    finally:
        _active_recorder = None


def region(rec, function, args, kwargs):
    """A checkpoint(function, *args, **kwargs) call in the recorded forward: checkpoint_begin
    (saves: the region's tensor arguments), the function's runs, checkpoint_end. The function
    runs with grad enabled, so that its saves (what the recompute keeps) are seen."""
    rec.settle()
    saves = []
    for a in args:
        if isinstance(a, torch.Tensor) and storage_key(a) in rec.tensors:
            saves.append({"tensor": rec.id_of(a)})
    # torch.utils.checkpoint keeps torch.get_rng_state() (a CPU uint8 tensor) on its ctx
    # for the recompute unless preserve_rng_state=False. It is a Python attribute, not a
    # saved variable: it lives as long as the graph, i.e. until the loss is dropped (held).
    # Device memory only when recording on CPU: the CUDA generators' states are CPU
    # tensors too.
    if kwargs.get("preserve_rng_state", True) and rec.device == "cpu":
        state = torch.get_rng_state()
        tid = f"t{rec.next_id}"
        rec.next_id += 1
        rec.program_ops.append({"op": "run", "name": f"{rec.where()}:checkpoint rng state",
                                "outputs": [{"id": tid, "bytes": state.numel(),
                                             "dtype": "uint8", "shape": list(state.shape),
                                             "name": "cpu rng state",
                                             "requires_grad": False}]})
        rec.held.append(tid)
    kwargs = {k: v for k, v in kwargs.items()
              if k not in ("use_reentrant", "preserve_rng_state")}
    rec.program_ops.append({"op": "checkpoint_begin", "saves": saves})
    begin = len(rec.program_ops) - 1
    out = function(*args, **kwargs)
    rec.settle()
    rec.program_ops.append({"op": "checkpoint_end"})
    rec.regions.append((begin, function, args, kwargs))
    return out


def attribute_releases(rec):
    """Runs every checkpointed region's function again as the real forward does, under
    no_grad (only what Python references keeps a tensor alive there), and notes after which
    of its runs each tensor it makes dies: where that is after the tensor's last reader
    (a local variable of the model's code, alive until its function returns), the run
    gets it in `releases`. Returns the regions that did not run again, or ran other ops
    than recorded (left as they are)."""
    ops = rec.program_ops
    skipped = []
    for begin, function, args, kwargs in rec.regions:
        end = next(k for k in range(begin, len(ops)) if ops[k]["op"] == "checkpoint_end")
        # The runs that make a storage (a view or in-place op only makes a tensor on one:
        # grad mode adds some, a detach, that no_grad does not).
        runs = [k for k in range(begin + 1, end) if ops[k]["op"] == "run" and
                any("alias" not in e for e in ops[k]["outputs"])]
        mode = _Lifetimes(rec)
        rec.replaying = True
        try:
            with torch.no_grad(), mode:
                out = function(*args, **kwargs)
            mode.done = True
            del out
        except Exception:  # it ran once already; a second run is the user's code's call
            skipped.append(begin)
            continue
        finally:
            rec.replaying = False
        names = [ops[k]["name"].split(":")[-1] for k in runs]
        if mode.op_names != names:
            skipped.append(begin)
            continue
        last_use = {}  # storage key -> position of the last run that reads or makes it
        for position, k in enumerate(runs):
            op = ops[k]
            for i in op.get("inputs", []) + [e["id"] for e in op["outputs"]]:
                tid = i if isinstance(i, str) else i["tensor"]
                last_use[rec.id_storage.get(tid)] = position
        for (position, m), died in sorted(mode.deaths.items()):
            made = [e["id"] for e in ops[runs[position]]["outputs"] if "alias" not in e]
            tid = made[m]
            if died > last_use.get(rec.id_storage[tid], position):
                ops[runs[died]].setdefault("releases", []).append(tid)
    return skipped


class _Lifetimes(TorchDispatchMode):
    """A checkpointed region's function run again: the ops that make a new storage (outputs
    that are no parameter or buffer, as the recorder counts them), and for each new storage the
    op after which its last tensor (views included) died (weakref finalizers: a tensor's Python
    object lives exactly as long as the tensor)."""

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
        for o in tree_flatten(out)[0]:
            if not isinstance(o, torch.Tensor) or o.layout != torch.strided:
                continue
            key = storage_key(o)
            if key in self.rec.param_instance or key in self.rec.buffers:
                continue
            if key in self.maker or key in self.rec.tensors:
                made.append((o, key, False))
            elif storage_bytes(o) > 0:
                made.append((o, key, True))
        if any(fresh for _, _, fresh in made):
            self.op_names.append(func.overloadpacket.__name__)
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
