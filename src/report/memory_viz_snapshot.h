// One replay written as a PyTorch memory snapshot: the pickle torch.cuda.memory._dump_snapshot
// writes (reference/caching_allocator.md §5.2, §5.3), which pytorch.org/memory_viz and
// `python -m torch.cuda._memory_viz trace_plot|segment_plot|stats|trace FILE` show. It holds
//   device_traces: one list, device 0's: every alloc, free_requested, free_completed, oom,
//                  segment_alloc, segment_free, segment_map and segment_unmap of the replay's
//                  caching allocator model, in order, with the model's own addresses and sizes
//                  (alloc and free: the requested size, as PyTorch records it);
//   segments:      the model's segments and blocks at the end of the replay (an expandable
//                  segment as one segment per mapped range, as PyTorch lists it);
//   allocator_settings: the alloc_conf the model ran with, under PyTorch's keys.
// Frames say what each block is: an allocation's first frame is {filename: the trace, line: the
// trace event that allocated it, name: its category (activation, bucket_data, ...)}, its second
// the phase it was allocated in ({line: the phase marker's event, name: "backward, iteration
// 1"}); its frees and its block in `segments` show the same frames; a segment event shows the
// phase frame. Repeated strings, phase frames and an allocation's frames are memo references.
//
// The trace is streamed to the file as the replay runs (PickleWriter), through an AtomicFile:
// memory is bounded by the live blocks, never by the trace's length, and the file appears only
// when the replay ended and everything was written.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/memory_event_sink.h"
#include "io/atomic_file.h"
#include "io/pickle_writer.h"

namespace bucketsim {

struct MemoryVizOptions {
  std::string path;        // the .pickle to write
  std::string trace_name;  // the frames' filename
  // --alloc-conf as given; unset: the trace's (what the caching model ran with).
  std::optional<std::string> alloc_conf;
};

// `policy` as a file name: letters, digits, '.', '-' and '_' kept, anything else '_'
// ("lifetime=always,key=members" -> "lifetime_always_key_members").
std::string MemoryVizFileStem(std::string_view policy);

class MemoryVizSnapshot final : public MemoryEventSink {
 public:
  // Opens the temporary file beside options.path (creating its directory): IoError when that
  // fails, before any replay.
  static Result<std::unique_ptr<MemoryVizSnapshot>> Create(MemoryVizOptions options);

  Status OnReplayStart(const TraceHeader& header) override;
  void OnMemoryEvent(const MemoryEvent& event) override;
  // Writes the segments and settings and renames the file into place.
  Status OnReplayEnd(const std::vector<SegmentSnapshot>& segments) override;

  const std::string& path() const { return options_.path; }
  bool committed() const { return committed_; }
  std::uint64_t trace_entries() const { return trace_entries_; }
  std::uint64_t file_bytes() const { return writer_.bytes_written(); }

 private:
  MemoryVizSnapshot(MemoryVizOptions options, std::unique_ptr<AtomicFile> file);

  // `text` as a memoized str: written the first time, a memo reference after.
  void Interned(std::string_view text);
  // The frame of the phase `event` was in, memoized once per phase.
  void PhaseFrame(const MemoryEvent& event);
  // A new frames list for an allocation, memoized; returns its id.
  PickleWriter::MemoId AllocationFrames(const MemoryEvent& event);
  // The frames of the block at `address` if its alloc was seen, else [].
  void BlockFrames(Bytes address);
  void WriteSegment(const SegmentSnapshot& segment, std::size_t first, std::size_t end);
  void WriteAllocatorSettings();

  MemoryVizOptions options_;
  std::unique_ptr<AtomicFile> file_;
  PickleWriter writer_;
  std::string alloc_conf_;
  std::unordered_map<std::string, PickleWriter::MemoId> interned_;
  std::optional<EventIndex> phase_frame_event_;  // the phase whose frame is phase_frame_
  PickleWriter::MemoId phase_frame_ = 0;
  std::unordered_map<Bytes, PickleWriter::MemoId> block_frames_;  // live blocks, by address
  std::uint64_t trace_entries_ = 0;
  bool committed_ = false;
};

}  // namespace bucketsim
