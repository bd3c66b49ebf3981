// A simulation of PyTorch's CUDA caching allocator (reference/caching_allocator.md §1-§4), so a
// replay can predict torch.cuda.memory_allocated / memory_reserved and fragmentation, not only
// the bytes requested. The model owns a simulated device: segments (cudaMalloc'ed ranges, or with
// expandable_segments one growing, page-mapped range per stream and pool) at monotonic virtual
// addresses, tiled by blocks that are allocated, pending (freed but still in use by other
// streams), free (cached) or unmapped. Requests are rounded, served best fit from the free blocks
// of their own stream and pool, split and merged as PyTorch does; with a device capacity a
// segment that does not fit first makes the model release cached memory and retry, then fail the
// way torch.OutOfMemoryError does. Nothing here touches a real device. Blocks are 48-byte records
// in one vector, linked in address order within their segment; the cached blocks of each stream
// and pool are a FreeBlockIndex (free_block_index.h), which hands out PyTorch's best fit. The
// rules are in caching_allocator_model.cc; what the model reports (memory_stats, snapshots,
// fragmentation) is read out in caching_allocator_inspection.cc.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "memory/alloc_conf.h"
#include "memory/free_block_index.h"
#include "memory/memory_model.h"

namespace bucketsim {

inline constexpr Bytes kSmallSize = 1 * kMiB;       // largest request served by the small pool
inline constexpr Bytes kSmallBuffer = 2 * kMiB;     // small-pool segment and expandable page
inline constexpr Bytes kLargeBuffer = 20 * kMiB;    // 1-10 MiB segment and large expandable page
inline constexpr Bytes kMinLargeAlloc = 10 * kMiB;  // from here a request gets its own segment
inline constexpr Bytes kRoundLarge = 2 * kMiB;      // rounding of those own segments

// round_size (§1.2): the block size a request of `requested` bytes is handed.
Bytes RoundSize(Bytes requested, const AllocConf& conf);
// get_allocation_size (§1.4): the size of a new (non-expandable) segment for a rounded request.
Bytes AllocationSize(Bytes rounded);

// One counter as PyTorch keeps it: current value, its peak, and the running totals of
// increases (allocated) and decreases (freed).
struct AllocatorStat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;
  std::int64_t freed = 0;
};

// memory_stats() keeps most counters three times: all pools, the small pool, the large pool.
struct AllocatorStatArray {
  AllocatorStat all;
  AllocatorStat small_pool;
  AllocatorStat large_pool;
};

// Field names are torch.cuda.memory_stats() key prefixes (§3.6), e.g. allocated_bytes.all.peak
// is max_memory_allocated().
struct CachingAllocatorStats {
  AllocatorStatArray allocation;
  AllocatorStatArray segment;
  AllocatorStatArray active;
  AllocatorStatArray inactive_split;
  AllocatorStatArray allocated_bytes;
  AllocatorStatArray reserved_bytes;
  AllocatorStatArray active_bytes;
  AllocatorStatArray inactive_split_bytes;
  AllocatorStatArray requested_bytes;
  AllocatorStat oversize_allocations;
  AllocatorStat oversize_segments;
  std::int64_t num_alloc_retries = 0;
  std::int64_t num_ooms = 0;
  std::int64_t num_sync_all_streams = 0;
  std::int64_t num_device_alloc = 0;  // cudaMalloc calls and expandable page maps
  std::int64_t num_device_free = 0;   // cudaFree calls and expandable page unmaps
  // Not a memory_stats key: the largest cached free block (memory_snapshot), 0 if none.
  Bytes largest_free_block_bytes = 0;
};

class CachingAllocatorModel final : public MemoryModel {
 public:
  // capacity_bytes: the device memory the allocator may reserve. A segment (or expandable page
  // map) that would take reserved bytes beyond it fails as cudaMalloc would; it is also the
  // allowed maximum garbage_collection_threshold is a fraction of (§2.6). None means unlimited:
  // Allocate never fails and garbage collection never runs.
  explicit CachingAllocatorModel(AllocConf conf = {},
                                 std::optional<Bytes> capacity_bytes = std::nullopt);

  // Allocate(0) allocates nothing, as PyTorch returns a null pointer; its Block has this handle.
  static constexpr std::uint64_t kZeroBytesHandle = ~std::uint64_t{0};

  std::string_view name() const override { return "caching"; }
  // Fails only with a capacity: a kDeviceError Status carrying PyTorch's OOM figures.
  Result<Block> Allocate(Bytes requested, StreamId stream) override;
  void Free(const Block& block) override;
  Bytes allocated_bytes() const override;
  Bytes reserved_bytes() const override;
  std::optional<FragmentationInfo> Fragmentation() const override;
  std::optional<AllocatorTotals> Totals() const override;

