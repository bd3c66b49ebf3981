#include "policy/group_reduce_scatter.h"

#include <algorithm>

#include <fmt/format.h>

namespace bucketsim {

Status GroupReduceScatter::Start(const TraceHeader& header) {
  header_ = &header;
  return Status::Ok();
}

Status GroupReduceScatter::ReduceScatter(const ReduceScatterCall& call, PolicyHost& host) {
  const std::uint32_t fsdp = call.event.fsdp;
  auto [it, first] = pending_.try_emplace(fsdp);
  if (first || it->second.empty()) pending_order_.push_back(fsdp);
  it->second.push_back(call);
  // The group's post-backward runs once all its gradients are ready.
  if (it->second.size() < header_->fsdp[fsdp].params.size()) return Status::Ok();
  pending_order_.erase(std::find(pending_order_.begin(), pending_order_.end(), fsdp));
  return ReduceGroup(it->second, host);
}

Status GroupReduceScatter::ReduceGroup(std::vector<ReduceScatterCall>& group, PolicyHost& host) {
  const ProcessGroup& pg = *group.front().group;
  const DType dtype = group.front().event.dtype;
  Numel columns = 0;
  for (const ReduceScatterCall& call : group) {
    if (call.group->id != pg.id || call.event.dtype != dtype) {
      return InvalidTrace(fmt::format(
          "event {}: fsdp2 reduces an FSDP instance in one reduce-scatter, but its gradients use "
          "different process groups or dtypes ({} group {} vs {} group {})",
          call.event.index, DTypeName(call.event.dtype), call.group->id, DTypeName(dtype), pg.id));
    }
    columns += call.event.numel;
  }
  // The previous reduce-scatter's input is waited for and dropped before this copy-in when the
  // limit is reached (FSDP2 post_backward; set_reduce_scatter_max_input_buffers).
  if (inflight_ > 0 && static_cast<int>(inputs_.size()) >= inflight_) {
    host.Release(inputs_.front());
    inputs_.pop_front();
  }
  const int ws = pg.size();
  const Bytes element = ElementSize(dtype);
  // reduce_scatter_input = torch.empty(ws * columns); torch._chunk_cat(grads, out=...).
  BufferId input = host.Allocate(ws * columns * element, Category::kBucketData, dtype, pg.id);
  slices_.clear();
  Numel column = 0;
  for (const ReduceScatterCall& call : group) {
    host.FillGradient({input, call.event.index, ws, call.event.numel, dtype, column, columns});
    slices_.push_back({call.event.index, column, call.event.numel});
    column += call.event.numel;
  }
  // reduce_output = reduce_scatter_input.new_empty((columns,)).
  BufferId output = host.Allocate(columns * element, Category::kBucketOutput, dtype, pg.id);
  host.Collective({CollectiveKind::kBucketFlush, pg.id, ws, dtype, ws * columns, columns,
                   static_cast<std::uint32_t>(group.size())},
                  {input, output, slices_});
  for (const ReduceScatterCall& call : group) host.Deliver(call, output);
  inputs_.push_back(input);
  outputs_.push_back(output);
  counters_.buckets = pending_.size();  // FSDP instances seen: one bucket each
  ++counters_.flushes;
  counters_.bucketed += group.size();
  group.clear();
  return Status::Ok();
}

Status GroupReduceScatter::EndBackward(PolicyHost& host) {
  // Groups whose gradients did not all arrive are reduced by the root's final callback.
  for (std::uint32_t fsdp : std::exchange(pending_order_, {})) {
    BUCKETSIM_RETURN_IF_ERROR(ReduceGroup(pending_[fsdp], host));
  }
  for (BufferId input : inputs_) host.Release(input);
  inputs_.clear();
  for (BufferId output : outputs_) host.Release(output);
  outputs_.clear();
  return Status::Ok();
}

}  // namespace bucketsim
