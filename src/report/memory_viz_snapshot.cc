#include "report/memory_viz_snapshot.h"

#include <fmt/format.h>

#include "memory/alloc_conf.h"
#include "memory/make_memory_model.h"

namespace bucketsim {
namespace {

std::string_view StateName(BlockState state) {
  switch (state) {
    case BlockState::kAllocated:
      return "active_allocated";
    case BlockState::kPendingFree:
      return "active_pending_free";
    case BlockState::kFree:
    case BlockState::kUnmapped:
      break;
  }
  return "inactive";
}

bool Active(BlockState state) {
  return state == BlockState::kAllocated || state == BlockState::kPendingFree;
}

}  // namespace

std::string MemoryVizFileStem(std::string_view policy) {
  std::string stem(policy);
  for (char& c : stem) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '-' || c == '_';
    if (!keep) c = '_';
  }
  if (stem.empty() || stem.front() == '.') stem.insert(stem.begin(), '_');  // no hidden file
  return stem;
}

Result<std::unique_ptr<MemoryVizSnapshot>> MemoryVizSnapshot::Create(MemoryVizOptions options) {
  Result<std::unique_ptr<AtomicFile>> file = AtomicFile::Create(options.path);
  if (!file.ok()) return file.status();
  return std::unique_ptr<MemoryVizSnapshot>(
      new MemoryVizSnapshot(std::move(options), std::move(*file)));
}

MemoryVizSnapshot::MemoryVizSnapshot(MemoryVizOptions options, std::unique_ptr<AtomicFile> file)
    : options_(std::move(options)), file_(std::move(file)), writer_(file_->stream()) {}

void MemoryVizSnapshot::Interned(std::string_view text) {
  auto it = interned_.find(std::string(text));
  if (it != interned_.end()) {
    writer_.Get(it->second);
    return;
  }
  writer_.String(text);
  interned_.emplace(std::string(text), writer_.Memoize());
}

Status MemoryVizSnapshot::OnReplayStart(const TraceHeader& header) {
  alloc_conf_ = AllocConfFor(
      MemoryModelOptions{"caching", options_.alloc_conf, std::nullopt, std::nullopt}, header);
  // The top level: device_traces streams now; segments and allocator_settings come at the end.
  writer_.BeginDict(3);
  Interned("device_traces");
  writer_.BeginList(1);
  writer_.BeginList(std::nullopt);
  return Status::Ok();
}

void MemoryVizSnapshot::PhaseFrame(const MemoryEvent& event) {
  if (phase_frame_event_ == event.phase_event_index) {
    writer_.Get(phase_frame_);
    return;
  }
  writer_.BeginDict(3);
  phase_frame_ = writer_.Memoize();
  phase_frame_event_ = event.phase_event_index;
  Interned("filename");
  Interned(options_.trace_name);
  Interned("line");
  writer_.UInt(event.phase_event_index);
  Interned("name");
  writer_.String(fmt::format("{}, iteration {}", PhaseName(event.phase), event.iteration));
  writer_.EndDict();
}

PickleWriter::MemoId MemoryVizSnapshot::AllocationFrames(const MemoryEvent& event) {
  writer_.BeginList(2);
  const PickleWriter::MemoId id = writer_.Memoize();
  writer_.BeginDict(3);
  Interned("filename");
  Interned(options_.trace_name);
  Interned("line");
  writer_.UInt(event.event_index);
  Interned("name");
  Interned(CategoryName(event.category));
  writer_.EndDict();
  PhaseFrame(event);
  writer_.EndList();
  return id;
}

void MemoryVizSnapshot::BlockFrames(Bytes address) {
  auto it = block_frames_.find(address);
  if (it != block_frames_.end()) {
    writer_.Get(it->second);
    return;
  }
  writer_.BeginList(0);
  writer_.EndList();
}

void MemoryVizSnapshot::OnMemoryEvent(const MemoryEvent& event) {
  ++trace_entries_;
  writer_.BeginDict(5);
  Interned("action");
  Interned(MemoryActionName(event.action));
  if (event.action == MemoryAction::kOom) {
    Interned("device_free");
    writer_.UInt(event.device_free_bytes);
  } else {
    Interned("addr");
    writer_.UInt(event.address);
  }
  Interned("size");
  writer_.UInt(event.bytes);
  Interned("stream");
  writer_.UInt(event.stream);
  Interned("frames");
  switch (event.action) {
    case MemoryAction::kAlloc:
      block_frames_[event.address] = AllocationFrames(event);
      break;
    case MemoryAction::kFreeRequested:
      BlockFrames(event.address);
      break;
    case MemoryAction::kFreeCompleted:
      BlockFrames(event.address);
      block_frames_.erase(event.address);
      break;
    case MemoryAction::kOom:
      AllocationFrames(event);
      break;
    default:  // segments: the phase they changed in
      writer_.BeginList(1);
      PhaseFrame(event);
      writer_.EndList();
      break;
  }
  writer_.EndDict();
}

