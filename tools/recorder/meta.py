"""Recording on the meta device: the user's model and batch built there, and the ops torch has
no meta kernel for run on the CPU on all-ones inputs of the same shapes."""

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map

_FACTORIES = {torch.empty, torch.zeros, torch.ones, torch.full, torch.rand, torch.randn,
              torch.randint, torch.arange, torch.tensor, torch.empty_strided, torch.eye,
              torch.linspace, torch.randperm, torch.as_tensor, torch.zeros_like,
              torch.ones_like, torch.empty_like, torch.rand_like, torch.randn_like,
              torch.full_like}


class OnMeta(TorchFunctionMode):
    """Factory calls that name no device make meta tensors (what torch 2's
    `with torch.device('meta')` does; torch 1.13 has no such context)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in _FACTORIES and kwargs.get("device") is None:
            kwargs["device"] = "meta"
            if func is torch.as_tensor or func is torch.tensor:
                kwargs.pop("device")
                return func(*args, **kwargs).to("meta")
        return func(*args, **kwargs)


def meta_fallback(func, args, kwargs):
    """Runs an op without a meta kernel on CPU ones of its inputs' shapes. Meta tensors have no
    values: where an output's size depends on them (nonzero, masked_select, repeat_interleave's
    repeats, unique) it is that of all-ones inputs: everything selected, every repeat 1."""
    def to_cpu(t):
        if isinstance(t, torch.Tensor) and t.device.type == "meta":
            return torch.ones(t.shape, dtype=t.dtype)
        return t

    def to_meta(t):
        if isinstance(t, torch.Tensor):
            return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
        return t

    out = func(*tree_map(to_cpu, args), **tree_map(to_cpu, kwargs))
    if func._schema.is_mutable and args and isinstance(args[0], torch.Tensor):
        return args[0]
    return tree_map(to_meta, out)
