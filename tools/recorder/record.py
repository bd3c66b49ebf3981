"""The recording of one model, start to end: the user's model and batch built (on meta under
OnMeta), a model already wrapped with FSDP unwrapped, the instances chosen, the forward and the
loss run once under the Recorder, then the autograd graph read (saves, param_reads), the
forward run again under no_grad (releases, lifetimes.py) and, on cpu and cuda, the backward run
(gradient kinds). Returns the program (program.py) and the Recorder."""

import contextlib
import sys

import torch

from . import checkpoint, graph, lifetimes
from .dispatch import Recorder
from .errors import UsageError
from .load import call_user, function_name, user_frame
from .meta import OnMeta
from .modules import check_shared_params, check_wrapped, choose_instances
from .program import program_of
from .target import OnTarget
from .step import BatchError, LossError, as_call, autocast_forward, batch_on, to_loss
from .tensors import storage_bytes, storage_key
from .wrapped_fsdp import UnwrapError, start_process_group, unwrap_fsdp


def record(build_model, make_batch, wrap, policy, device, description, flatten=True,
           autocast=None, target=None):
    """(the program, the Recorder) of build_model() on make_batch() on `device`: the instances
    from `wrap` (class names) and `policy` (FN(module, name) -> bool, or None), each owning one
    flat parameter with `flatten`. Warnings and notes go to stderr; what cannot be recorded is
    a UsageError. `autocast`: a dtype to run the forward under torch.autocast in (cpu, cuda).
    `target` (target.Target): the device the program is recorded for; its ops run as there
    (OnTarget) from the forward to the lifetimes' second run."""
    meta = device == "meta"
    own_group = start_process_group()
    mode = OnMeta() if meta else None
    if mode:
        mode.__enter__()
    try:
        model = call_user(build_model)
        batch = call_user(make_batch)
    finally:
        if mode:
            mode.__exit__(None, None, None)
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"{function_name(build_model)} returned {type(model).__name__}, not a "
                         "torch.nn.Module")
    try:
        args, kwargs = as_call(batch)
    except BatchError as e:
        raise UsageError(str(e).replace("make_batch()", function_name(make_batch)))
    try:
        model, instances, fsdp = unwrap_fsdp(model, fill=own_group)
    except UnwrapError as e:
        raise UsageError(str(e))
    if fsdp is not None:
        flatten = check_wrapped(fsdp, wrap, policy, flatten)
    if autocast is not None:  # on the model unwrapped: its forward is the one that runs
        autocast_forward(model, autocast, device)
    if not meta:
        model = model.to(device)
        args, kwargs = batch_on((args, kwargs), device)
    model.train()
    if instances is None:
        instances = choose_instances(model, wrap, policy)
        check_shared_params(model, instances)
    rec = Recorder(model, instances, device, target)
    rec.own_group = own_group
    on_target = OnTarget(target, where=rec.where_class) if target is not None \
        else contextlib.nullcontext()
    with on_target:
        return _record_forward(rec, model, args, kwargs, device, description, flatten, fsdp)


def _record_forward(rec, model, args, kwargs, device, description, flatten, fsdp):
    """The forward and the loss under the Recorder, the graph read, the forward again for the
    lifetimes, the backward for the gradient kinds: the program and the Recorder."""
    meta = device == "meta"
    inputs = [rec.add_input(b, f"buffer {name}") for name, b in rec.buffers.values()]
    inputs += [rec.add_input(b, f"batch[{i}]") for i, b in enumerate(args)
               if isinstance(b, torch.Tensor)]
    inputs += [rec.add_input(b, f"batch[{k!r}]") for k, b in kwargs.items()
               if isinstance(b, torch.Tensor)]
    packed = {}

    def pack(t):
        # A CPU scalar saved by a device op is not device memory (left out by the walk too).
        if t.layout == torch.strided and t.device.type == device and \
                storage_key(t) not in rec.host_keys:
            packed[storage_key(t)] = storage_bytes(t)
        return t

    try:
        with checkpoint.recording(rec):
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                with rec:
                    out = model(*args, **kwargs)
                    loss = to_loss(out)
    except UsageError:
        raise
    except LossError as e:
        raise UsageError(str(e))
    except Exception as e:
        where = ""
        if rec.module_stack:
            name = rec.module_stack[-1]
            where = f", in module '{name}' ({type(rec.modules[name]).__name__})"
        raise UsageError(f"the model's forward raised {type(e).__name__}: {e}{where}"
                         f"{user_frame(e)}")
    if loss.grad_fn is None:
        raise UsageError("the loss does not require grad: nothing to train")
    unattributed = graph.attribute_saves(rec, loss)
    graph.attribute_param_reads(rec, loss)
    skipped = lifetimes.attribute_releases(rec, lambda: to_loss(model(*args, **kwargs)))
    if skipped:
        regions = len(skipped) - 1
        print("record_program: warning: the forward did not run again under no_grad as "
              "recorded (code that branches on grad mode or random numbers?): the Python "
              "lifetimes of its tensors are left out"
              + (f", and of {regions} checkpointed region(s) that did not either" if regions
                 else ""), file=sys.stderr)
    if rec.id_of(loss) is None:
        raise UsageError("the loss is not a tensor the forward made")
    if not meta:  # backward on meta tensors fails for convolutions in torch 1.13
        try:
            graph.measure_grad_kinds(rec, loss)
        except Exception as e:
            raise UsageError(f"the model's backward raised {type(e).__name__}: {e}"
                             f"{user_frame(e)}")
    missing_packs = [k for k in packed if k not in rec.param_instance and k not in rec.tensors
                     and k not in rec.buffers]
    if unattributed or missing_packs:
        print(f"record_program: warning: {unattributed + len(missing_packs)} saved tensor(s) "
              "could not be attributed to a run and are left out", file=sys.stderr)
    rec.set_requires_grad()
    program = program_of(description, zip(rec.instance_names, rec.instance_params), inputs,
                         rec.program_ops, rec.id_of(loss), flatten, rec.held, fsdp, rec.calls)
    return program, rec
