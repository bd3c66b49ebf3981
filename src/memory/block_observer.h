// What a memory model does to the blocks it hands out, one call at a time: the allocations it
// serves, the frees it is asked for, the frees that complete (at once, or once the other streams
// that used the block are synchronized), and the requests it cannot serve — the trace entries a
// PyTorch memory snapshot records as alloc, free_requested, free_completed and oom
// (reference/caching_allocator.md §5.2), in the order PyTorch records them with the segment
// events (SegmentObserver). A BlockObserver is told of each as it happens; the model does not own
// it. Models without addresses (exact) never call it. Set none and the model pays one branch per
// allocation and per free.
#pragma once

#include <string_view>

#include "core/units.h"

namespace bucketsim {

enum class BlockAction : std::uint8_t { kAlloc, kFreeRequested, kFreeCompleted, kOom };

// "alloc", "free_requested", "free_completed", "oom": the snapshot's action names.
std::string_view BlockActionName(BlockAction action);

struct BlockEvent {
  BlockAction action = BlockAction::kAlloc;
  Bytes address = 0;  // the block's, in the model's own (virtual) address space; 0 for oom
  // alloc and free_*: the requested size (as PyTorch records it, not the block size); oom: the
  // rounded request that found no memory.
  Bytes bytes = 0;
  StreamId stream = 0;
  Bytes device_free_bytes = 0;  // oom only: capacity minus reserved
};

class BlockObserver {
 public:
  virtual ~BlockObserver() = default;
  virtual void OnBlockEvent(const BlockEvent& event) = 0;
};

}  // namespace bucketsim
