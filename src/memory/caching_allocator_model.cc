#include "memory/caching_allocator_model.h"

#include <algorithm>
#include <bit>
#include <limits>

#include <fmt/format.h>

#include "core/size_format.h"
#include "memory/exact_memory_model.h"

namespace bucketsim {
namespace {

// Where the simulated address space starts; any nonzero base would do.
constexpr Bytes kFirstAddress = Bytes{1} << 32;
// Without a capacity an expandable segment reserves this much address space (PyTorch reserves
// 1.125 x the device memory); 16 TiB is beyond any request a sane trace makes.
constexpr Bytes kUnboundedAddressSpace = Bytes{1} << 44;

constexpr Bytes RoundUp(Bytes value, Bytes multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

Bytes PageSize(bool small_pool) { return small_pool ? kSmallBuffer : kLargeBuffer; }

// roundup_power2_next_division: the next of `divisions` equal steps between two powers of two.
Bytes RoundupPower2NextDivision(Bytes size, std::uint64_t divisions) {
  if (std::has_single_bit(size)) return size;
  Bytes floor2 = std::bit_floor(size);
  Bytes step = floor2 >> (std::bit_width(divisions) - 1);
  if (step == 0) return floor2 << 1;
  return RoundUp(size, step);
}

// The oversize counters (AllocatorStat as PyTorch keeps it).
inline void IncreaseStat(AllocatorStat& stat, std::int64_t amount) {
  stat.current += amount;
  stat.allocated += amount;
  stat.peak = std::max(stat.peak, stat.current);
}

inline void DecreaseStat(AllocatorStat& stat, std::int64_t amount) {
  stat.current -= amount;
  stat.freed += amount;
}

std::int64_t Signed(Bytes bytes) { return static_cast<std::int64_t>(bytes); }

}  // namespace

Bytes RoundSize(Bytes requested, const AllocConf& conf) {
  if (requested < kMinBlockSize) return kMinBlockSize;
  std::uint64_t divisions = conf.RoundupDivisions(requested);
  if (divisions > 1 && requested > kMinBlockSize * divisions) {
    return RoundupPower2NextDivision(requested, divisions);
  }
  return RoundUp(requested, kMinBlockSize);
}

Bytes AllocationSize(Bytes rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return RoundUp(rounded, kRoundLarge);
}

CachingAllocatorModel::CachingAllocatorModel(AllocConf conf, std::optional<Bytes> capacity_bytes)
    : conf_(conf),
      capacity_bytes_(capacity_bytes),
      gc_enabled_(capacity_bytes.has_value() && conf.garbage_collection_threshold > 0),
      next_address_(kFirstAddress) {}

Bytes CachingAllocatorModel::allocated_bytes() const {
  return static_cast<Bytes>(counters_[kAllocatedBytes].all_current());
}

Bytes CachingAllocatorModel::reserved_bytes() const {
  return static_cast<Bytes>(counters_[kReservedBytes].all_current());
}

// PyTorch's update_stat_array adds to the pool's stat and to "all", each keeping its peak
// (reference/caching_allocator.md §3.6); "all" is the pools' sum here.
inline void CachingAllocatorModel::Increase(Stat stat, bool small_pool, std::int64_t amount) {
  StatCounter& counter = counters_[stat];
  const std::int64_t current = counter.current[small_pool] += amount;
  counter.peak[small_pool] = std::max(counter.peak[small_pool], current);
  counter.all_peak = std::max(counter.all_peak, counter.all_current());
}

inline void CachingAllocatorModel::Decrease(Stat stat, bool small_pool, std::int64_t amount) {
  StatCounter& counter = counters_[stat];
  counter.current[small_pool] -= amount;
  counter.freed[small_pool] += amount;
}

// ---- block and segment records ----

inline CachingAllocatorModel::Index CachingAllocatorModel::NewBlock() {
  if (free_block_slots_ != kNone) {
    const Index i = free_block_slots_;
    free_block_slots_ = blocks_[i].next;
    blocks_[i] = BlockRec{};
    return i;
  }
  blocks_.emplace_back();
  if (gc_enabled_) gc_count_base_.push_back(0);
  return static_cast<Index>(blocks_.size() - 1);
}

inline void CachingAllocatorModel::DeleteBlock(Index i) {
  blocks_[i].next = free_block_slots_;
  free_block_slots_ = i;
}

CachingAllocatorModel::Index CachingAllocatorModel::NewSegment(Bytes size, StreamId stream,
                                                               bool small_pool, bool expandable) {
  Index s;
  if (free_segment_slots_.empty()) {
    segments_.emplace_back();
    s = static_cast<Index>(segments_.size() - 1);
  } else {
    s = free_segment_slots_.back();
    free_segment_slots_.pop_back();
  }
  Index head = NewBlock();
  segments_[s] = SegmentRec{next_address_, size, head, true};
  next_address_ += size;
  BlockRec& b = blocks_[head];
  b.address = segments_[s].address;
  b.size = size;
  b.segment = s;
  b.stream = stream;
  b.free_index = FreeIndexId(stream, small_pool);
  b.small_pool = small_pool;
  b.expandable = expandable;
  b.state = expandable ? BlockState::kUnmapped : BlockState::kFree;
  return s;
}

void CachingAllocatorModel::DeleteSegment(Index s) {
  segments_[s].live = false;
  free_segment_slots_.push_back(s);
}

FreeBlockIndex* CachingAllocatorModel::FindFreeIndex(Pool& pool, StreamId stream) {
  for (const auto& [id, index] : pool.free) {
    if (id == stream) return &free_indexes_[index];
  }
  return nullptr;
}

std::uint16_t CachingAllocatorModel::FreeIndexId(StreamId stream, bool small_pool) {
  Pool& pool = PoolOf(small_pool);
  auto at = std::lower_bound(pool.free.begin(), pool.free.end(), stream,
                             [](const auto& entry, StreamId s) { return entry.first < s; });
  if (at != pool.free.end() && at->first == stream) return at->second;
  BUCKETSIM_CHECK(free_indexes_.size() < std::numeric_limits<std::uint16_t>::max());
  const auto id = static_cast<std::uint16_t>(free_indexes_.size());
  free_indexes_.emplace_back();
  pool.free.emplace(at, stream, id);
  return id;
}

std::vector<FreeBlockIndex::Entry> CachingAllocatorModel::FreeEntries(const Pool& pool) const {
  std::vector<FreeBlockIndex::Entry> entries;
  for (const auto& [stream, index] : pool.free) {
    std::vector<FreeBlockIndex::Entry> stream_entries = free_indexes_[index].Entries();
    entries.insert(entries.end(), stream_entries.begin(), stream_entries.end());
  }
  return entries;
}

inline void CachingAllocatorModel::Attach(Index i) {
  const BlockRec& b = blocks_[i];
  if (b.state != BlockState::kFree) {
    AttachUnmapped(i);
    return;
  }
  if (gc_enabled_) gc_count_base_[i] = PoolOf(b).get_free_blocks_call_count;
  free_indexes_[b.free_index].Insert({b.size, b.address, i});
}

void CachingAllocatorModel::AttachUnmapped(Index i) {
  const BlockRec& b = blocks_[i];
  BUCKETSIM_CHECK(b.state == BlockState::kUnmapped);
  UnmappedSet& unmapped = PoolOf(b).unmapped;
  const UnmappedKey key{b.stream, b.address, i};
  if (spare_nodes_.empty()) {
    unmapped.insert(key);
    return;
  }
  UnmappedSet::node_type node = std::move(spare_nodes_.back());
  spare_nodes_.pop_back();
  node.value() = key;
  unmapped.insert(std::move(node));
}

inline void CachingAllocatorModel::Detach(Index i) {
  const BlockRec& b = blocks_[i];
  if (b.state != BlockState::kFree) {
    DetachUnmapped(i);
    return;
  }
  free_indexes_[b.free_index].Erase(b.size, b.address);
}

void CachingAllocatorModel::DetachUnmapped(Index i) {
  const BlockRec& b = blocks_[i];
  BUCKETSIM_CHECK(b.state == BlockState::kUnmapped);
  UnmappedSet& unmapped = PoolOf(b).unmapped;
  auto at = unmapped.find(UnmappedKey{b.stream, b.address, i});
  BUCKETSIM_CHECK(at != unmapped.end());
  spare_nodes_.push_back(unmapped.extract(at));
}

CachingAllocatorModel::Index CachingAllocatorModel::MergeNeighbours(Index i, Bytes* absorbed_bytes,
                                                                    std::int64_t* absorbed_count) {
  const BlockState state = blocks_[i].state;
  Index prev = blocks_[i].prev;
  if (prev != kNone && blocks_[prev].state == state) {
    Detach(prev);
    *absorbed_bytes += blocks_[prev].size;
    ++*absorbed_count;
    blocks_[prev].size += blocks_[i].size;
    blocks_[prev].next = blocks_[i].next;
    if (blocks_[i].next != kNone) blocks_[blocks_[i].next].prev = prev;
    DeleteBlock(i);
    i = prev;
  }
  Index next = blocks_[i].next;
  if (next != kNone && blocks_[next].state == state) {
    Detach(next);
    *absorbed_bytes += blocks_[next].size;
    ++*absorbed_count;
    blocks_[i].size += blocks_[next].size;
    blocks_[i].next = blocks_[next].next;
    if (blocks_[next].next != kNone) blocks_[blocks_[next].next].prev = i;
    DeleteBlock(next);
  }
  return i;
}

inline CachingAllocatorModel::Index CachingAllocatorModel::SplitFront(Index i, Bytes size) {
  Index rest = NewBlock();
  BlockRec& front = blocks_[i];
  BlockRec& back = blocks_[rest];
  BUCKETSIM_CHECK(size < front.size);
  back.address = front.address + size;
  back.size = front.size - size;
  back.stream = front.stream;
  back.free_index = front.free_index;
  back.small_pool = front.small_pool;
  back.expandable = front.expandable;
  back.segment = front.segment;
  back.prev = i;
  back.next = front.next;
  if (front.next != kNone) blocks_[front.next].prev = rest;
  front.next = rest;
  front.size = size;
  return rest;
}

CachingAllocatorModel::SegmentTotals& CachingAllocatorModel::TotalsOf(StreamId stream,
                                                                      bool small_pool) {
  auto before = [](const SegmentTotals& t, std::pair<StreamId, bool> key) {
    return t.stream != key.first ? t.stream < key.first : t.small_pool < key.second;
  };
  auto at = std::lower_bound(segment_totals_.begin(), segment_totals_.end(),
                             std::pair{stream, small_pool}, before);
  if (at == segment_totals_.end() || at->stream != stream || at->small_pool != small_pool) {
    at = segment_totals_.insert(at, {stream, small_pool, 0, 0});
  }
  return *at;
}

// ---- malloc ----

// Every allocation and free runs Allocate / Free: both are flattened (their helpers inlined, the
// slow paths marked noinline stay out), which saves a tenth of the model's instructions
// (bench/caching_model_bench.cc).
[[gnu::flatten]] Result<Block> CachingAllocatorModel::Allocate(Bytes requested, StreamId stream) {
  if (requested == 0) return Block{kZeroBytesHandle, 0};
  const Bytes size = RoundSize(requested, conf_);
  const bool small_pool = size <= kSmallSize;
  const Index i = GetFreeBlock(stream, small_pool, size);
  if (i == kNone) return AllocateSlow(requested, stream, small_pool, size);
  return TakeBlock(i, size, requested);
}

inline Block CachingAllocatorModel::TakeBlock(Index i, Bytes size, Bytes requested) {
  AllocFoundBlock(i, size, requested, ShouldSplit(blocks_[i], size));
  NotifyBlock({BlockAction::kAlloc, blocks_[i].address, requested, blocks_[i].stream, 0});
  return Block{i, blocks_[i].size};
}

inline CachingAllocatorModel::Index CachingAllocatorModel::GetFreeBlock(StreamId stream,
                                                                        bool small_pool,
                                                                        Bytes size) {
  Pool& pool = PoolOf(small_pool);
  if (gc_enabled_) ++pool.get_free_blocks_call_count;
  FreeBlockIndex* index = FindFreeIndex(pool, stream);
  if (index == nullptr) return kNone;
  auto cursor = index->LowerBound(size);
  if (!cursor) return kNone;
  if (blocks_[index->At(*cursor).block].expandable) cursor = PreferHoles(*index, *cursor);
  const FreeBlockIndex::Entry& best = index->At(*cursor);
  // Rule A: no oversize block for a request below max_split_size. Rule B: an oversize request
  // takes a block at most max_non_split_rounding bigger (§2.3).
  if (size < conf_.max_split_size && best.size >= conf_.max_split_size) return kNone;
  if (size >= conf_.max_split_size && best.size - size >= conf_.max_non_split_rounding) {
    return kNone;
  }
  const Index i = best.block;
  index->Erase(*cursor);  // Detach, without searching again
  return i;
}

// A free block at the tail of an expandable segment counts as the size it could grow to, so holes
// inside the segment are preferred over the growable tail (§4).
FreeBlockIndex::Cursor CachingAllocatorModel::PreferHoles(const FreeBlockIndex& index,
                                                          FreeBlockIndex::Cursor cursor) const {
  auto expandable_size = [&](FreeBlockIndex::Cursor c) {
    const BlockRec& b = blocks_[index.At(c).block];
    bool unmapped_next = b.next != kNone && blocks_[b.next].state == BlockState::kUnmapped;
    return b.size + (unmapped_next ? blocks_[b.next].size : 0);
  };
  for (auto next = index.Next(cursor); next && blocks_[index.At(cursor).block].expandable &&
                                       expandable_size(*next) < expandable_size(cursor);
       next = index.Next(*next)) {
    cursor = *next;
  }
  return cursor;
}

Result<Block> CachingAllocatorModel::AllocateSlow(Bytes requested, StreamId stream, bool small_pool,
                                                  Bytes size) {
  const Bytes alloc_size = AllocationSize(size);
  if (gc_enabled_) GarbageCollectCachedBlocks();
  Index i = AllocBlock(stream, small_pool, size, alloc_size, false);
  if (i == kNone && ReleaseAvailableCachedBlocks(stream, small_pool, size)) {
    i = AllocBlock(stream, small_pool, size, alloc_size, false);
  }
  if (i == kNone) {
    ReleaseCachedBlocks();
    i = AllocBlock(stream, small_pool, size, alloc_size, true);
  }
  if (i == kNone) {
    const Bytes capacity = capacity_bytes_.value_or(0);
    NotifyBlock(
        {BlockAction::kOom, 0, size, stream, capacity - std::min(capacity, reserved_bytes())});
    return OutOfMemory(alloc_size);
  }
  return TakeBlock(i, size, requested);
}

CachingAllocatorModel::Index CachingAllocatorModel::AllocBlock(StreamId stream, bool small_pool,
                                                               Bytes size, Bytes alloc_size,
                                                               bool is_retry) {
  if (is_retry) ++counts_.num_alloc_retries;
  if (conf_.expandable_segments) return TryAllocateExpandableBlock(stream, small_pool, size);
  if (capacity_bytes_ && reserved_bytes() + alloc_size > *capacity_bytes_) return kNone;
  Index s = NewSegment(alloc_size, stream, small_pool, false);
  Index i = segments_[s].head;
  Increase(kSegment, small_pool, 1);
  Increase(kReservedBytes, small_pool, Signed(alloc_size));
  SegmentTotals& totals = TotalsOf(stream, small_pool);
  ++totals.count;
  totals.bytes += alloc_size;
  if (alloc_size >= conf_.max_split_size) IncreaseStat(counts_.oversize_segments, 1);
  ++counts_.num_device_alloc;
  NotifySegment({SegmentAction::kAlloc, blocks_[i].address, alloc_size, stream, small_pool});
  return i;
}

inline bool CachingAllocatorModel::ShouldSplit(const BlockRec& b, Bytes size) const {
  const Bytes remaining = b.size - size;
  if (b.small_pool || conf_.expandable_segments) return remaining >= kMinBlockSize;
  return size < conf_.max_split_size && remaining > kSmallSize;
}

inline void CachingAllocatorModel::AllocFoundBlock(Index i, Bytes size, Bytes requested,
                                                   bool split) {
  const bool already_split = blocks_[i].is_split();
  const bool small_pool = blocks_[i].small_pool;
  // inactive_split is not tracked for expandable segments (§3.2).
  const bool track_split = !blocks_[i].expandable;
  if (split) {
    Index rest = SplitFront(i, size);
    Attach(rest);
    if (track_split && already_split) {
      Decrease(kInactiveSplitBytes, small_pool, Signed(size));
    } else if (track_split) {
      Increase(kInactiveSplitBytes, small_pool, Signed(blocks_[rest].size));
      Increase(kInactiveSplit, small_pool, 1);
    }
  } else if (track_split && already_split) {
    Decrease(kInactiveSplitBytes, small_pool, Signed(blocks_[i].size));
    Decrease(kInactiveSplit, small_pool, 1);
  }
  BlockRec& b = blocks_[i];
  b.state = BlockState::kAllocated;
  b.requested = requested;
  Increase(kAllocation, small_pool, 1);
  Increase(kAllocatedBytes, small_pool, Signed(b.size));
  if (active_kept_) {
    Increase(kActive, small_pool, 1);
    Increase(kActiveBytes, small_pool, Signed(b.size));
  }
  Increase(kRequestedBytes, small_pool, Signed(requested));
  if (b.size >= conf_.max_split_size) IncreaseStat(counts_.oversize_allocations, 1);
}

// ---- expandable segments (§4) ----

CachingAllocatorModel::Index CachingAllocatorModel::TryAllocateExpandableBlock(StreamId stream,
                                                                               bool small_pool,
                                                                               Bytes size) {
  Index c = FindExpandableBlock(stream, small_pool, size);
  if (c == kNone) return kNone;
  // c starts a run with room for `size`: unmapped, or free followed by unmapped.
  if (blocks_[c].state == BlockState::kUnmapped) {
    c = MapBlock(c, std::min(blocks_[c].size, size));
    if (c == kNone) return kNone;
  }
  while (blocks_[c].size < size) {
    Index next = blocks_[c].next;
    BUCKETSIM_CHECK(next != kNone && blocks_[next].state == BlockState::kUnmapped);
    c = MapBlock(next, std::min(size - blocks_[c].size, blocks_[next].size));
    if (c == kNone) return kNone;
  }
  Detach(c);
  return c;
}

CachingAllocatorModel::Index CachingAllocatorModel::FindExpandableBlock(StreamId stream,
                                                                        bool small_pool,
                                                                        Bytes size) {
  Pool& pool = PoolOf(small_pool);
  auto allocatable = [this](Index j) {
    return j != kNone &&
           (blocks_[j].state == BlockState::kFree || blocks_[j].state == BlockState::kUnmapped);
  };
  auto has_room = [&](Index j) {
    Bytes bytes = 0;
    for (; bytes < size && allocatable(j); j = blocks_[j].next) bytes += blocks_[j].size;
    return bytes >= size;
  };
  for (auto it = pool.unmapped.lower_bound({stream, 0, 0});
       it != pool.unmapped.end() && it->stream == stream; ++it) {
    Index c = it->block;
    if (allocatable(blocks_[c].prev)) c = blocks_[c].prev;
    if (has_room(c)) return c;
  }
  const Bytes page = PageSize(small_pool);
  const Bytes address_space = capacity_bytes_
                                  ? RoundUp(*capacity_bytes_ + *capacity_bytes_ / 8, page)
                                  : RoundUp(kUnboundedAddressSpace, page);
  if (address_space < size) return kNone;
  Index s = NewSegment(address_space, stream, small_pool, true);
  Index c = segments_[s].head;
  ++TotalsOf(stream, small_pool).count;  // no memory until pages are mapped
  Attach(c);
  return c;
}

CachingAllocatorModel::Index CachingAllocatorModel::MapBlock(Index i, Bytes size) {
  BUCKETSIM_CHECK(blocks_[i].state == BlockState::kUnmapped && size <= blocks_[i].size);
  const bool small_pool = blocks_[i].small_pool;
  // Unmapped ranges start on a page boundary, so whole pages cover [address, address + size).
  const Bytes mapped = RoundUp(size, PageSize(small_pool));
  BUCKETSIM_CHECK(mapped <= blocks_[i].size);
  if (capacity_bytes_ && reserved_bytes() + mapped > *capacity_bytes_) return kNone;
  NotifySegment({SegmentAction::kMap, blocks_[i].address, mapped, blocks_[i].stream, small_pool});
  Detach(i);
  blocks_[i].state = BlockState::kFree;
  if (mapped < blocks_[i].size) {
    Index rest = SplitFront(i, mapped);
    blocks_[rest].state = BlockState::kUnmapped;
    Attach(rest);
  }
  Bytes absorbed_bytes = 0;
  std::int64_t absorbed_count = 0;
  i = MergeNeighbours(i, &absorbed_bytes, &absorbed_count);
  Attach(i);
  Increase(kReservedBytes, small_pool, Signed(mapped));
  TotalsOf(blocks_[i].stream, small_pool).bytes += mapped;
  ++counts_.num_device_alloc;
  return i;
}

CachingAllocatorModel::Index CachingAllocatorModel::UnmapBlock(Index i) {
  const bool small_pool = blocks_[i].small_pool;
  const Bytes page = PageSize(small_pool);
  const Bytes offset = blocks_[i].address - segments_[blocks_[i].segment].address;
  const Bytes begin = RoundUp(offset, page);
  const Bytes end = (offset + blocks_[i].size) / page * page;
  if (begin >= end) return kNone;
  Detach(i);
  Index unmapped = i;
  if (begin > offset) {
    unmapped = SplitFront(i, begin - offset);
    Attach(i);  // the free bytes before the first whole page stay mapped
  }
  if (blocks_[unmapped].size > end - begin) {
    Index after = SplitFront(unmapped, end - begin);
    Attach(after);  // and so do those after the last
  }
  blocks_[unmapped].state = BlockState::kUnmapped;
  Bytes absorbed_bytes = 0;
  std::int64_t absorbed_count = 0;
  unmapped = MergeNeighbours(unmapped, &absorbed_bytes, &absorbed_count);
  Attach(unmapped);
  Decrease(kReservedBytes, small_pool, Signed(end - begin));
  TotalsOf(blocks_[unmapped].stream, small_pool).bytes -= end - begin;
  ++counts_.num_device_free;
  NotifySegment({SegmentAction::kUnmap, segments_[blocks_[unmapped].segment].address + begin,
                 end - begin, blocks_[unmapped].stream, small_pool});
  return unmapped;
}

void CachingAllocatorModel::ReleaseExpandableSegment(Index i) {
  --TotalsOf(blocks_[i].stream, blocks_[i].small_pool).count;  // wholly unmapped: no bytes
  Detach(i);
  DeleteSegment(blocks_[i].segment);
  DeleteBlock(i);
}

// ---- free ----

inline CachingAllocatorModel::Index CachingAllocatorModel::CheckedAllocatedBlock(
    const Block& block) const {
  BUCKETSIM_CHECK(block.handle < blocks_.size());
  const Index i = static_cast<Index>(block.handle);
  BUCKETSIM_CHECK(blocks_[i].state == BlockState::kAllocated);
  BUCKETSIM_CHECK(blocks_[i].size == block.charged);
  return i;
}

[[gnu::flatten]] void CachingAllocatorModel::Free(const Block& block) {
  if (block.handle == kZeroBytesHandle) return;
  Index i = CheckedAllocatedBlock(block);
  MarkFreeRequested(i);
  FreeBlock(i);
}

void CachingAllocatorModel::FreeWithPendingStreams(const Block& block,
                                                   std::vector<StreamId> pending) {
  if (block.handle == kZeroBytesHandle) return;
  Index i = CheckedAllocatedBlock(block);
  std::erase(pending, blocks_[i].stream);
  std::sort(pending.begin(), pending.end());
  pending.erase(std::unique(pending.begin(), pending.end()), pending.end());
  if (!pending.empty()) KeepActive();  // while the block is still active and allocated
  MarkFreeRequested(i);
  if (pending.empty()) {
    FreeBlock(i);
    return;
  }
  blocks_[i].state = BlockState::kPendingFree;
  pending_.push_back({i, std::move(pending)});
}

void CachingAllocatorModel::KeepActive() {
  if (active_kept_) return;
  counters_[kActive] = counters_[kAllocation];
  counters_[kActiveBytes] = counters_[kAllocatedBytes];
  active_kept_ = true;
}

const CachingAllocatorModel::StatCounter& CachingAllocatorModel::Counter(Stat stat) const {
  if (!active_kept_ && stat == kActive) return counters_[kAllocation];
  if (!active_kept_ && stat == kActiveBytes) return counters_[kAllocatedBytes];
  return counters_[stat];
}

void CachingAllocatorModel::StreamSynchronized(StreamId stream) {
  std::vector<Index> ready;
  std::erase_if(pending_, [&](Pending& p) {
    std::erase(p.streams, stream);
    if (!p.streams.empty()) return false;
    ready.push_back(p.block);
    return true;
  });
  for (Index i : ready) FreeBlock(i);
}

void CachingAllocatorModel::SynchronizeAndFreeEvents() {
  ++counts_.num_sync_all_streams;
  std::vector<Pending> pending = std::move(pending_);
  pending_.clear();
  for (const Pending& p : pending) FreeBlock(p.block);
}

// free_requested: allocated drops now, whether or not the block can be reused yet.
inline void CachingAllocatorModel::MarkFreeRequested(Index i) {
  const BlockRec& b = blocks_[i];
  NotifyBlock({BlockAction::kFreeRequested, b.address, b.requested, b.stream, 0});
  Decrease(kAllocation, b.small_pool, 1);
  Decrease(kAllocatedBytes, b.small_pool, Signed(b.size));
  if (b.size >= conf_.max_split_size) DecreaseStat(counts_.oversize_allocations, 1);
}

// free_completed: the block merges with free neighbours and returns to its pool (§3.3).
void CachingAllocatorModel::FreeBlock(Index i) {
  const Bytes original_size = blocks_[i].size;
  const Bytes requested = blocks_[i].requested;
  const bool small_pool = blocks_[i].small_pool;
  const bool track_split = !blocks_[i].expandable;
  NotifyBlock({BlockAction::kFreeCompleted, blocks_[i].address, requested, blocks_[i].stream, 0});
  blocks_[i].state = BlockState::kFree;
  blocks_[i].requested = 0;
  Bytes absorbed_bytes = 0;
  std::int64_t absorbed_count = 0;
  i = MergeNeighbours(i, &absorbed_bytes, &absorbed_count);
  Attach(i);
  std::int64_t net_count = -absorbed_count;
  std::int64_t net_bytes = -Signed(absorbed_bytes);
  if (blocks_[i].is_split()) {
    net_count += 1;
    net_bytes += Signed(blocks_[i].size);
  }
  if (track_split) {
    if (net_count > 0) Increase(kInactiveSplit, small_pool, net_count);
    if (net_count < 0) Decrease(kInactiveSplit, small_pool, -net_count);
    if (net_bytes > 0) Increase(kInactiveSplitBytes, small_pool, net_bytes);
    if (net_bytes < 0) Decrease(kInactiveSplitBytes, small_pool, -net_bytes);
  }
  if (active_kept_) {
    Decrease(kActive, small_pool, 1);
    Decrease(kActiveBytes, small_pool, Signed(original_size));
  }
  Decrease(kRequestedBytes, small_pool, Signed(requested));
}

// ---- releasing cached memory (§2.5, §2.6, §3.7) ----

void CachingAllocatorModel::ReleaseBlock(Index i) {
  const BlockRec& b = blocks_[i];
  BUCKETSIM_CHECK(b.state == BlockState::kFree && !b.expandable && !b.is_split());
  Detach(i);
  Decrease(kSegment, b.small_pool, 1);
  Decrease(kReservedBytes, b.small_pool, Signed(b.size));
  SegmentTotals& totals = TotalsOf(b.stream, b.small_pool);
  --totals.count;
  totals.bytes -= b.size;
  if (b.size >= conf_.max_split_size) DecreaseStat(counts_.oversize_segments, 1);
  ++counts_.num_device_free;
  NotifySegment({SegmentAction::kFree, b.address, b.size, b.stream, b.small_pool});
  DeleteSegment(b.segment);
  DeleteBlock(i);
}

bool CachingAllocatorModel::ReleaseAvailableCachedBlocks(StreamId stream, bool small_pool,
                                                         Bytes size) {
  if (conf_.max_split_size == AllocConf::kUnlimited) return false;
  FreeBlockIndex* index = FindFreeIndex(PoolOf(small_pool), stream);
  if (index == nullptr) return false;
  const Bytes key = std::max(size, conf_.max_split_size);
  auto found = index->LowerBound(key);
  if (found && !blocks_[index->At(*found).block].expandable) {
    ReleaseBlock(index->At(*found).block);  // the smallest single block that is big enough
    return true;
  }
  // Otherwise release oversize blocks of this stream, largest first, until key bytes are freed.
  // Erasing an entry invalidates only cursors to it, so the cursor to the one before stays valid.
  Bytes released = 0;
  for (auto cursor = found ? index->Prev(*found) : index->Last();
       cursor && released < key && index->At(*cursor).size >= conf_.max_split_size;) {
    const Index c = index->At(*cursor).block;
    cursor = index->Prev(*cursor);
    if (blocks_[c].expandable) continue;
    released += blocks_[c].size;
    ReleaseBlock(c);
  }
  return released >= key;
}

void CachingAllocatorModel::ReleaseCachedBlocks() {
  SynchronizeAndFreeEvents();
  ReleasePool(false);
  ReleasePool(true);
}

void CachingAllocatorModel::ReleasePool(bool small_pool) {
  std::vector<Index> to_unmap;
  for (const FreeBlockIndex::Entry& entry : FreeEntries(PoolOf(small_pool))) {
    if (blocks_[entry.block].expandable) {
      to_unmap.push_back(entry.block);
    } else if (!blocks_[entry.block].is_split()) {
      ReleaseBlock(entry.block);
    }
  }
  for (Index i : to_unmap) {
    Index unmapped = UnmapBlock(i);
    if (unmapped != kNone && !blocks_[unmapped].is_split()) ReleaseExpandableSegment(unmapped);
  }
}

void CachingAllocatorModel::EmptyCache() { ReleaseCachedBlocks(); }

void CachingAllocatorModel::GarbageCollectCachedBlocks() {
  const Bytes threshold = static_cast<Bytes>(conf_.garbage_collection_threshold *
                                             static_cast<double>(*capacity_bytes_));
  const Bytes total = reserved_bytes();
  if (total <= threshold) return;
  const Bytes target = total - threshold;
  Pool& pool = large_;
  auto age = [&](Index j) { return pool.get_free_blocks_call_count - gc_count_base_[j]; };
  std::uint64_t total_age = 0;
  std::int64_t freeable = 0;
  for (const FreeBlockIndex::Entry& entry : FreeEntries(pool)) {
    if (blocks_[entry.block].is_split()) continue;
    total_age += age(entry.block);
    ++freeable;
  }
  Bytes reclaimed = 0;
  bool freed = true;
  // Rounds release every block at least as old as the average, without stopping mid-round.
  while (reclaimed < target && freed && freeable > 0) {
    const double age_threshold = static_cast<double>(total_age) / static_cast<double>(freeable);
    freed = false;
    for (const FreeBlockIndex::Entry& entry : FreeEntries(pool)) {
      const Index j = entry.block;
      const BlockRec& b = blocks_[j];
      if (b.is_split() || b.expandable || static_cast<double>(age(j)) < age_threshold) continue;
      freed = true;
      reclaimed += b.size;
      total_age -= age(j);
      --freeable;
      ReleaseBlock(j);
    }
  }
}

Status CachingAllocatorModel::OutOfMemory(Bytes alloc_size) {
  ++counts_.num_ooms;
  const Bytes capacity = capacity_bytes_.value_or(0);
  OomReport report{alloc_size,
                   capacity,
                   capacity - std::min(capacity, reserved_bytes()),
                   allocated_bytes(),
                   reserved_bytes() - allocated_bytes(),
                   0};
  for (const SegmentRec& segment : segments_) {
    if (!segment.live) continue;
    for (Index i = segment.head; i != kNone; i = blocks_[i].next) {
      report.free_blocks += blocks_[i].state == BlockState::kFree ? 1 : 0;
    }
  }
  last_oom_ = report;
  return DeviceError(fmt::format(
      "CUDA out of memory (simulated). Tried to allocate {}. Device has a total capacity of {} "
      "of which {} is free. Of the allocated memory {} is allocated by PyTorch, and {} is "
      "reserved by PyTorch but unallocated.",
      FormatBytes(report.tried_to_allocate_bytes), FormatBytes(report.capacity_bytes),
      FormatBytes(report.free_bytes), FormatBytes(report.allocated_bytes),
      FormatBytes(report.reserved_unallocated_bytes)));
}

}  // namespace bucketsim
