"""Activation checkpointing, seen by the recorder: torch.utils.checkpoint.checkpoint replaced
(before the user's code is imported) by a function that, while a recording is under way, writes
the call as a checkpoint_begin ... checkpoint_end region. What a region's Python code keeps
alive past a tensor's last reader under no_grad (`releases`) is lifetimes.py's."""

import contextlib

import torch
import torch.utils.checkpoint

from .lifetimes import RNG_STATE_RUN
from .tensors import storage_key

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
    (saves: the region's tensor arguments; reentrant: False for use_reentrant=False), the
    function's runs, checkpoint_end. The function
    runs with grad enabled, so that its saves (what the recompute keeps) are seen."""
    rec.settle()
    saves = []
    for a in args:
        if isinstance(a, torch.Tensor) and storage_key(a) in rec.tensors:
            saves.append({"tensor": rec.id_of(a)})
    # use_reentrant: torch 1.13's default is True; torch 2.x's None warns and means True.
    reentrant = kwargs.get("use_reentrant", True) is not False
    # torch.utils.checkpoint keeps torch.get_rng_state() (a CPU uint8 tensor) for the
    # recompute unless preserve_rng_state=False. Reentrant: on its ctx, a Python attribute,
    # not a saved variable: it lives as long as the graph, i.e. until the loss is dropped
    # (held). Non-reentrant: in the recompute function's closure, which the saved tensors'
    # holders keep: it goes when the region's backward has released them (the region's
    # saves). Device memory only when recording on CPU: the CUDA generators' states are CPU
    # tensors too.
    if kwargs.get("preserve_rng_state", True) and rec.device == "cpu":
        state = torch.get_rng_state()
        tid = f"t{rec.next_id}"
        rec.next_id += 1
        rec.program_ops.append({"op": "run", "name": f"{rec.where()}:{RNG_STATE_RUN}",
                                "outputs": [{"id": tid, "bytes": state.numel(),
                                             "dtype": "uint8", "shape": list(state.shape),
                                             "name": "cpu rng state",
                                             "requires_grad": False}]})
        if reentrant:
            rec.held.append(tid)
        else:
            saves.append({"tensor": tid})
    kwargs = {k: v for k, v in kwargs.items()
              if k not in ("use_reentrant", "preserve_rng_state")}
    begin_op = {"op": "checkpoint_begin", "saves": saves}
    if not reentrant:
        begin_op["reentrant"] = False
    rec.program_ops.append(begin_op)
    begin = len(rec.program_ops) - 1
    out = function(*args, **kwargs)
    rec.settle()
    rec.program_ops.append({"op": "checkpoint_end"})
    rec.regions.append((begin, function, args, kwargs))
    return out
