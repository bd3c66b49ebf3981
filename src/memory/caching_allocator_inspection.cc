// CachingAllocatorModel's inspection: what PyTorch's memory_stats(), reset_peak_memory_stats()
// and memory_snapshot() give, and the fragmentation and totals a replay reports. These read the
// records the rules in caching_allocator_model.cc keep (and reset the peaks); none of them is on
// the path of an allocation or a free.
#include <algorithm>

#include "memory/caching_allocator_model.h"

namespace bucketsim {
namespace {

void ResetPeak(AllocatorStat& stat) { stat.peak = stat.current; }

}  // namespace

void CachingAllocatorModel::ResetPeakStats() {
  for (StatCounter& counter : counters_) {
    counter.peak = counter.current;
    counter.all_peak = counter.all_current();
  }
  ResetPeak(counts_.oversize_allocations);
  ResetPeak(counts_.oversize_segments);
}

CachingAllocatorStats CachingAllocatorModel::stats() const {
  auto array = [this](Stat stat) {
    const StatCounter& c = Counter(stat);
    auto one = [](std::int64_t current, std::int64_t peak, std::int64_t freed) {
      return AllocatorStat{current, peak, current + freed, freed};
    };
    return AllocatorStatArray{one(c.all_current(), c.all_peak, c.freed[0] + c.freed[1]),
                              one(c.current[1], c.peak[1], c.freed[1]),
                              one(c.current[0], c.peak[0], c.freed[0])};
  };
  CachingAllocatorStats stats;
  stats.allocation = array(kAllocation);
  stats.segment = array(kSegment);
  stats.active = array(kActive);
  stats.inactive_split = array(kInactiveSplit);
  stats.allocated_bytes = array(kAllocatedBytes);
  stats.reserved_bytes = array(kReservedBytes);
  stats.active_bytes = array(kActiveBytes);
  stats.inactive_split_bytes = array(kInactiveSplitBytes);
  stats.requested_bytes = array(kRequestedBytes);
  stats.oversize_allocations = counts_.oversize_allocations;
  stats.oversize_segments = counts_.oversize_segments;
  stats.num_alloc_retries = counts_.num_alloc_retries;
  stats.num_ooms = counts_.num_ooms;
  stats.num_sync_all_streams = counts_.num_sync_all_streams;
  stats.num_device_alloc = counts_.num_device_alloc;
  stats.num_device_free = counts_.num_device_free;
  stats.largest_free_block_bytes = LargestFreeBlock();
  return stats;
}

Bytes CachingAllocatorModel::LargestFreeBlock() const {
  Bytes largest = 0;
  for (const FreeBlockIndex& index : free_indexes_) {
    if (auto last = index.Last()) largest = std::max(largest, index.At(*last).size);
  }
  return largest;
}

std::vector<SegmentSnapshot> CachingAllocatorModel::Snapshot() const {
  std::vector<SegmentSnapshot> snapshot;
  for (const SegmentRec& segment : segments_) {
    if (!segment.live) continue;
    const BlockRec& head = blocks_[segment.head];
    SegmentSnapshot out{segment.address, segment.size,    head.stream,
                        head.small_pool, head.expandable, {}};
    for (Index i = segment.head; i != kNone; i = blocks_[i].next) {
      const BlockRec& b = blocks_[i];
      out.blocks.push_back({b.address, b.size, b.requested, b.state});
    }
    snapshot.push_back(std::move(out));
  }
  std::sort(
      snapshot.begin(), snapshot.end(),
      [](const SegmentSnapshot& a, const SegmentSnapshot& b) { return a.address < b.address; });
  return snapshot;
}

std::optional<FragmentationInfo> CachingAllocatorModel::Fragmentation() const {
  // Called at every new peak of a replay: reads running totals, walks no segment.
  FragmentationInfo info;
  info.reserved_minus_allocated_bytes = reserved_bytes() - allocated_bytes();
  info.inactive_split_bytes = static_cast<Bytes>(counters_[kInactiveSplitBytes].all_current());
  info.largest_free_block_bytes = LargestFreeBlock();
  // By stream, the large pool before the small one (segment_totals_' order); an expandable
  // segment's unmapped tail is address space, not memory.
  for (const SegmentTotals& totals : segment_totals_) {
    if (totals.count == 0) continue;
    info.segments.push_back({totals.stream, totals.small_pool, totals.count, totals.bytes});
  }
  return info;
}

std::optional<AllocatorTotals> CachingAllocatorModel::Totals() const {
  return AllocatorTotals{static_cast<Bytes>(Counter(kActiveBytes).all_peak),
                         static_cast<Bytes>(counters_[kInactiveSplitBytes].all_peak),
                         static_cast<std::uint64_t>(counters_[kSegment].all_peak),
                         static_cast<std::uint64_t>(counts_.num_alloc_retries),
                         static_cast<std::uint64_t>(counts_.num_ooms)};
}

}  // namespace bucketsim
