"""Selective activation checkpointing policies as torch 2.6 runs them, named as bucketsim's
`gen program --checkpoint-save` names them, for the real runs it is held against
(fsdp_measure.py, fake_mem_tracker.py).

    context_fn = sac_policy.context_fn("mm/2,_scaled_dot_product_flash_attention")
    checkpoint_wrapper(block, checkpoint_impl=CheckpointImpl.NO_REENTRANT, context_fn=context_fn)

SPEC: "torchtitan", "torchtitan-2026", or ops separated by commas (or ';'), each OP (its calls
saved) or OP[+OP...]/N (their calls share a counter and every N-th is recomputed). An op is
matched by its overload packet (aten.mm.default is "mm"). The policy is torchtitan's form
(9dec370 torchtitan/parallelisms/parallelize_llama.py, _get_custom_policy): torch 2.6 calls it
before every op of a region's forward and again, with ctx.is_recompute, before every op its
recompute dispatches, so the counters are kept per phase, in a dict made anew for each
region's forward (each call of context_fn)."""

import collections

NAMED = {
    "torchtitan": "mm/2,_scaled_dot_product_efficient_attention,"
                  "_scaled_dot_product_flash_attention,reduce_scatter_tensor,abs,max",
    "torchtitan-2026": "mm+linear/2,convolution,convolution_backward,bmm,addmm,"
                       "_scaled_dot_product_flash_attention,"
                       "_scaled_dot_product_efficient_attention,_flash_attention_forward,"
                       "_efficient_attention_forward,upsample_bilinear2d,_scaled_mm,"
                       "_scaled_dot_product_cudnn_attention,_scaled_dot_product_attention_math,"
                       "_scaled_dot_product_fused_attention_overrideable,max,topk,"
                       "reduce_scatter_tensor,all_to_all_single",
}


NAMESPACES = ("torch", "ops", "aten", "_c10d_functional", "c10d_functional", "c10d")


def packet(op):
    """"mm" of mm, aten.mm, aten.mm.default, torch.ops.aten.mm.default."""
    parts = op.split(".")
    while len(parts) > 1 and parts[0] in NAMESPACES:
        parts.pop(0)
    return parts[0]


def rules(spec):
    """[(ops, N)] of a SPEC, N 0 where every call is saved."""
    out = []
    for item in NAMED.get(spec, spec).replace(";", ",").split(","):
        ops, _, every = item.partition("/")
        out.append((tuple(packet(o) for o in ops.split("+")), int(every) if every else 0))
    return out


def context_fn(spec):
    """A context_fn for torch.utils.checkpoint.checkpoint(..., use_reentrant=False)."""
    import functools
    from torch.utils.checkpoint import (CheckpointPolicy,
                                        create_selective_checkpoint_contexts)
    policy_rules = rules(spec)

    def policy(meta, ctx, func, *args, **kwargs):
        name = func.overloadpacket.__name__
        for r, (ops, every) in enumerate(policy_rules):
            if name not in ops:
                continue
            if not every:
                return CheckpointPolicy.MUST_SAVE
            key = ("recompute" if ctx.is_recompute else "forward", r)
            meta[key] += 1
            return CheckpointPolicy.MUST_SAVE if meta[key] % every else \
                CheckpointPolicy.PREFER_RECOMPUTE
        return CheckpointPolicy.PREFER_RECOMPUTE

    def make():
        return create_selective_checkpoint_contexts(
            functools.partial(policy, collections.defaultdict(int)))
    return make
