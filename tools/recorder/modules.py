"""The model's module tree as FSDP instances: which modules are instances (--wrap,
--wrap-policy, or the units of a model already wrapped), which instance owns each parameter,
and the wrappings FSDP refuses (a parameter shared across instances)."""

import sys

from .errors import UsageError


def choose_instances(model, wrap, policy):
    """The instance modules: the root (the whole model) first, then every module whose class
    name is in `wrap` or for which policy(module, name) is true, in named_modules() order."""
    modules = [model]
    classes_seen = {type(m).__name__ for m in model.modules()}
    missing = [c for c in wrap if c not in classes_seen]
    if missing:
        raise UsageError(f"--wrap {', '.join(missing)}: the model has no module of that class "
                         f"(its classes: {', '.join(sorted(classes_seen))})")
    for name, module in model.named_modules():
        if module is model:
            continue
        chosen = type(module).__name__ in wrap
        if policy is not None:
            try:
                chosen = chosen or bool(policy(module, name))
            except Exception as e:
                raise UsageError(f"--wrap-policy failed on module '{name}': "
                                 f"{type(e).__name__}: {e}")
        if chosen:
            modules.append(module)
    return modules


def owned_params(model, instances):
    """[(instance index, name, parameter)]: the innermost instance owns a parameter (instances
    are in named_modules order, so a nested one comes after its parent and overrides it), in
    the order the instances first reach each parameter. Parameters are named as the model names
    them (a tied one by its first name), so names are unique in the program."""
    full_name = {p: n for n, p in model.named_parameters()}
    owner = {}
    for f, module in enumerate(instances):
        for _, p in module.named_parameters():
            owner[p] = f
    return [(f, full_name[p], p) for p, f in owner.items()]


def check_shared_params(model, instances):
    """Refuses a wrapping that puts the modules sharing one parameter (an embedding tied to the
    LM head) in different instances. FSDP1 and fully_shard both require a shared parameter to
    be in one unit, the lowest common ancestor of the modules that use it (torch's FSDP docs,
    "shared parameters"); a module whose unit is not that one would read it resharded. Each
    module belongs to the innermost instance around it, as the recorder assigns parameters."""
    names = {m: n or "root" for n, m in model.named_modules()}
    unit = {}
    for f, module in enumerate(instances):
        for sub in module.modules():
            unit[sub] = f
    users = {}
    for name, module in model.named_modules(remove_duplicate=False):
        for pname, p in module.named_parameters(recurse=False):
            users.setdefault(p, []).append((f"{name}.{pname}" if name else pname, unit[module]))
    for p, uses in users.items():
        if len({f for _, f in uses}) > 1:
            said = ", ".join(f"'{n}' (instance '{names[instances[f]]}')" for n, f in uses)
            raise UsageError(f"a parameter is shared across FSDP instances: {said}. FSDP needs a "
                             "shared parameter in one instance, around every module that uses "
                             "it: wrap their common ancestor, or leave the module that holds it "
                             "unwrapped (a tied embedding stays in the root)")


def check_wrapped(fsdp, wrap, policy, flatten):
    """The units of a wrapped model are its own: --wrap and --wrap-policy are errors. Returns
    whether its units flatten their parameters: FSDP1 does (a FlatParameter per unit, so
    --no-flatten is an error too), fully_shard does not (each parameter sharded on its own)."""
    implementation = fsdp["implementation"]
    if wrap or policy is not None:
        raise UsageError(f"build_model() returned a model already wrapped with {implementation}: "
                         "its units are read from it; --wrap and --wrap-policy apply only to an "
                         "unwrapped model")
    if implementation == "fsdp1" and not flatten:
        raise UsageError("build_model() returned a model wrapped with FSDP1, which flattens each "
                         "unit's parameters into one FlatParameter: --no-flatten does not apply")
    if implementation == "fsdp1" and fsdp["settings"]["sharding_strategy"] == "NO_SHARD":
        import torch.distributed as dist
        if dist.get_world_size() == 1:
            print("record_program: note: FSDP1 makes every strategy NO_SHARD at world size 1, "
                  "the size of the process group the model was wrapped under: the settings "
                  "say NO_SHARD", file=sys.stderr)
    return implementation == "fsdp1"
