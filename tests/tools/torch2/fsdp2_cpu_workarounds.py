"""Three monkey-patches that make torch 2.6's FSDP2 (fully_shard) train correctly on CPU with
gloo (shared/reference/torch2_on_cpu.md, "FSDP2"). The oracle harness applies them
(fsdp_measure.py); they change no allocation: none of them creates, keeps or frees a tensor
(a no-op Event, a version-counter store, an in-place division), so the memory measured with them
is FSDP2's own. Each stands in for an upstream fix and goes when the root's torch has it.

    import fsdp2_cpu_workarounds
    fsdp2_cpu_workarounds.apply()   # before the first fully_shard forward
"""

import torch
from torch.distributed.fsdp._fully_shard import _fsdp_collectives, _fsdp_param_group


def add_cpu_stream_events():
    """torch.cpu.Stream has no record_event/wait_event in 2.6, and FSDP2 calls both on its
    "streams" (AttributeError at the first forward). pytorch PR #145935 added them to
    torch.cpu.Stream for 2.7; these are the same no-ops: CPU work runs in program order, and
    torch.cpu.Event (which exists) is already a no-op."""
    stream = torch.cpu.Stream
    if not hasattr(stream, "record_event"):
        stream.record_event = lambda self, event=None: event or torch.cpu.Event()
    if not hasattr(stream, "wait_event"):
        stream.wait_event = lambda self, event: None


def keep_version_counters_across_copy_out():
    """With reshard_after_forward=True, backward fails ("modified by an inplace operation ...
    AsStridedBackward0 ... version 2; expected version 1"): the all-gather copy-out
    (torch.ops.fsdp.split_with_sizes_copy(out=...) in foreach_all_gather_copy_out) bumps the
    version counter of each parameter's all-gather output, which autograd saw at its previous
    value through the unsharded parameter (a view of it), though the data written is the data
    it saved. FSDP2 itself undoes such a bump for its chunk-cat copy-out (the
    _unsafe_set_version_counter right after torch.cat in the same function); this does the same
    for the split copy-out, for outputs that existed before the call (the first copy-out's
    version is the one forward saves). No upstream issue is known for the CPU path; upstream's
    CUDA tests do not meet it."""
    original = _fsdp_param_group.foreach_all_gather_copy_out

    def copy_out(all_gather_result, fsdp_params, group):
        before = [(t, t._version) for p in fsdp_params for t in p.all_gather_outputs]
        original(all_gather_result, fsdp_params, group)
        for t, version in before:
            if t._version != version:
                torch._C._autograd._unsafe_set_version_counter(t, version)

    _fsdp_param_group.foreach_all_gather_copy_out = copy_out


def average_as_sum_then_divide():
    """gloo's reduce_scatter_tensor treats ReduceOp.AVG as SUM without an error (pytorch issue
    #162338), and FSDP2 asks for AVG for fp32/bf16 gradients (_get_gradient_divide_factors
    returns (None, None)): the gradients come out world-size times too large. Returning
    (1, data-parallel size) makes foreach_reduce use SUM and divide the reduce-scatter output
    in place afterwards (_div_if_needed: div_, no allocation; a factor of 1 divides nothing).
    HSDP's all-reduce follows the same factors (gloo's all_reduce(AVG) raises)."""
    original = _fsdp_collectives._get_gradient_divide_factors

    def factors(reduce_scatter_group, all_reduce_group, reduce_dtype):
        pre, post = original(reduce_scatter_group, all_reduce_group, reduce_dtype)
        if pre is not None:
            return pre, post
        size = reduce_scatter_group.size()
        if all_reduce_group is not None:
            size *= all_reduce_group.size()
        return 1.0, float(size)

    _fsdp_collectives._get_gradient_divide_factors = factors


def apply():
    add_cpu_stream_events()
    keep_version_counters_across_copy_out()
    average_as_sum_then_divide()
