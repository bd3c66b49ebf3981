"""Activation checkpointing, seen by the recorder: torch.utils.checkpoint.checkpoint replaced
(before the user's code is imported) by a function that, while a recording is under way, writes
the call as a checkpoint_begin ... checkpoint_end region. What a region's Python code keeps
alive past a tensor's last reader under no_grad (`releases`) is lifetimes.py's."""

import contextlib

import torch
import torch.utils.checkpoint

from .errors import UsageError
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


# checkpoint()'s own keyword arguments (torch 2.6 and later), not the function's.
CHECKPOINT_KWARGS = ("use_reentrant", "preserve_rng_state", "context_fn", "determinism_check",
                     "debug", "early_stop")


class SacPolicy:
    """A selective-checkpointing policy as torch 2.6 calls it (torch/utils/checkpoint.py,
    _CachingTorchDispatchMode): before every op the region's forward dispatches but
    SAC_IGNORED_OPS, with SelectiveCheckpointContext(is_recompute=False), the op and its real
    arguments; MUST_SAVE, PREFER_SAVE or True saves it. The op it is shown is the target
    device's (a meta or CPU recording for CUDA shows CUDA's attention kernel, so a policy that
    lists _scaled_dot_product_flash_attention saves it here too)."""

    def __init__(self, policy_fn):
        self.policy_fn = policy_fn

    def saves(self, func, op_name, args, kwargs):
        from torch.utils.checkpoint import (SAC_IGNORED_OPS, CheckpointPolicy,
                                            SelectiveCheckpointContext)
        if func in SAC_IGNORED_OPS:
            return False
        if op_name != func.overloadpacket.__name__:
            func = getattr(getattr(torch.ops.aten, op_name), "default", func)
        policy = self.policy_fn(SelectiveCheckpointContext(is_recompute=False), func, *args,
                                **kwargs)
        if isinstance(policy, bool):
            return policy
        return policy in (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE)


def sac_policy_of(rec, kwargs):
    """The SacPolicy of a checkpoint call's context_fn, None without one; a context_fn that is
    not create_selective_checkpoint_contexts' is refused (nothing says what it does)."""
    context_fn = kwargs.get("context_fn")
    if context_fn is None or context_fn is getattr(torch.utils.checkpoint, "noop_context_fn", None):
        return None
    contexts = context_fn()
    policy_fn = getattr(contexts[0], "policy_fn", None) if isinstance(contexts, tuple) else None
    if policy_fn is None:
        raise UsageError(f"checkpoint(context_fn=...) {rec.where_text()}: the recorder knows "
                         "the contexts of torch.utils.checkpoint."
                         "create_selective_checkpoint_contexts only; this one's effect on "
                         "memory is not known")
    return SacPolicy(policy_fn)


def region(rec, function, args, kwargs):
    """A checkpoint(function, *args, **kwargs) call in the recorded forward: checkpoint_begin
    (saves: the region's tensor arguments; reentrant: False for use_reentrant=False;
    early_stop: False where the call or torch 2.6's set_checkpoint_early_stop turns it off),
    the function's runs (with a selective-checkpointing context_fn, each run its policy saves
    marked "policy": "save"), checkpoint_end. The function runs with grad enabled, so that its
    saves (what the recompute keeps) are seen."""
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
    policy = sac_policy_of(rec, kwargs)
    early_stop = kwargs.get("early_stop", True) is not False and \
        getattr(torch.utils.checkpoint, "_enable_checkpoint_early_stop", True) is not False
    kwargs = {k: v for k, v in kwargs.items() if k not in CHECKPOINT_KWARGS}
    begin_op = {"op": "checkpoint_begin", "saves": saves}
    if not reentrant:
        begin_op["reentrant"] = False
        if not early_stop:
            begin_op["early_stop"] = False
    elif policy is not None:
        raise UsageError(f"checkpoint(context_fn=...) {rec.where_text()}: selective "
                         "checkpointing needs use_reentrant=False (torch refuses it too)")
    rec.program_ops.append(begin_op)
    begin = len(rec.program_ops) - 1
    rec.sac_policy = policy
    try:
        out = function(*args, **kwargs)
    finally:
        rec.sac_policy = None
    rec.settle()
    rec.program_ops.append({"op": "checkpoint_end"})
    rec.regions.append((begin, function, args, kwargs))
    return out
