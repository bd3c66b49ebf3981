"""Tensors as a program counts them: by storage (a view or an in-place result is the storage it
shares), with the storage's bytes, and dtypes by the program's names (fp32, bf16, ...)."""

import torch

from .errors import UsageError

DTYPES = {torch.float64: "fp64", torch.float32: "fp32", torch.float16: "fp16",
          torch.bfloat16: "bf16", torch.int64: "int64", torch.int32: "int32",
          torch.int16: "int16", torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool",
          torch.complex64: "complex64", torch.complex128: "complex128"}
if hasattr(torch, "complex32"):  # torch.chalf: two fp16s
    DTYPES[torch.complex32] = "complex32"

# The dtypes whose tensors carry gradients: floating point and complex.
GRAD_DTYPES = ("fp64", "fp32", "fp16", "bf16", "complex32", "complex64", "complex128")


# The floating-point dtypes a model can be recorded in (record_program.py --dtype), by name.
DTYPES_BY_NAME = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _storage(t):
    """The tensor's untyped storage: `untyped_storage()` from torch 2.0 on, where `storage()`
    warns that TypedStorage is deprecated; `storage()` on torch 1.13, which has no
    untyped_storage (its TypedStorage has the same _cdata and nbytes)."""
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


def storage_key(t):
    return _storage(t)._cdata


def storage_bytes(t):
    return _storage(t).nbytes()


class DTypeError(UsageError):
    """A tensor whose dtype a program cannot say; the caller adds which tensor, op and module."""


def dtype_name(dtype):
    if dtype not in DTYPES:
        raise DTypeError(f"a tensor of dtype {dtype} is not expressible in a program (it "
                         f"knows {', '.join(sorted(set(DTYPES.values())))})")
    return DTYPES[dtype]
