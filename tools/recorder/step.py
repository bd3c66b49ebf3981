"""One training step of the user's model, as the recorder and the measuring run it.

make_batch() gives the forward's arguments (as_call: a tensor, a tuple of them, or a dict of
keyword arguments as Hugging Face models take them); the forward's output gives the loss
(to_loss: a scalar, a tensor's mean, a tuple's first element, a dict's "loss"). run_step runs
whole steps, calling back at bucketsim's marks.
"""

import functools
from collections.abc import Mapping

import torch

from .optimizer import make_optimizer


class LossError(ValueError):
    """The forward's output holds no loss bucketsim can take: the message says what it held."""


class BatchError(ValueError):
    """make_batch() returned what cannot be the forward's arguments: the message says why."""


def to_loss(out):
    """The loss backward() is called on, from the forward's output: a scalar tensor is the loss;
    another tensor's mean is (a mean over an activation, as fairscale's memory test and
    bucketsim's presets do); a tuple or list gives its first element (Hugging Face's
    return_dict=False puts the loss first); a mapping (a dict, Hugging Face's ModelOutput) its
    "loss", which must be there: the mean of some other entry would be a guess."""
    if isinstance(out, (tuple, list)):
        if not out:
            raise LossError(f"the forward returned an empty {type(out).__name__}")
        out = out[0]
    if isinstance(out, Mapping):
        loss = out.get("loss")
        if loss is None:
            keys = ", ".join(repr(k) for k in out.keys()) or "none"
            raise LossError(f"the forward returned a {type(out).__name__} without a 'loss' "
                            f"(its keys: {keys}): give the model what it computes its loss "
                            "from (e.g. 'labels' in the batch dict), or return the loss")
        out = loss
    if not isinstance(out, torch.Tensor):
        raise LossError(f"the forward returned {type(out).__name__}, not a tensor, a tuple or a "
                        "dict with a 'loss'")
    return out if out.dim() == 0 else out.mean()


# Values a batch may pass to the forward as they are (not tensors: no memory of their own).
PLAIN = (bool, int, float, str, type(None))


def as_call(batch):
    """The forward's (args, kwargs) from what make_batch() returned: a tensor is the one
    argument, a tuple or list the positional arguments, a mapping the keyword arguments
    (model(**batch), the Hugging Face convention). Each value is a tensor or a plain Python
    value (bool, int, float, str, None)."""
    if isinstance(batch, Mapping):
        args, kwargs = [], dict(batch)
        bad = [k for k in kwargs if not isinstance(k, str)]
        if bad:
            raise BatchError(f"make_batch() returned a {type(batch).__name__} with key {bad[0]!r}: "
                             "keyword arguments are named by strings")
    elif isinstance(batch, (tuple, list)):
        args, kwargs = list(batch), {}
    else:
        args, kwargs = [batch], {}
    for where, value in [(f"[{i}]", v) for i, v in enumerate(args)] + \
                        [(f"[{k!r}]", v) for k, v in kwargs.items()]:
        if not isinstance(value, (torch.Tensor,) + PLAIN):
            raise BatchError(f"make_batch(){where} is a {type(value).__name__}: the forward's "
                             "arguments must be tensors or plain values (bool, int, float, str, "
                             "None); make_batch() returns a tensor, a tuple of them, or a dict "
                             "of keyword arguments")
    return args, kwargs


def batch_on(call, device):
    """(args, kwargs) with every tensor moved to `device`."""
    args, kwargs = call
    move = (lambda v: v.to(device) if isinstance(v, torch.Tensor) else v)
    return [move(v) for v in args], {k: move(v) for k, v in kwargs.items()}


def in_dtype(build_model, make_batch, dtype):
    """build_model and make_batch with the model's floating-point parameters and buffers
    converted to `dtype` and the batch's floating-point tensors too (a tuple, list or mapping of
    them, or one); integer tensors (token ids), complex ones and plain values stay. (model.to(
    dtype) would cast a complex buffer, a rotary embedding's freqs_cis, to a real dtype,
    discarding its imaginary part.) make_batch keeps its arguments (a size)."""
    def cast(value):
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.to(dtype)
        if isinstance(value, Mapping):
            return {k: cast(v) for k, v in value.items()}
        if isinstance(value, (tuple, list)):
            return type(value)(cast(v) for v in value)
        return value

    @functools.wraps(build_model)  # errors name the user's function (load.function_name)
    def build():
        return build_model()._apply(
            lambda t: t.to(dtype) if t.is_floating_point() else t)

    @functools.wraps(make_batch)
    def batch(*args, **kwargs):
        return cast(make_batch(*args, **kwargs))
    return build, batch


def autocast_forward(model, dtype, device_type):
    """`model` with its forward run under torch.autocast(device_type, dtype), as a training loop
    that wraps its forward and loss in autocast runs it (the backward outside, as PyTorch's AMP
    recipe does). autocast picks the ops to cast by the device's own lists: the CPU's are not
    CUDA's."""
    forward = model.forward

    @functools.wraps(forward)
    def under_autocast(*args, **kwargs):
        with torch.autocast(device_type, dtype=dtype):
            return forward(*args, **kwargs)
    model.forward = under_autocast
    return model


def under_autocast(build_model, dtype, device_type):
    """build_model with its model's forward under autocast (autocast_forward)."""
    @functools.wraps(build_model)  # errors name the user's function (load.function_name)
    def build():
        return autocast_forward(build_model(), dtype, device_type)
    return build


def run_step(build_model, make_batch, optimizer, device, mark, iterations=1, impl=None,
             weight_decay=None):
    """Training steps with `mark(name)` called at each of measure.MARKS: "start" once, then the
    other marks in every one of `iterations` steps; the optimizer is make_optimizer(optimizer,
    ..., impl=impl, weight_decay=weight_decay)."""
    model = build_model().to(device)
    model.train()
    args, kwargs = batch_on(as_call(make_batch()), device)
    opt = make_optimizer(optimizer, model.parameters(), impl=impl, weight_decay=weight_decay)
    mark("start")
    for _ in range(iterations):
        loss = to_loss(model(*args, **kwargs))
        mark("after fwd")
        loss.backward()
        mark("after bwd")
        opt.step()
        mark("after step")
        opt.zero_grad(set_to_none=True)
        del loss
        mark("done")
    return model, (args, kwargs), opt  # alive until the caller has read its figures
