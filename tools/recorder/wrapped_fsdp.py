"""A model already wrapped with PyTorch's FSDP1 (FullyShardedDataParallel) or FSDP2
(fully_shard), as tools/record_program.py reads it: its units and their settings in PyTorch's
names (the program's `fsdp` key), and the model unwrapped in place, each unit's parameters the
original ones again, so that it is recorded as any other model. Needs torch 2.x for a wrapped
model (FSDP1 does not import under Debian's torch 1.13: fsdp_classes() then finds none).
"""

import gc

import torch


class UnwrapError(Exception):
    """A wrapped model this module cannot unwrap: the message says why."""


def fsdp_classes():
    """FSDP1's FullyShardedDataParallel and FSDP2's FSDPModule (the class fully_shard mixes into
    each module it wraps), None where this torch has not them (torch.distributed.fsdp does not
    import under torch 1.13 and Python 3.11; FSDPModule is there from torch 2.6)."""
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel as fsdp1
    except Exception:
        return None, None
    try:
        from torch.distributed.fsdp import FSDPModule as fsdp2
    except ImportError:
        fsdp2 = None
    return fsdp1, fsdp2


def start_process_group():
    """FSDP1 and fully_shard wrap a model only under a default process group. When the user's
    code has started none, the recorder starts one of world size 2 on torch's fake backend (its
    collectives do nothing: no network, no other process), so that build_model() can wrap, and
    FSDP1 keeps the sharding strategy it was given (at world size 1 it makes every strategy
    NO_SHARD). Returns whether it started one; False on a torch without the fake backend."""
    import torch.distributed as dist
    if not dist.is_available() or dist.is_initialized():
        return False
    try:
        from torch.testing._internal.distributed.fake_pg import FakeStore
    except Exception:  # torch 1.13: no fake backend (and no FSDP that imports)
        return False
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    return True


