"""The optimizer of a training step: torch.optim's, by bucketsim's names, and the program's
`optimizer` key.

OPTIMIZERS are bucketsim's --optimizer names, IMPLS its --optimizer-impl names for torch.optim's
three implementations of a step; make_optimizer builds one, default_impl and
default_weight_decay say what torch picks when they are not given. optimizer_key is the
program's key from the recorder's flags (only what was given), measured_step the optimizer the
measured step runs with (what was given, else the recording device's defaults).
"""

import inspect

import torch

from .errors import UsageError

OPTIMIZERS = ("sgd", "sgd-momentum", "adam", "adamw")
# torch.optim's three implementations of a step: a Python loop over the parameters (foreach=False),
# torch._foreach_* ops over all of them (foreach=True), one fused kernel (fused=True).
IMPLS = ("for-loop", "foreach", "fused")


class OptimizerError(ValueError):
    """An optimizer, implementation or setting this torch cannot make: the message says why."""


def optimizer_class(name):
    if name not in OPTIMIZERS:
        raise OptimizerError(f"unknown optimizer '{name}' (expected {', '.join(OPTIMIZERS)})")
    return {"sgd": torch.optim.SGD, "sgd-momentum": torch.optim.SGD, "adam": torch.optim.Adam,
            "adamw": torch.optim.AdamW}[name]


def default_weight_decay(name):
    """torch's default weight decay of the optimizer `name` (0 for SGD and Adam, 0.01 for
    AdamW), read from its constructor."""
    return float(inspect.signature(optimizer_class(name).__init__)
                 .parameters["weight_decay"].default)


def default_impl(device):
    """The implementation torch picks when neither foreach nor fused is given: torch 2.x's
    _default_to_fused_or_foreach picks foreach where every parameter is on CUDA, else the loop;
    torch 1.x always the loop (torch 1.13's Adam, AdamW and SGD set foreach = False when it is
    None)."""
    if device == "cuda" and int(torch.__version__.split(".")[0]) >= 2:
        return "foreach"
    return "for-loop"


def fused_devices():
    """The device types with fused optimizer kernels in this torch (torch 1.13 has no list: its
    only fused optimizer, Adam, runs on CUDA alone)."""
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices
    except ImportError:
        return ["cuda"]
    return _get_fused_kernels_supported_devices()


def make_optimizer(name, params, lr=0.01, impl=None, weight_decay=None):
    """sgd (no state), sgd-momentum (one buffer per parameter), adam and adamw (two, and a step
    count per parameter): bucketsim's --optimizer names, with bucketsim's --optimizer-impl names
    (IMPLS) and a weight decay (None: torch's default, default_weight_decay). impl None is what
    this tool always made: torch's default, but adam's loop asked for by name (foreach=False),
    which is torch's default on the CPU anyway."""
    params = list(params)
    cls = optimizer_class(name)
    kwargs = {"lr": lr}
    if name == "sgd-momentum":
        kwargs["momentum"] = 0.9
    if weight_decay is not None:
        kwargs["weight_decay"] = weight_decay
    if impl is None and name == "adam":
        impl = "for-loop"
    if impl == "for-loop":
        kwargs["foreach"] = False
    elif impl == "foreach":
        kwargs["foreach"] = True
    elif impl == "fused":
        if "fused" not in inspect.signature(cls.__init__).parameters:
            raise OptimizerError(f"--optimizer-impl fused: torch {torch.__version__}'s "
                                 f"{cls.__name__} has no fused implementation (later torch "
                                 "versions have one)")
        devices = {p.device.type for p in params} - set(fused_devices())
        if devices:
            raise OptimizerError(f"--optimizer-impl fused: torch {torch.__version__}'s fused "
                                 f"{cls.__name__} does not run on "
                                 f"{', '.join(sorted(devices))} (only on "
                                 f"{', '.join(fused_devices())})")
        kwargs["fused"] = True
    elif impl is not None:
        raise OptimizerError(f"unknown optimizer implementation '{impl}' (expected "
                             f"{', '.join(IMPLS)})")
    return cls(params, **kwargs)


def optimizer_key(name, impl, weight_decay):
    """The program's `optimizer` key from --optimizer, --optimizer-impl and --weight-decay: the
    name, and the other two only where given (None without --optimizer)."""
    if name is None:
        given = [flag for flag, value in (("--optimizer-impl", impl),
                                          ("--weight-decay", weight_decay))
                 if value is not None]
        if given:
            raise UsageError(f"{given[0]} needs --optimizer (the optimizer it sets)")
        return None
    if weight_decay is not None and weight_decay < 0:
        raise UsageError(f"--weight-decay {weight_decay:g}: must be 0 or more")
    key = {"name": name}
    if impl is not None:
        key["impl"] = impl
    if weight_decay is not None:
        key["weight_decay"] = weight_decay
    return key


def measured_step(key, device):
    """{"name", "impl", "weight_decay"}: the optimizer the measured step runs with. The key's
    settings, and for those it leaves out the recording device's defaults (default_impl,
    default_weight_decay); without a key (no --optimizer) plain SGD as make_optimizer makes it
    (impl and weight decay None)."""
    if key is None:
        return {"name": "sgd", "impl": None, "weight_decay": None}
    return {"name": key["name"], "impl": key.get("impl") or default_impl(device),
            "weight_decay": key.get("weight_decay", default_weight_decay(key["name"]))}


def step_note(step, key):
    """What the measured block's note adds: the optimizer, with its implementation and weight
    decay where the program has an optimizer key."""
    return f"; optimizer {step['name']}" + (
        f" ({step['impl']}, weight decay {step['weight_decay']:g})" if key else "")
