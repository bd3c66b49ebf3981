#include "memory/free_block_index.h"

#include <algorithm>
#include <bit>

#include "core/status.h"

namespace bucketsim {

FreeBlockIndex::FreeBlockIndex() : bins_(kBins) {}

// Sizes below 32 get a bin each; above, the bin is the power of two and the next kSubBits bits.
// Bins are monotonic in size, so scanning bins upward visits sizes in order.
inline std::uint32_t FreeBlockIndex::BinOf(Bytes size) {
  constexpr Bytes kLinear = Bytes{1} << kSubBits;
  if (size < kLinear) return static_cast<std::uint32_t>(size);
  const auto log2 = static_cast<std::uint32_t>(std::bit_width(size) - 1);
  const auto sub = static_cast<std::uint32_t>((size >> (log2 - kSubBits)) - kLinear);
  return static_cast<std::uint32_t>(kLinear) + (log2 - kSubBits) * (1u << kSubBits) + sub;
}

inline std::uint32_t FreeBlockIndex::FindHead(std::uint32_t bin, Bytes size) const {
  const std::vector<Head>& heads = bins_[bin];
  const Head* const begin = heads.data();
  const Head* const end = begin + heads.size();
  const Head* at = begin;
  if (heads.size() > kLinearHeads) {
    at = std::partition_point(begin, end, [size](const Head& head) { return head.size < size; });
  } else {
    while (at != end && at->size < size) ++at;  // a bin rarely holds more than a few sizes
  }
  return static_cast<std::uint32_t>(at - begin);
}

std::uint32_t FreeBlockIndex::FindRun(const Group& group, Bytes bound) {
  auto at = std::partition_point(group.begin(), group.end(),
                                 [bound](const Run& run) { return run.low >= bound; });
  return static_cast<std::uint32_t>(at - group.begin());
}

std::uint32_t FreeBlockIndex::FindSlot(const Chunk& chunk, Bytes bound) {
  auto begin = chunk.addresses.begin();
  auto at = std::partition_point(begin, begin + chunk.count,
                                 [bound](Bytes address) { return address >= bound; });
  return static_cast<std::uint32_t>(at - begin);
}

// ---- positions ----

inline FreeBlockIndex::Cursor FreeBlockIndex::HeadCursor(std::uint32_t bin,
                                                         std::uint32_t head) const {
  const Head& h = bins_[bin][head];
  return Cursor{{h.size, h.address, h.block}, bin, head, kAtHead, 0, version_};
}

FreeBlockIndex::Cursor FreeBlockIndex::GroupCursor(std::uint32_t bin, std::uint32_t head,
                                                   std::uint32_t run, std::uint32_t slot) const {
  const Head& h = bins_[bin][head];
  const Chunk& chunk = ChunkOf(groups_[h.group], run);
  return Cursor{
      {h.size, chunk.addresses[slot], chunk.blocks[slot]}, bin, head, run, slot, version_};
}

FreeBlockIndex::Cursor FreeBlockIndex::LowestOfGroup(std::uint32_t bin, std::uint32_t head) const {
  const Group& group = groups_[bins_[bin][head].group];
  const auto run = static_cast<std::uint32_t>(group.size() - 1);
  return GroupCursor(bin, head, run, ChunkOf(group, run).count - 1);
}

FreeBlockIndex::Cursor FreeBlockIndex::HighestOfSize(std::uint32_t bin, std::uint32_t head) const {
  if (bins_[bin][head].group == kNoGroup) return HeadCursor(bin, head);
  return GroupCursor(bin, head, 0, 0);
}

inline std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::FirstHeadFrom(
    std::uint32_t bin) const {
  if (bin >= kBins) return std::nullopt;
  std::uint32_t word = bin / 64;
  std::uint64_t bits = non_empty_[word] & (~std::uint64_t{0} << (bin % 64));
  while (bits == 0) {
    if (++word == kWords) return std::nullopt;
    bits = non_empty_[word];
  }
  return HeadCursor(word * 64 + static_cast<std::uint32_t>(std::countr_zero(bits)), 0);
}

std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::LastBefore(std::uint32_t bin) const {
  if (bin == 0) return std::nullopt;
  const std::uint32_t last = bin - 1;
  std::uint32_t word = last / 64;
  const std::uint32_t shift = 63 - last % 64;
  std::uint64_t bits = (non_empty_[word] << shift) >> shift;
  while (bits == 0) {
    if (word == 0) return std::nullopt;
    bits = non_empty_[--word];
  }
  const auto found = word * 64 + static_cast<std::uint32_t>(63 - std::countl_zero(bits));
  return HighestOfSize(found, static_cast<std::uint32_t>(bins_[found].size() - 1));
}

std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::NextSize(std::uint32_t bin,
                                                               std::uint32_t head) const {
  if (head + 1 < bins_[bin].size()) return HeadCursor(bin, head + 1);
  return FirstHeadFrom(bin + 1);
}

std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::LowerBound(Bytes size) const {
  const std::uint32_t bin = BinOf(size);
  const std::uint32_t head = FindHead(bin, size);
  if (head < bins_[bin].size()) return HeadCursor(bin, head);
  return FirstHeadFrom(bin + 1);
}

std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::LowerBound(Bytes size, Bytes address) const {
  const std::uint32_t bin = BinOf(size);
  const std::uint32_t head = FindHead(bin, size);
  if (head == bins_[bin].size()) return FirstHeadFrom(bin + 1);
  const Head& h = bins_[bin][head];
  if (h.size > size || h.address >= address) return HeadCursor(bin, head);
  if (h.group != kNoGroup) {
    // The lowest address >= `address`: the entry just before the first one below it in the
    // group's descending layout.
    const Group& group = groups_[h.group];
    const std::uint32_t run = FindRun(group, address);
    if (run == group.size()) return LowestOfGroup(bin, head);  // every address is >= `address`
    const std::uint32_t slot = FindSlot(ChunkOf(group, run), address);
    if (slot > 0) return GroupCursor(bin, head, run, slot - 1);
    if (run > 0) return GroupCursor(bin, head, run - 1, ChunkOf(group, run - 1).count - 1);
  }
  return NextSize(bin, head);  // every address of this size is below `address`
}

std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::Next(const Cursor& cursor) const {
  if (!Current(cursor)) return LowerBound(cursor.entry.size, cursor.entry.address + 1);
  if (cursor.run == kAtHead) {
    if (bins_[cursor.bin][cursor.head].group == kNoGroup) return NextSize(cursor.bin, cursor.head);
    return LowestOfGroup(cursor.bin, cursor.head);
  }
  if (cursor.slot > 0) return GroupCursor(cursor.bin, cursor.head, cursor.run, cursor.slot - 1);
  if (cursor.run > 0) {
    const Group& group = groups_[bins_[cursor.bin][cursor.head].group];
    return GroupCursor(cursor.bin, cursor.head, cursor.run - 1,
                       ChunkOf(group, cursor.run - 1).count - 1);
  }
  return NextSize(cursor.bin, cursor.head);
}

std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::Prev(const Cursor& cursor) const {
  if (!Current(cursor)) {
    std::optional<Cursor> at = LowerBound(cursor.entry.size, cursor.entry.address);
    return at ? Prev(*at) : Last();
  }
  if (cursor.run == kAtHead) {
    if (cursor.head > 0) return HighestOfSize(cursor.bin, cursor.head - 1);
    return LastBefore(cursor.bin);
  }
  const Group& group = groups_[bins_[cursor.bin][cursor.head].group];
  if (cursor.slot + 1 < ChunkOf(group, cursor.run).count) {
    return GroupCursor(cursor.bin, cursor.head, cursor.run, cursor.slot + 1);
  }
  if (cursor.run + 1 < group.size()) return GroupCursor(cursor.bin, cursor.head, cursor.run + 1, 0);
  return HeadCursor(cursor.bin, cursor.head);
}

std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::First() const { return FirstHeadFrom(0); }

std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::Last() const { return LastBefore(kBins); }

std::vector<FreeBlockIndex::Entry> FreeBlockIndex::Entries() const {
  std::vector<Entry> entries;
  entries.reserve(count_);
  for (const std::vector<Head>& heads : bins_) {
    for (const Head& head : heads) {
      entries.push_back({head.size, head.address, head.block});
      if (head.group == kNoGroup) continue;
      const Group& group = groups_[head.group];
      for (auto run = group.rbegin(); run != group.rend(); ++run) {
        const Chunk& chunk = chunks_[run->chunk];
        for (std::uint32_t slot = chunk.count; slot-- > 0;) {
          entries.push_back({head.size, chunk.addresses[slot], chunk.blocks[slot]});
        }
      }
    }
  }
  return entries;
}

// ---- changes ----

std::uint32_t FreeBlockIndex::NewGroup() {
  if (!spare_groups_.empty()) {
    const std::uint32_t group = spare_groups_.back();
    spare_groups_.pop_back();
    return group;
  }
  groups_.emplace_back();
  return static_cast<std::uint32_t>(groups_.size() - 1);
}

std::uint32_t FreeBlockIndex::NewChunk() {
  if (!spare_chunks_.empty()) {
    const std::uint32_t chunk = spare_chunks_.back();
    spare_chunks_.pop_back();
    chunks_[chunk].count = 0;
    return chunk;
  }
  chunks_.emplace_back();
  return static_cast<std::uint32_t>(chunks_.size() - 1);
}

// Flattened so the head vector's push_back inlines: Insert runs on most allocations and frees.
[[gnu::flatten]] void FreeBlockIndex::Insert(const Entry& entry) {
  ++version_;
  ++count_;
  const std::uint32_t bin = BinOf(entry.size);
  const std::uint32_t at = FindHead(bin, entry.size);
  std::vector<Head>& heads = bins_[bin];
  if (at < heads.size() && heads[at].size == entry.size) {
    InsertBeside(heads[at], entry);
    return;
  }
  const Head head{entry.size, entry.address, entry.block, kNoGroup};
  if (at == heads.size()) {
    heads.push_back(head);
  } else {
    heads.push_back(heads.back());
    std::copy_backward(heads.begin() + at, heads.end() - 2, heads.end() - 1);
    heads[at] = head;
  }
  non_empty_[bin / 64] |= std::uint64_t{1} << (bin % 64);
}

void FreeBlockIndex::InsertBeside(Head& head, const Entry& entry) {
  BUCKETSIM_CHECK(head.address != entry.address);
  if (head.group == kNoGroup) head.group = NewGroup();
  if (entry.address < head.address) {
    // The new lowest: the old head becomes the group's lowest.
    GroupInsert(head.group, head.address, head.block);
    head.address = entry.address;
    head.block = entry.block;
  } else {
    GroupInsert(head.group, entry.address, entry.block);
  }
}

void FreeBlockIndex::GroupInsert(std::uint32_t g, Bytes address, std::uint32_t block) {
  Group& group = groups_[g];
  if (group.empty() || address < group.back().low) {
    // A new lowest address: appended to the last chunk, or to a new one after it.
    if (group.empty() || chunks_[group.back().chunk].count == kChunkEntries) {
      group.push_back(Run{address, NewChunk()});
    }
    Chunk& chunk = chunks_[group.back().chunk];
    chunk.addresses[chunk.count] = address;
    chunk.blocks[chunk.count] = block;
    ++chunk.count;
    group.back().low = address;
    return;
  }
  // Above the lowest: into the chunk holding the first address below it.
  std::uint32_t run = FindRun(group, address);
  std::uint32_t slot = FindSlot(ChunkOf(group, run), address);
  BUCKETSIM_CHECK(slot == 0 || ChunkOf(group, run).addresses[slot - 1] != address);
  if (ChunkOf(group, run).count == kChunkEntries) {
    SplitRun(group, run);
    const std::uint32_t kept = ChunkOf(group, run).count;
    if (slot > kept) {
      ++run;
      slot -= kept;
    }
  }
  Chunk& chunk = chunks_[group[run].chunk];
  std::copy_backward(chunk.addresses.begin() + slot, chunk.addresses.begin() + chunk.count,
                     chunk.addresses.begin() + chunk.count + 1);
  std::copy_backward(chunk.blocks.begin() + slot, chunk.blocks.begin() + chunk.count,
                     chunk.blocks.begin() + chunk.count + 1);
  chunk.addresses[slot] = address;
  chunk.blocks[slot] = block;
  ++chunk.count;
  if (slot == chunk.count - 1) group[run].low = address;
}

void FreeBlockIndex::SplitRun(Group& group, std::uint32_t run) {
  const std::uint32_t lower = NewChunk();  // may move chunks_: index it afresh below
  Chunk& from = chunks_[group[run].chunk];
  Chunk& to = chunks_[lower];
  const std::uint32_t keep = from.count / 2;
  std::copy(from.addresses.begin() + keep, from.addresses.begin() + from.count,
            to.addresses.begin());
  std::copy(from.blocks.begin() + keep, from.blocks.begin() + from.count, to.blocks.begin());
  to.count = from.count - keep;
  from.count = keep;
  group.insert(group.begin() + run + 1, Run{group[run].low, lower});
  group[run].low = from.addresses[keep - 1];
}

void FreeBlockIndex::MergeWithNext(Group& group, std::uint32_t run) {
  Chunk& into = chunks_[group[run].chunk];
  const Chunk& from = chunks_[group[run + 1].chunk];
  std::copy(from.addresses.begin(), from.addresses.begin() + from.count,
            into.addresses.begin() + into.count);
  std::copy(from.blocks.begin(), from.blocks.begin() + from.count,
            into.blocks.begin() + into.count);
  into.count += from.count;
  group[run].low = group[run + 1].low;
  spare_chunks_.push_back(group[run + 1].chunk);
  group.erase(group.begin() + run + 1);
}

void FreeBlockIndex::Erase(Bytes size, Bytes address) {
  ++version_;
  --count_;
  const std::uint32_t bin = BinOf(size);
  const std::uint32_t at = FindHead(bin, size);
  BUCKETSIM_CHECK(at < bins_[bin].size() && bins_[bin][at].size == size);
  const Head& head = bins_[bin][at];
  if (head.address == address) {
    EraseHead(bin, at);
  } else {
    EraseFromGroup(bin, at, address);
  }
}

void FreeBlockIndex::EraseFromGroup(std::uint32_t bin, std::uint32_t at, Bytes address) {
  const Head& head = bins_[bin][at];
  BUCKETSIM_CHECK(head.group != kNoGroup);
  const Group& group = groups_[head.group];
  const std::uint32_t run = FindRun(group, address + 1);
  BUCKETSIM_CHECK(run < group.size());
  const Chunk& chunk = ChunkOf(group, run);
  const std::uint32_t slot = FindSlot(chunk, address + 1);
  BUCKETSIM_CHECK(slot < chunk.count && chunk.addresses[slot] == address);
  GroupErase(bin, at, run, slot);
}

void FreeBlockIndex::Erase(const Cursor& cursor) {
  if (!Current(cursor)) {
    Erase(cursor.entry.size, cursor.entry.address);
    return;
  }
  ++version_;
  --count_;
  if (cursor.run == kAtHead) {
    EraseHead(cursor.bin, cursor.head);
  } else {
    GroupErase(cursor.bin, cursor.head, cursor.run, cursor.slot);
  }
}

inline void FreeBlockIndex::EraseHead(std::uint32_t bin, std::uint32_t at) {
  std::vector<Head>& heads = bins_[bin];
  if (heads[at].group != kNoGroup) {
    PromoteLowestOfGroup(bin, at);
    return;
  }
  std::copy(heads.begin() + at + 1, heads.end(), heads.begin() + at);
  heads.pop_back();
  if (heads.empty()) non_empty_[bin / 64] &= ~(std::uint64_t{1} << (bin % 64));
}

void FreeBlockIndex::PromoteLowestOfGroup(std::uint32_t bin, std::uint32_t at) {
  Head& head = bins_[bin][at];
  const Group& group = groups_[head.group];
  const auto run = static_cast<std::uint32_t>(group.size() - 1);
  const Chunk& chunk = ChunkOf(group, run);
  head.address = chunk.addresses[chunk.count - 1];
  head.block = chunk.blocks[chunk.count - 1];
  GroupErase(bin, at, run, chunk.count - 1);
}

void FreeBlockIndex::GroupErase(std::uint32_t bin, std::uint32_t at, std::uint32_t run,
                                std::uint32_t slot) {
  Head& head = bins_[bin][at];
  Group& group = groups_[head.group];
  Chunk& chunk = chunks_[group[run].chunk];
  std::copy(chunk.addresses.begin() + slot + 1, chunk.addresses.begin() + chunk.count,
            chunk.addresses.begin() + slot);
  std::copy(chunk.blocks.begin() + slot + 1, chunk.blocks.begin() + chunk.count,
            chunk.blocks.begin() + slot);
  --chunk.count;
  if (chunk.count == 0) {
    spare_chunks_.push_back(group[run].chunk);
    group.erase(group.begin() + run);
    if (group.empty()) {
      spare_groups_.push_back(head.group);
      head.group = kNoGroup;
    }
    return;
  }
  if (slot == chunk.count) group[run].low = chunk.addresses[slot - 1];
  // Merging keeps chunks a quarter full or more on average, so directories stay short.
  if (chunk.count > kMergeAtMost) return;
  if (run + 1 < group.size() && chunk.count + ChunkOf(group, run + 1).count <= kChunkEntries / 2) {
    MergeWithNext(group, run);
  } else if (run > 0 && chunk.count + ChunkOf(group, run - 1).count <= kChunkEntries / 2) {
    MergeWithNext(group, run - 1);
  }
}

}  // namespace bucketsim
