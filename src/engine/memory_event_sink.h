// The device memory of one replay as a stream of allocator events: every block the memory model
// allocates and frees, every segment it allocates, frees, maps and unmaps, and every request it
// cannot serve, with its own addresses and sizes, in the order the model acts — the trace of a
// PyTorch memory snapshot (reference/caching_allocator.md §5.2) — and with what the replay was
// doing at the time: the trace event, what was being allocated, the phase and iteration. A
// Replay given a sink (ReplayOptions::memory_events) observes its model and feeds it; at the end
// it hands over the model's segments and blocks as they are then. The sink is not owned, and is
// fed from the one thread that runs its replay. Models without segments (exact) give no events.
#pragma once

#include <string_view>
#include <vector>

#include "core/category.h"
#include "core/event.h"
#include "core/status.h"
#include "core/trace_header.h"
#include "memory/memory_model.h"

namespace bucketsim {

// The snapshot's trace actions: the block ones (BlockAction), then the segment ones
// (SegmentAction), in their order.
enum class MemoryAction : std::uint8_t {
  kAlloc,
  kFreeRequested,
  kFreeCompleted,
  kOom,
  kSegmentAlloc,
  kSegmentFree,
  kSegmentMap,
  kSegmentUnmap
};
inline MemoryAction ToMemoryAction(BlockAction action) { return static_cast<MemoryAction>(action); }
inline MemoryAction ToMemoryAction(SegmentAction action) {
  return static_cast<MemoryAction>(static_cast<int>(MemoryAction::kSegmentAlloc) +
                                   static_cast<int>(action));
}
// "alloc", ..., "segment_unmap": the snapshot's names.
inline std::string_view MemoryActionName(MemoryAction action) {
  const int i = static_cast<int>(action);
  const int segments = static_cast<int>(MemoryAction::kSegmentAlloc);
  return i < segments ? BlockActionName(static_cast<BlockAction>(i))
                      : SegmentActionName(static_cast<SegmentAction>(i - segments));
}

struct MemoryEvent {
  MemoryAction action = MemoryAction::kAlloc;
  Bytes address = 0;
  // alloc and free_*: the requested size; segments: the bytes allocated, freed, mapped or
  // unmapped; oom: the rounded request.
  Bytes bytes = 0;
  StreamId stream = 0;
  Bytes device_free_bytes = 0;  // oom only

  // What the replay was doing.
  EventIndex event_index = 0;            // the trace event being replayed
  Category category = Category::kOther;  // alloc and oom: what was being allocated
  Phase phase = Phase::kInit;
  EventIndex phase_event_index = 0;  // the phase marker's event (0 before the first)
  std::uint64_t iteration = 0;
};

class MemoryEventSink {
 public:
  virtual ~MemoryEventSink() = default;
  // Before the first event.
  virtual Status OnReplayStart(const TraceHeader& header) = 0;
  virtual void OnMemoryEvent(const MemoryEvent& event) = 0;
  // After the last event (after an out-of-memory too): the model's segments, by address. An
  // error fails the replay.
  virtual Status OnReplayEnd(const std::vector<SegmentSnapshot>& segments) = 0;
};

}  // namespace bucketsim