def setting(value):
    """A setting as PyTorch names it: an enum member's name, a dtype's name without "torch.",
    a dataclass's public fields, None as null."""
    import dataclasses
    import enum
    if isinstance(value, torch.dtype):
        return str(value).replace("torch.", "")
    if isinstance(value, enum.Enum):
        return value.name
    if dataclasses.is_dataclass(value):
        return {f.name: setting(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not f.name.startswith("_")}
    return value


def fsdp1_settings(wrapper):
    return {"sharding_strategy": setting(wrapper.sharding_strategy),
            "backward_prefetch": setting(wrapper.backward_prefetch),
            "forward_prefetch": wrapper.forward_prefetch,
            "limit_all_gathers": wrapper.limit_all_gathers,
            "use_orig_params": wrapper._use_orig_params,
            "mixed_precision": setting(wrapper.mixed_precision),
            "cpu_offload": setting(wrapper.cpu_offload)}


def fsdp2_settings(module):
    """reshard_after_forward: True, False, or the int size of the mesh it reshards to;
    offload_policy: null (none) or CPUOffloadPolicy's fields; modules_to_forward_prefetch and
    modules_to_backward_prefetch: the modules set_modules_to_forward_prefetch and
    set_modules_to_backward_prefetch gave it (FSDPState._states_to_forward_prefetch,
    _states_to_backward_prefetch), as module objects until unwrap_fsdp names them."""
    state = module._get_fsdp_state()
    group = state._fsdp_param_group  # None for a module with no parameters of its own
    out = {}
    if group is not None:
        after = group.post_forward_mesh_info
        out["reshard_after_forward"] = (False if after is None else True
                                        if after == group.mesh_info else after.shard_mesh_size)
    out["mp_policy"] = setting(state._mp_policy)
    if group is not None:
        policy = group.offload_policy
        out["offload_policy"] = setting(policy) if type(policy).__name__ != "OffloadPolicy" \
            else None
    for key, states in (("modules_to_forward_prefetch", state._states_to_forward_prefetch),
                        ("modules_to_backward_prefetch", state._states_to_backward_prefetch)):
        out[key] = [s._modules[0] for s in states]
    return out


def _strip_wrappers(module, inner):
    """Replaces, under `module`, every child for which inner(child) gives a module by that."""
    for name, child in list(module.named_children()):
        replacement = inner(child)
        if replacement is not None:
            setattr(module, name, replacement)
            child = replacement
        _strip_wrappers(child, inner)


def _set_parameter(model, name, value, requires_grad):
    *path, leaf = name.split(".")
    parent = model.get_submodule(".".join(path))
    parent._parameters.pop(leaf, None)
    if leaf in parent.__dict__:  # FSDP1's unsharded views are plain attributes
        delattr(parent, leaf)
    parent.register_parameter(leaf, torch.nn.Parameter(value, requires_grad=requires_grad))


def _unwrap_fsdp1(model, fsdp1):
    """The model as it was before FSDP1 wrapped it: each wrapper replaced by the module it
    wraps, the flat parameters by the original ones, unsharded (summon_full_params)."""
    with fsdp1.summon_full_params(model, writeback=False):
        full = {name: (p.detach().clone(), p.requires_grad)
                for name, p in model.named_parameters()}
    model = model.module if isinstance(model, fsdp1) else model
    _strip_wrappers(model, lambda m: m.module if isinstance(m, fsdp1) else None)
    for module in model.modules():
        module._parameters.pop("_flat_param", None)
    for name, (value, requires_grad) in full.items():
        _set_parameter(model, name, value, requires_grad)
    return model


def _unwrap_fsdp2(model, fsdp2):
    """The model as it was before fully_shard: each unit's hooks and state removed, its class
    the model's own again, each sharded parameter (a DTensor) replaced by its full tensor."""
    from torch.distributed._composable_state import _module_state_mapping
    for module in [m for m in model.modules() if isinstance(m, fsdp2)]:
        state = module._get_fsdp_state()
        state._pre_forward_hook_handle.remove()
        state._post_forward_hook_handle.remove()
        group = state._fsdp_param_group
        if group is not None:  # state-dict hooks: they hold the sharded parameters
            for handles in (group._module_to_pre_save_state_dict_hook_handle,
                            group._module_to_pre_load_state_dict_hook_handle):
                for handle in handles.values():
                    handle.remove()
            for fsdp_param in group.fsdp_params:
                fsdp_param._post_load_hook_handle.remove()
        _module_state_mapping.pop(module, None)
        for key in [k for k in module.__dict__ if k.startswith("__composable_api_state_key")]:
            del module.__dict__[key]
        module.__class__ = next(c for c in type(module).__bases__ if not issubclass(c, fsdp2))
    full = {}
    for name, p in model.named_parameters():
        if hasattr(p, "full_tensor"):
            full[name] = (p.full_tensor().detach().clone(), p.requires_grad)
    for name, (value, requires_grad) in full.items():
        _set_parameter(model, name, value, requires_grad)
    return model


def unwrap_fsdp(model, fill=False):
    """(the model unwrapped, its instance modules, the program's "fsdp" value) for a model that
    build_model() returned wrapped with FSDP1 or fully_shard, else (model, None, None). The
    units are the wrapped modules in named_modules() order, the root (the whole model) first
    whether wrapped or not; "settings" are the first unit's (the root's when it is wrapped),
    "instances" the settings of later units that differ from those, by instance name. With
    `fill` (the recorder's own fake process group, which gathers nothing), the unsharded
    parameters get deterministic values instead of uninitialized memory."""
    fsdp1, fsdp2 = fsdp_classes()
    if fsdp1 is None:
        return model, None, None
    if any(isinstance(m, fsdp1) for m in model.modules()):
        implementation, wrapped = "fsdp1", fsdp1
        units = [(m.module, fsdp1_settings(m)) for m in model.modules() if isinstance(m, fsdp1)]
        model = _unwrap_fsdp1(model, fsdp1)
    elif fsdp2 is not None and any(isinstance(m, fsdp2) for m in model.modules()):
        implementation, wrapped = "fsdp2", fsdp2
        units = [(m, fsdp2_settings(m)) for m in model.modules() if isinstance(m, fsdp2)]
        model = _unwrap_fsdp2(model, fsdp2)
    else:
        return model, None, None
    if any(isinstance(m, wrapped) for m in model.modules()):
        raise UnwrapError("the model mixes FSDP1 and fully_shard, or could not be unwrapped")
    if fill:
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for p in model.parameters():
                if p.is_floating_point():
                    p.uniform_(-0.1, 0.1, generator=generator)
    names = {m: n or "root" for n, m in model.named_modules()}
    for _, settings in units:  # FSDP2's prefetch lists: the units by instance name
        for key in ("modules_to_forward_prefetch", "modules_to_backward_prefetch"):
            if key in settings:
                settings[key] = [names[m] for m in settings[key]]
    instances = [model] + [m for m, _ in units if m is not model]
    first = units[0][1]
    differing = {}
    for module, settings in units[1:]:
        diff = {k: v for k, v in settings.items() if first.get(k) != v}
        if diff:
            differing[names[module]] = diff
    fsdp = {"implementation": implementation, "settings": first}
    if differing:
        fsdp["instances"] = differing
    gc.collect()  # FSDP's objects hold cycles: their memory goes now, not in a measured step
    return model, instances, fsdp
