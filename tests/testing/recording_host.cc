#include "testing/recording_host.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace bucketsim::testing {

BufferId RecordingHost::Allocate(Bytes bytes, Category category, DType, GroupId) {
  auto id = static_cast<BufferId>(buffers_.size());
  buffers_.push_back({bytes, category, 1});
  live_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  log_.push_back(fmt::format("alloc {} {} #{}", CategoryName(category), bytes, id));
  return id;
}

void RecordingHost::Release(BufferId id) {
  Buffer& buffer = buffers_.at(id);
  if (buffer.refs <= 0) throw std::logic_error(fmt::format("release of dead buffer #{}", id));
  if (--buffer.refs > 0) {
    log_.push_back(fmt::format("release #{} (kept by {} view(s))", id, buffer.refs));
    return;
  }
  live_bytes_ -= buffer.bytes;
  log_.push_back(fmt::format("free {} {} #{}", CategoryName(buffer.category), buffer.bytes, id));
}

void RecordingHost::Relabel(BufferId id, Category category) { buffers_.at(id).category = category; }

void RecordingHost::Collective(const CollectiveRecord& record) {
  collectives_.push_back(record);
  log_.push_back(fmt::format("collective {} group {} in {} out {} requests {}",
                             CollectiveKindName(record.kind), record.group, record.input_numel,
                             record.output_numel, record.requests));
}

void RecordingHost::Deliver(const ReduceScatterCall& call, BufferId reduced) {
  ++deliveries_;
  log_.push_back(fmt::format("deliver param {} from #{}", call.event.param, reduced));
  if (call.event.shard_mode == ShardMode::kView) {
    ++buffers_.at(reduced).refs;
    gradient_refs_.push_back(reduced);
  }
}

void RecordingHost::DropGradients() {
  for (BufferId id : gradient_refs_) Release(id);
  gradient_refs_.clear();
}

Bytes RecordingHost::live_bytes(Category category) const {
  Bytes total = 0;
  for (const Buffer& b : buffers_) {
    if (b.refs > 0 && b.category == category) total += b.bytes;
  }
  return total;
}

ProcessGroup MakeGroup(GroupId id, std::vector<int> ranks) {
  ProcessGroup group;
  group.id = id;
  group.ranks = std::move(ranks);
  return group;
}

ReduceScatterCall MakeCall(const ProcessGroup& group, Numel numel, DType dtype, ShardMode mode,
                           std::uint32_t param) {
  return {ReduceScatterEvent(0, param, group.id, dtype, numel, mode), &group};
}

}  // namespace bucketsim::testing
