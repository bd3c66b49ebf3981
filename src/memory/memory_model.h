// How requested bytes become device memory. The engine hands every allocation and free (trace
// tensors and policy buffers alike) to a MemoryModel and learns what each allocation is charged
// (its block size: what torch.cuda.memory_allocated counts) and what the device has reserved.
// `exact` charges the request rounded to 512 B and reserves nothing beyond it; the caching
// allocator model (segments, pools, streams, splitting) implements the same interface, so the
// engine and the policies do not change when it is selected.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "memory/block_observer.h"
#include "memory/segment_observer.h"

namespace bucketsim {

struct Block {
  std::uint64_t handle = 0;  // the model's own identifier of the allocation
  Bytes charged = 0;         // bytes counted as allocated while the block is live
};

// Where reserved memory that is not allocated sits, at one moment (models with a cache only).
struct FragmentationInfo {
  struct Segments {
    StreamId stream = 0;
    bool small_pool = false;
    std::uint64_t count = 0;
    Bytes bytes = 0;
  };
  Bytes reserved_minus_allocated_bytes = 0;
  Bytes inactive_split_bytes = 0;      // free pieces of split blocks (memory_stats inactive_split)
  Bytes largest_free_block_bytes = 0;  // the largest request that fits without a new segment
  std::vector<Segments> segments;      // per (stream, pool), in that order
};

// Whole-run figures of a caching model, named after torch.cuda.memory_stats() keys.
struct AllocatorTotals {
  Bytes peak_active_bytes = 0;          // active_bytes.all.peak
  Bytes peak_inactive_split_bytes = 0;  // inactive_split_bytes.all.peak
  std::uint64_t peak_segments = 0;      // segment.all.peak
  std::uint64_t num_alloc_retries = 0;  // cache flushed and the request retried
  std::uint64_t num_ooms = 0;
};

// The figures of an out-of-memory, as torch.OutOfMemoryError's message reports them, and how the
// cached free memory was split up when it happened.
struct OomReport {
  Bytes tried_to_allocate_bytes = 0;  // the segment size wanted (alloc_size), not the request
  Bytes capacity_bytes = 0;
  Bytes free_bytes = 0;                  // capacity - reserved
  Bytes allocated_bytes = 0;             // allocated by PyTorch
  Bytes reserved_unallocated_bytes = 0;  // reserved - allocated
  std::uint64_t free_blocks = 0;         // cached free blocks the reserved_unallocated bytes are in
};

enum class BlockState : std::uint8_t { kAllocated, kPendingFree, kFree, kUnmapped };

// memory_snapshot()-like view of one segment, for tests and reports. An expandable segment is
// listed whole (its unmapped ranges as kUnmapped blocks), not per mapped range.
struct SegmentSnapshot {
  Bytes address = 0;
  Bytes total_size = 0;
  StreamId stream = 0;
  bool small_pool = false;
  bool expandable = false;
  struct BlockInfo {
    Bytes address = 0;
    Bytes size = 0;
    Bytes requested_size = 0;  // 0 unless allocated or pending
    BlockState state = BlockState::kFree;
  };
  std::vector<BlockInfo> blocks;  // in address order
};

class MemoryModel {
 public:
  virtual ~MemoryModel() = default;
  virtual std::string_view name() const = 0;
  // A failure is a device-capacity OOM (only models with a capacity fail).
  virtual Result<Block> Allocate(Bytes requested, StreamId stream) = 0;
  virtual void Free(const Block& block) = 0;
  // A free of a block other streams still use (tensor.record_stream): allocated drops now; a
  // model with per-stream caches reuses the block only once every stream in `pending` has been
  // synchronized. Models without a cache free it at once.
  virtual void FreeWithPendingStreams(const Block& block, std::vector<StreamId> pending) {
    (void)pending;
    Free(block);
  }
  // All work queued on `stream` so far has completed.
  virtual void StreamSynchronized(StreamId /*stream*/) {}
  // torch.cuda.empty_cache(): return cached free segments to the device.
  virtual void EmptyCache() {}
  virtual Bytes allocated_bytes() const = 0;
  virtual Bytes reserved_bytes() const = 0;
  // Nothing for a model without a cache.
  virtual std::optional<FragmentationInfo> Fragmentation() const { return std::nullopt; }
  // Nothing for a model without a cache.
  virtual std::optional<AllocatorTotals> Totals() const { return std::nullopt; }
  // The last Allocate that failed for want of capacity (models with a capacity only).
  virtual std::optional<OomReport> last_oom() const { return std::nullopt; }
  // The segments and their blocks now, by address (memory_snapshot()); none for a model without
  // segments.
  virtual std::vector<SegmentSnapshot> Snapshot() const { return {}; }

  // Tells `observer` (not owned; null: nobody) of every segment the model allocates, frees,
  // maps or unmaps from now on.
  void set_segment_observer(SegmentObserver* observer) { segment_observer_ = observer; }
  // Tells `observer` (not owned; null: nobody) of every block the model allocates and frees, and
  // of every request it fails, from now on.
  void set_block_observer(BlockObserver* observer) { block_observer_ = observer; }

 protected:
  void NotifySegment(const SegmentEvent& event) {
    if (segment_observer_ != nullptr) segment_observer_->OnSegmentEvent(event);
  }
  void NotifyBlock(const BlockEvent& event) {
    if (block_observer_ != nullptr) block_observer_->OnBlockEvent(event);
  }

 private:
  SegmentObserver* segment_observer_ = nullptr;
  BlockObserver* block_observer_ = nullptr;
};

}  // namespace bucketsim