  // A free of a block other streams still use (tensor.record_stream, §3.3): allocated drops now;
  // the block stays active and becomes reusable once every stream in `pending` is synchronized.
  // Streams equal to the block's own stream are ignored, as record_stream ignores them.
  void FreeWithPendingStreams(const Block& block, std::vector<StreamId> pending) override;
  // All work queued on `stream` so far has completed.
  void StreamSynchronized(StreamId stream) override;
  // torch.cuda.empty_cache() (§3.7).
  void EmptyCache() override;
  // torch.cuda.reset_peak_memory_stats(): every peak becomes its current value.
  void ResetPeakStats();

  CachingAllocatorStats stats() const;
  std::optional<OomReport> last_oom() const override { return last_oom_; }
  std::vector<SegmentSnapshot> Snapshot() const override;
  const AllocConf& conf() const { return conf_; }

 private:
  using Index = std::uint32_t;
  static constexpr Index kNone = ~Index{0};

  // The unmapped ranges of expandable segments are searched by (stream, address).
  struct UnmappedKey {
    StreamId stream;
    Bytes address;
    Index block;
  };
  struct UnmappedKeyLess {
    bool operator()(const UnmappedKey& a, const UnmappedKey& b) const {
      return a.stream != b.stream ? a.stream < b.stream : a.address < b.address;
    }
  };
  using UnmappedSet = std::set<UnmappedKey, UnmappedKeyLess>;

  // 48 bytes, so a merge reads a block and its two neighbours in few cache lines; what only the
  // rare paths need (garbage collection's age) lives beside blocks_.
  struct BlockRec {
    Bytes address = 0;
    Bytes size = 0;
    Bytes requested = 0;
    Index prev = kNone;
    Index next = kNone;
    Index segment = kNone;
    StreamId stream = 0;
    std::uint16_t free_index = 0;  // the free_indexes_ entry of (stream, pool)
    BlockState state = BlockState::kFree;
    bool small_pool = false;
    bool expandable = false;
    bool is_split() const { return prev != kNone || next != kNone; }
  };
  static_assert(sizeof(BlockRec) == 48);
  struct SegmentRec {
    Bytes address = 0;
    Bytes size = 0;  // the virtual size for an expandable segment
    Index head = kNone;
    bool live = false;
  };
  struct Pool {
    // The free_indexes_ entry of each stream, in stream order: a block is only reused by its own
    // stream.
    std::vector<std::pair<StreamId, std::uint16_t>> free;
    UnmappedSet unmapped;
    std::uint64_t get_free_blocks_call_count = 0;
  };
  struct Pending {
    Index block;
    std::vector<StreamId> streams;
  };
  // The live segments of one stream and pool and the device memory they hold (an expandable
  // segment's mapped pages only), kept as segments come and go so Fragmentation is cheap.
  struct SegmentTotals {
    StreamId stream = 0;
    bool small_pool = false;
    std::uint64_t count = 0;
    Bytes bytes = 0;
  };

  // The memory_stats() arrays (CachingAllocatorStats), kept per pool: "all" is the sum of the
  // pools, with its own peak, and `allocated` (the running total of increases) is current +
  // freed, so an increase updates one current and two peaks, a decrease one current and one
  // total. stats() writes them out as PyTorch keeps them.
  enum Stat : std::uint8_t {
    kAllocation,
    kSegment,
    kActive,
    kInactiveSplit,
    kAllocatedBytes,
    kReservedBytes,
    kActiveBytes,
    kInactiveSplitBytes,
    kRequestedBytes,
    kStatCount
  };
  struct StatCounter {
    std::array<std::int64_t, 2> current{};  // [small_pool]
    std::array<std::int64_t, 2> peak{};
    std::array<std::int64_t, 2> freed{};
    std::int64_t all_peak = 0;
    std::int64_t all_current() const { return current[0] + current[1]; }
  };
  // The memory_stats() counters that are not per-pool arrays.
  struct Counts {
    AllocatorStat oversize_allocations;
    AllocatorStat oversize_segments;
    std::int64_t num_alloc_retries = 0;
    std::int64_t num_ooms = 0;
    std::int64_t num_sync_all_streams = 0;
    std::int64_t num_device_alloc = 0;
    std::int64_t num_device_free = 0;
  };

