// What a memory model does to device memory, one event at a time: the segments it cudaMallocs
// and cudaFrees, and the pages of expandable segments it maps and unmaps — the same actions a
// PyTorch memory snapshot records as segment_alloc, segment_free, segment_map and segment_unmap
// (reference/caching_allocator.md §2.4, §2.5, §4, §5.2). A SegmentObserver is told of each as it
// happens; the model does not own it. Models without segments (exact) never call it. Set none
// and the model pays one branch per segment event, nothing per allocation.
#pragma once

#include <string_view>

#include "core/units.h"

namespace bucketsim {

enum class SegmentAction : std::uint8_t { kAlloc, kFree, kMap, kUnmap };

// "segment_alloc", "segment_free", "segment_map", "segment_unmap": the snapshot's action names.
std::string_view SegmentActionName(SegmentAction action);

struct SegmentEvent {
  SegmentAction action = SegmentAction::kAlloc;
  Bytes address = 0;  // the model's own (virtual) address: opaque, not comparable with a device
  Bytes bytes = 0;    // segment size, or the bytes mapped or unmapped
  StreamId stream = 0;
  bool small_pool = false;
};

class SegmentObserver {
 public:
  virtual ~SegmentObserver() = default;
  virtual void OnSegmentEvent(const SegmentEvent& event) = 0;
};

}  // namespace bucketsim
