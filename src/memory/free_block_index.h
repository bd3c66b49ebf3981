// The cached free blocks of one stream and pool, ordered by (size, address): the order in which
// PyTorch's caching allocator picks a best fit (smallest size >= request, then lowest address;
// BlockPool is a std::set ordered by BlockComparatorSize, reference/caching_allocator.md §2.3).
//
// Sizes are binned by size class (two-level segregated fit: a power of two split into 32
// sub-classes, classes in size order, a bitmap of non-empty bins), so a best-fit search finds
// the first candidate bin with one bit scan. A bin is a short vector of heads in size order, one
// per size present, each holding that size's lowest address: the best fit is a head, read from
// one contiguous vector. A size with more than one block keeps the others in a group: addresses
// in DESCENDING order in fixed-size chunks, with a directory of each chunk's lowest address. A
// training step caches thousands of blocks of a few sizes and almost always takes and returns
// the lowest address of a size (the most recently freed block, LIFO), so a head is replaced by
// the last entry of its group's last chunk, or pushed there: no search, nothing moved. Any other
// address is found by a binary search of the directory and one in a chunk, and moves at most one
// chunk's entries (a full chunk splits, a chunk that runs low merges with a neighbour). Most
// other sizes have one free block at a time (the remainders of splits), a head and no group.
// Chunks and groups are reused, so a steady state allocates no memory. The index owns only the
// entries; the model owns the blocks they name.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/units.h"

namespace bucketsim {

class FreeBlockIndex {
 public:
  struct Entry {
    Bytes size = 0;
    Bytes address = 0;
    std::uint32_t block = 0;
  };
  // A position: the entry found there, by value, and where it was. The place is used while the
  // index has not changed since; after a change a step from the cursor searches for its entry's
  // key instead, so a cursor outlives the erasure of its own entry and of any other.
  struct Cursor {
    Entry entry;
    std::uint32_t bin = 0;
    std::uint32_t head = 0;  // position in the bin
    std::uint32_t run = 0;   // position in the head's group directory; kAtHead: the head itself
    std::uint32_t slot = 0;
    std::uint64_t version = 0;
  };

  FreeBlockIndex();
  FreeBlockIndex(FreeBlockIndex&&) noexcept = default;
  FreeBlockIndex& operator=(FreeBlockIndex&&) noexcept = default;

  // The (size, address) key must not be present.
  void Insert(const Entry& entry);
  // The entry must be present with exactly this size and address.
  void Erase(Bytes size, Bytes address);
  // The entry `cursor` names, which must still be present.
  void Erase(const Cursor& cursor);

  bool empty() const { return count_ == 0; }
  std::size_t size() const { return count_; }
  const Entry& At(const Cursor& cursor) const { return cursor.entry; }
  // The first entry with size >= `size`: the best fit.
  std::optional<Cursor> LowerBound(Bytes size) const;
  std::optional<Cursor> Next(const Cursor& cursor) const;
  std::optional<Cursor> Prev(const Cursor& cursor) const;
  std::optional<Cursor> First() const;
  std::optional<Cursor> Last() const;
  // Every entry, in order.
  std::vector<Entry> Entries() const;

 private:
  static constexpr std::uint32_t kSubBits = 5;
  static constexpr std::uint32_t kBins = (1u << kSubBits) * (64 - kSubBits + 1);
  static constexpr std::uint32_t kWords = (kBins + 63) / 64;
  static constexpr std::uint32_t kChunkEntries = 32;
  // A chunk left with at most this many entries merges with a neighbour that has room.
  static constexpr std::uint32_t kMergeAtMost = kChunkEntries / 4;
  static constexpr std::uint32_t kNoGroup = ~std::uint32_t{0};
  // Bins with more heads than this are searched by bisection.
  static constexpr std::size_t kLinearHeads = 8;
  static constexpr std::uint32_t kAtHead = ~std::uint32_t{0};