  Pool& PoolOf(bool small_pool) { return small_pool ? small_ : large_; }
  Pool& PoolOf(const BlockRec& b) { return PoolOf(b.small_pool); }
  FreeBlockIndex* FindFreeIndex(Pool& pool, StreamId stream);
  // The free_indexes_ entry of (stream, pool), made on first use.
  std::uint16_t FreeIndexId(StreamId stream, bool small_pool);
  // Every free block of the pool, all streams, in (stream, size, address) order.
  std::vector<FreeBlockIndex::Entry> FreeEntries(const Pool& pool) const;

  Index NewBlock();
  void DeleteBlock(Index i);
  // A segment of one block, free or (expandable) unmapped, not yet in a set.
  Index NewSegment(Bytes size, StreamId stream, bool small_pool, bool expandable);
  void DeleteSegment(Index s);
  void Attach(Index i);  // into the free or unmapped set, by state
  void Detach(Index i);
  [[gnu::noinline]] void AttachUnmapped(Index i);  // expandable segments only: kept out of line
  [[gnu::noinline]] void DetachUnmapped(Index i);
  // Absorbs neighbours in the same state; returns the surviving block (the lowest address) and
  // adds the absorbed sizes to *absorbed_bytes, their count to *absorbed_count.
  Index MergeNeighbours(Index i, Bytes* absorbed_bytes, std::int64_t* absorbed_count);
  // Splits `size` bytes off the front of i; returns the new block holding the rest.
  Index SplitFront(Index i, Bytes size);

  Index GetFreeBlock(StreamId stream, bool small_pool, Bytes size);
  [[gnu::noinline]] FreeBlockIndex::Cursor PreferHoles(const FreeBlockIndex& index,
                                                       FreeBlockIndex::Cursor cursor) const;
  // No cached block fits: a new segment, after releasing cached memory if a capacity demands.
  [[gnu::noinline]] Result<Block> AllocateSlow(Bytes requested, StreamId stream, bool small_pool,
                                               Bytes size);
  Block TakeBlock(Index i, Bytes size, Bytes requested);
  Index AllocBlock(StreamId stream, bool small_pool, Bytes size, Bytes alloc_size, bool is_retry);
  Index TryAllocateExpandableBlock(StreamId stream, bool small_pool, Bytes size);
  Index FindExpandableBlock(StreamId stream, bool small_pool, Bytes size);
  Index MapBlock(Index i, Bytes size);
  // Unmaps the whole pages inside free block i; returns the resulting unmapped block, if any.
  Index UnmapBlock(Index i);
  bool ShouldSplit(const BlockRec& b, Bytes size) const;
  void AllocFoundBlock(Index i, Bytes size, Bytes requested, bool split);
  void MarkFreeRequested(Index i);
  void FreeBlock(Index i);
  void ReleaseBlock(Index i);
  void ReleaseExpandableSegment(Index i);
  bool ReleaseAvailableCachedBlocks(StreamId stream, bool small_pool, Bytes size);
  void ReleaseCachedBlocks();
  void ReleasePool(bool small_pool);
  void SynchronizeAndFreeEvents();
  void GarbageCollectCachedBlocks();
  Status OutOfMemory(Bytes alloc_size);
  SegmentTotals& TotalsOf(StreamId stream, bool small_pool);
  Index CheckedAllocatedBlock(const Block& block) const;
  Bytes LargestFreeBlock() const;

  // active and active_bytes equal allocation and allocated_bytes (current, peak and totals) until
  // a block is freed with pending streams: until then they are read from those, not kept.
  void KeepActive();
  const StatCounter& Counter(Stat stat) const;
  void Increase(Stat stat, bool small_pool, std::int64_t amount);
  void Decrease(Stat stat, bool small_pool, std::int64_t amount);

  AllocConf conf_;
  std::optional<Bytes> capacity_bytes_;
  bool gc_enabled_;  // a capacity and a garbage_collection_threshold (§2.6)
  std::vector<BlockRec> blocks_;
  // get_free_blocks_call_count when each block was last cached (garbage collection only).
  std::vector<std::uint64_t> gc_count_base_;
  Index free_block_slots_ = kNone;  // unused records, linked through their `next`
  std::vector<SegmentRec> segments_;
  std::vector<Index> free_segment_slots_;
  std::vector<FreeBlockIndex> free_indexes_;  // one per (stream, pool) with a segment
  Pool small_;
  Pool large_;
  std::vector<Pending> pending_;
  std::vector<SegmentTotals> segment_totals_;  // by (stream, small_pool)
  // Set nodes of mapped blocks, reused so mapping and unmapping allocate no memory.
  std::vector<UnmappedSet::node_type> spare_nodes_;
  Bytes next_address_;
  std::array<StatCounter, kStatCount> counters_{};
  bool active_kept_ = false;  // see KeepActive
  Counts counts_;
  std::optional<OomReport> last_oom_;
};

}  // namespace bucketsim
