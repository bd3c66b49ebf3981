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

BufferId RecordingHost::Stage(Bytes bytes, DType, GroupId) {
  auto id = static_cast<BufferId>(buffers_.size());
  buffers_.push_back({bytes, Category::kGrad, 1, true});
  log_.push_back(fmt::format("stage {} #{}", bytes, id));
  return id;
}

void RecordingHost::Release(BufferId id) {
  Buffer& buffer = buffers_.at(id);
  if (buffer.refs <= 0) throw std::logic_error(fmt::format("release of dead buffer #{}", id));
  if (--buffer.refs > 0) {
    log_.push_back(fmt::format("release #{} (kept by {} view(s))", id, buffer.refs));
    return;
  }
  if (buffer.staged) {
    log_.push_back(fmt::format("unstage #{}", id));
    return;
  }
  live_bytes_ -= buffer.bytes;
  log_.push_back(fmt::format("free {} {} #{}", CategoryName(buffer.category), buffer.bytes, id));
}

void RecordingHost::Relabel(BufferId id, Category category) { buffers_.at(id).category = category; }

void RecordingHost::CheckSpan(BufferHandle buffer, Bytes end, const char* what) const {
  const Buffer& b = buffers_.at(buffer);
  if (b.refs <= 0) throw std::logic_error(fmt::format("{} touches dead buffer #{}", what, buffer));
  if (end > b.bytes) {
    throw std::logic_error(
        fmt::format("{} reaches byte {} of buffer #{} of {} bytes", what, end, buffer, b.bytes));
  }
}

void RecordingHost::FillGradient(const GradientFill& fill) {
  CheckSpan(
      fill.buffer,
      (fill.offset + (fill.rows - 1) * fill.RowStride() + fill.numel) * ElementSize(fill.dtype),
      "fill");
  std::string at;
  if (fill.offset != 0 || fill.row_numel != 0) {
    at = fmt::format(" at {} stride {}", fill.offset, fill.RowStride());
  }
  moves_.push_back(
      fmt::format("fill #{} rows {} numel {}{}", fill.buffer, fill.rows, fill.numel, at));
}

void RecordingHost::Copy(const BufferCopy& c) {
  Bytes element = ElementSize(c.dtype);
  CheckSpan(c.dst, ((c.rows - 1) * c.dst_row_numel + c.dst_col + c.cols) * element, "copy dst");
  CheckSpan(c.src, ((c.rows - 1) * c.src_row_numel + c.src_col + c.cols) * element, "copy src");
  moves_.push_back(fmt::format("copy #{}[{}x{}+{}] <- #{}[{}x{}+{}] cols {}", c.dst, c.rows,
                               c.dst_row_numel, c.dst_col, c.src, c.rows, c.src_row_numel,
                               c.src_col, c.cols));
}

void RecordingHost::Collective(const CollectiveRecord& record, const CollectiveBuffers& buffers) {
  Bytes element = ElementSize(record.dtype);
  CheckSpan(buffers.input, (buffers.input_offset + record.input_numel) * element,
            "collective input");
  CheckSpan(buffers.output, record.output_numel * element, "collective output");
  std::string slices;
  for (const ReducedSlice& slice : buffers.slices) {
    slices += fmt::format(" [{}+{}]", slice.offset, slice.numel);
  }
  std::string at = buffers.input_offset == 0 ? "" : fmt::format("+{}", buffers.input_offset);
  moves_.push_back(fmt::format("{} #{}{} -> #{}{}", CollectiveKindName(record.kind), buffers.input,
                               at, buffers.output, slices));
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
                           std::uint32_t param, std::uint32_t fsdp, EventIndex index) {
  ReduceScatterCall call{ReduceScatterEvent(fsdp, param, group.id, dtype, numel, mode), &group};
  call.event.index = index;
  return call;
}

}  // namespace bucketsim::testing