  // The lowest address of one size, and the group of its other addresses (kNoGroup if none).
  struct Head {
    Bytes size = 0;
    Bytes address = 0;
    std::uint32_t block = 0;
    std::uint32_t group = kNoGroup;
  };
  // Addresses in descending order, with the blocks they name.
  struct Chunk {
    std::uint32_t count = 0;
    std::array<Bytes, kChunkEntries> addresses;
    std::array<std::uint32_t, kChunkEntries> blocks;
  };
  // A group's directory entry: a chunk and its lowest (last) address.
  struct Run {
    Bytes low = 0;
    std::uint32_t chunk = 0;
  };
  // The runs in descending address order: the lowest address is the last run's last entry.
  using Group = std::vector<Run>;

  static std::uint32_t BinOf(Bytes size);
  // The position of the first head with size >= `size` in the bin.
  std::uint32_t FindHead(std::uint32_t bin, Bytes size) const;
  // The first entry >= (size, address).
  std::optional<Cursor> LowerBound(Bytes size, Bytes address) const;
  // The first head of the first non-empty bin at or after `bin`.
  std::optional<Cursor> FirstHeadFrom(std::uint32_t bin) const;
  // The highest entry of the last non-empty bin before `bin`.
  std::optional<Cursor> LastBefore(std::uint32_t bin) const;
  // The entry after the last of the size at (bin, head): the next size's head.
  std::optional<Cursor> NextSize(std::uint32_t bin, std::uint32_t head) const;
  Cursor HeadCursor(std::uint32_t bin, std::uint32_t head) const;
  Cursor GroupCursor(std::uint32_t bin, std::uint32_t head, std::uint32_t run,
                     std::uint32_t slot) const;
  // The lowest / highest entry of the group of the head at (bin, head).
  Cursor LowestOfGroup(std::uint32_t bin, std::uint32_t head) const;
  Cursor HighestOfSize(std::uint32_t bin, std::uint32_t head) const;
  bool Current(const Cursor& cursor) const { return cursor.version == version_; }
  // The directory position of the first run whose low is < bound (runs.size() if none).
  static std::uint32_t FindRun(const Group& group, Bytes bound);
  // The slot of the first address < bound in a chunk (count if none).
  static std::uint32_t FindSlot(const Chunk& chunk, Bytes bound);
  const Chunk& ChunkOf(const Group& group, std::uint32_t run) const {
    return chunks_[group[run].chunk];
  }

  void EraseHead(std::uint32_t bin, std::uint32_t head);
  // The less common paths, kept out of line so the common ones stay small.
  [[gnu::noinline]] void InsertBeside(Head& head, const Entry& entry);
  [[gnu::noinline]] void EraseFromGroup(std::uint32_t bin, std::uint32_t head, Bytes address);
  [[gnu::noinline]] void PromoteLowestOfGroup(std::uint32_t bin, std::uint32_t head);
  std::uint32_t NewGroup();
  std::uint32_t NewChunk();
  void GroupInsert(std::uint32_t group, Bytes address, std::uint32_t block);
  // Erases an entry of the group of the head at (bin, head); an emptied group is released.
  void GroupErase(std::uint32_t bin, std::uint32_t head, std::uint32_t run, std::uint32_t slot);
  void SplitRun(Group& group, std::uint32_t run);
  // Appends the chunk of run `run + 1` to that of `run` and drops it from the directory.
  void MergeWithNext(Group& group, std::uint32_t run);

  std::vector<std::vector<Head>> bins_;
  std::array<std::uint64_t, kWords> non_empty_{};
  std::vector<Group> groups_;
  std::vector<std::uint32_t> spare_groups_;  // their directories keep their capacity
  std::vector<Chunk> chunks_;
  std::vector<std::uint32_t> spare_chunks_;
  std::size_t count_ = 0;
  std::uint64_t version_ = 0;  // changes with every insert and erase
};

}  // namespace bucketsim