void MemoryVizSnapshot::WriteSegment(const SegmentSnapshot& segment, std::size_t first,
                                     std::size_t end) {
  Bytes total = 0, allocated = 0, active = 0, requested = 0;
  for (std::size_t i = first; i < end; ++i) {
    const SegmentSnapshot::BlockInfo& b = segment.blocks[i];
    total += b.size;
    if (b.state == BlockState::kAllocated) allocated += b.size;
    if (Active(b.state)) {
      active += b.size;
      requested += b.requested_size;
    }
  }
  writer_.BeginDict(12);
  Interned("device");
  writer_.Int(0);
  Interned("address");
  writer_.UInt(segment.blocks[first].address);
  Interned("total_size");
  writer_.UInt(total);
  Interned("allocated_size");
  writer_.UInt(allocated);
  Interned("active_size");
  writer_.UInt(active);
  Interned("requested_size");
  writer_.UInt(requested);
  Interned("stream");
  writer_.UInt(segment.stream);
  Interned("segment_type");
  Interned(segment.small_pool ? "small" : "large");
  Interned("segment_pool_id");
  writer_.BeginTuple(2);
  writer_.Int(0);
  writer_.Int(0);
  writer_.EndTuple();
  Interned("is_expandable");
  writer_.Bool(segment.expandable);
  Interned("frames");
  writer_.BeginList(0);
  writer_.EndList();
  Interned("blocks");
  writer_.BeginList(end - first);
  for (std::size_t i = first; i < end; ++i) {
    const SegmentSnapshot::BlockInfo& b = segment.blocks[i];
    writer_.BeginDict(5);
    Interned("address");
    writer_.UInt(b.address);
    Interned("size");
    writer_.UInt(b.size);
    Interned("requested_size");
    writer_.UInt(b.requested_size);
    Interned("state");
    Interned(StateName(b.state));
    Interned("frames");
    if (Active(b.state)) {
      BlockFrames(b.address);
    } else {
      writer_.BeginList(0);
      writer_.EndList();
    }
    writer_.EndDict();
  }
  writer_.EndList();
  writer_.EndDict();
}

void MemoryVizSnapshot::WriteAllocatorSettings() {
  // The model ran with this text, so it parses (the factory parsed it first).
  Result<AllocConf> parsed = ParseAllocConf(alloc_conf_);
  BUCKETSIM_CHECK(parsed.ok());
  const AllocConf& conf = *parsed;
  writer_.BeginDict(5);
  Interned("PYTORCH_CUDA_ALLOC_CONF");
  writer_.String(alloc_conf_);
  // int64_t(SIZE_MAX) when there is no limit, as PyTorch writes it.
  Interned("max_split_size");
  writer_.Int(conf.max_split_size == AllocConf::kUnlimited
                  ? -1
                  : static_cast<std::int64_t>(conf.max_split_size));
  Interned("garbage_collection_threshold");
  writer_.Float(conf.garbage_collection_threshold);
  Interned("expandable_segments");
  writer_.Bool(conf.expandable_segments);
  Interned("roundup_power2_divisions");
  writer_.BeginDict(AllocConf::kRoundupIntervals);
  for (std::size_t i = 0; i < AllocConf::kRoundupIntervals; ++i) {
    Interned(std::to_string(std::uint64_t{1} << i));  // the interval's MiB, "1" ... "32768"
    writer_.UInt(conf.roundup_power2_divisions[i]);
  }
  writer_.EndDict();
  writer_.EndDict();
}

Status MemoryVizSnapshot::OnReplayEnd(const std::vector<SegmentSnapshot>& segments) {
  writer_.EndList();  // device 0's trace
  writer_.EndList();  // device_traces
  // An expandable segment is listed per mapped range, as PyTorch lists it.
  std::vector<std::pair<const SegmentSnapshot*, std::pair<std::size_t, std::size_t>>> ranges;
  for (const SegmentSnapshot& segment : segments) {
    std::size_t i = 0;
    while (i < segment.blocks.size()) {
      if (segment.blocks[i].state == BlockState::kUnmapped) {
        ++i;
        continue;
      }
      std::size_t end = i;
      while (end < segment.blocks.size() && segment.blocks[end].state != BlockState::kUnmapped) {
        ++end;
      }
      ranges.push_back({&segment, {i, end}});
      i = end;
    }
  }
  Interned("segments");
  writer_.BeginList(ranges.size());
  for (const auto& [segment, range] : ranges) WriteSegment(*segment, range.first, range.second);
  writer_.EndList();
  Interned("allocator_settings");
  WriteAllocatorSettings();
  writer_.EndDict();
  writer_.Finish();
  Status status = file_->Commit();
  committed_ = status.ok();
  return status;
}

}  // namespace bucketsim
