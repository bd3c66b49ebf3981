#include "policy/group_reduce_scatter.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "policy/shard_size.h"

namespace bucketsim {

Status GroupReduceScatter::Start(const TraceHeader& header) {
  header_ = &header;
  return Status::Ok();
}

Status GroupReduceScatter::ReduceScatter(const ReduceScatterCall& call, PolicyHost& host) {
  const std::uint32_t fsdp = call.event.unit;
  Group& group = pending_[fsdp];
  const std::size_t params = header_->units[fsdp].params.size();
  group.no_grad.resize(params);
  if (call.event.shard_mode == ShardMode::kNoGrad) {
    if (!group.calls.empty()) {
      return InvalidTrace(fmt::format(
          "event {}: rs: shard 'no_grad' for fsdp {} param {} after a request of its group with "
          "a gradient (event {}): fsdp2 sizes a group's reduce-scatter input at its first "
          "request, so the parameters without a gradient come first",
          call.event.index, fsdp, call.event.param, group.calls.front().event.index));
    }
    if (!group.no_grad[call.event.param]) ++group.without_grad;
    group.no_grad[call.event.param] = true;
    // No parameter of the group got a gradient: post_backward reduces nothing.
    if (group.without_grad == params) Reset(group);
    return Status::Ok();
  }
  if (group.calls.empty()) {
    pending_order_.push_back(fsdp);
    BUCKETSIM_RETURN_IF_ERROR(BeginGroup(call, group, host));
  }
  const ReduceScatterCall& first = group.calls.empty() ? call : group.calls.front();
  if (call.group->id != first.group->id || call.event.dtype != first.event.dtype) {
    return InvalidTrace(fmt::format(
        "event {}: fsdp2 reduces an FSDP instance in one reduce-scatter, but its gradients use "
        "different process groups or dtypes ({} group {} vs {} group {})",
        call.event.index, DTypeName(call.event.dtype), call.group->id, DTypeName(first.event.dtype),
        first.group->id));
  }
  // foreach_reduce_scatter_copy_in: torch._chunk_cat of the gradients in parameter order.
  host.FillGradient({group.input, call.event.index, call.group->size(), call.event.numel,
                     call.event.dtype, ColumnOf(call, group), group.columns});
  group.calls.push_back(call);
  // The group's post-backward runs once all its gradients are ready.
  if (group.calls.size() + group.without_grad < params) return Status::Ok();
  pending_order_.erase(std::find(pending_order_.begin(), pending_order_.end(), fsdp));
  return ReduceGroup(group, host);
}

Numel GroupReduceScatter::ColumnOf(const ReduceScatterCall& call, const Group& group) const {
  Numel column = 0;
  for (std::uint32_t p = 0; p < call.event.param; ++p) {
    if (group.no_grad[p]) continue;
    column += PaddedShardNumel(header_->units[call.event.unit].params[p].numel, call.group->size());
  }
  return column;
}

void GroupReduceScatter::Reset(Group& group) {
  group.calls.clear();
  std::fill(group.no_grad.begin(), group.no_grad.end(), false);
  group.without_grad = 0;
}

Status GroupReduceScatter::BeginGroup(const ReduceScatterCall& call, Group& group,
                                      PolicyHost& host) {
  // The previous group's input is waited for and dropped before this copy-in when the limit
  // is reached (post_backward: comm_ctx.reduce_scatter_state = None before foreach_reduce).
  if (inflight_ > 0 && static_cast<int>(inputs_.size()) >= inflight_) {
    host.Release(inputs_.front());
    inputs_.pop_front();
  }
  const int ws = call.group->size();
  group.columns = 0;
  const std::vector<ParamInfo>& params = header_->units[call.event.unit].params;
  for (std::size_t p = 0; p < params.size(); ++p) {
    if (!group.no_grad[p]) group.columns += PaddedShardNumel(params[p].numel, ws);
  }
  // reduce_scatter_input = torch.empty((ws * columns,), dtype=reduce_dtype).
  group.input = host.Allocate(ws * group.columns * ElementSize(call.event.dtype),
                              Category::kBucketData, call.event.dtype, call.group->id);
  return Status::Ok();
}

Status GroupReduceScatter::ReduceGroup(Group& group, PolicyHost& host) {
  const ReduceScatterCall& first = group.calls.front();
  const ProcessGroup& pg = *first.group;
  const DType dtype = first.event.dtype;
  const int ws = pg.size();
  slices_.clear();
  for (const ReduceScatterCall& call : group.calls) {
    slices_.push_back({call.event.index, ColumnOf(call, group), call.event.numel});
  }
  // reduce_output = reduce_scatter_input.new_empty((columns,)).
  BufferId output =
      host.Allocate(group.columns * ElementSize(dtype), Category::kBucketOutput, dtype, pg.id);
  host.Collective({CollectiveKind::kBucketFlush, pg.id, ws, dtype, ws * group.columns,
                   group.columns, static_cast<std::uint32_t>(group.calls.size())},
                  {group.input, output, slices_});
  const bool cast = std::all_of(group.calls.begin(), group.calls.end(), [&](const auto& call) {
    return call.event.shard_mode == ShardMode::kCast &&
           call.event.cast_dtype == first.event.cast_dtype;
  });
  const bool offload = std::all_of(group.calls.begin(), group.calls.end(), [](const auto& call) {
    return call.event.shard_mode == ShardMode::kOffload;
  });
  if (offload) {
    // new_sharded_grad.to("cpu") per parameter: nothing holds the output once foreach_reduce
    // returns (torch 2.6 _fsdp_collectives.py; the non-fp32 reduce dtype's cast of the whole
    // output back to fp32 before the copies, transient, is not modelled).
    for (const ReduceScatterCall& call : group.calls) host.Deliver(call, output);
    host.Release(output);
  } else if (cast) {
    // reduce_output.to(orig_dtype): one tensor the sharded gradients view; the output has no
    // reference left and goes at once.
    const BufferId grads = host.Allocate(group.columns * ElementSize(first.event.cast_dtype),
                                         Category::kGradShard, first.event.cast_dtype, pg.id);
    for (ReduceScatterCall call : group.calls) {
      call.event.shard_mode = ShardMode::kView;
      host.Deliver(call, grads);
    }
    host.Release(grads);
    host.Release(output);
  } else {
    for (const ReduceScatterCall& call : group.calls) host.Deliver(call, output);
    outputs_.push_back(output);
  }
  inputs_.push_back(group.input);
  if (!std::exchange(group.reduced, true)) ++counters_.buckets;  // one per FSDP instance
  ++counters_.flushes;
  counters_.bucketed += group.calls.size();
  Reset(group);
  return Status::Ok();
}

Status GroupReduceScatter::EndBackward(PolicyHost& host) {
  // Groups whose gradients did not all arrive are reduced by the root's final callback.
  for (std::uint32_t fsdp : std::exchange(pending_order_, {})) {
    BUCKETSIM_RETURN_IF_ERROR(ReduceGroup(pending_[fsdp], host));
  }
  for (auto& [fsdp, group] : pending_) Reset(group);  // no_grad requests of groups not reduced
  for (BufferId input : inputs_) host.Release(input);
  inputs_.clear();
  for (BufferId output : outputs_) host.Release(output);
  outputs_.clear();
  return Status::Ok();
}

}  // namespace bucketsim
