// The cached free blocks of one stream and pool, ordered by (size, address): the order in which
// PyTorch's caching allocator picks a best fit (smallest size >= request, then lowest address;
// BlockPool is a std::set ordered by BlockComparatorSize, reference/caching_allocator.md §2.2).
// The blocks are binned by size class (two-level segregated fit: a power of two split into 32
// sub-classes; classes are in size order) with a bitmap of non-empty bins, so a best-fit search
// finds the first candidate bin with one bit scan. Each bin is an ordered set, so inserting and
// erasing are O(log n) however many blocks of one size are cached (a training step caches
// thousands of same-size blocks: a sorted vector per bin spent most of a free in memmove). Set
// nodes are recycled, so a steady state allocates no memory. The index owns only the entries;
// the model owns the blocks they name.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <set>
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
  struct EntryLess {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.size != b.size ? a.size < b.size : a.address < b.address;
    }
  };
  using Bin = std::set<Entry, EntryLess>;
  // A position: a bin and an entry in it. Stays valid until that entry is erased.
  struct Cursor {
    std::uint32_t bin = 0;
    Bin::const_iterator at;
  };

  FreeBlockIndex();
  FreeBlockIndex(FreeBlockIndex&&) noexcept = default;
  FreeBlockIndex& operator=(FreeBlockIndex&&) noexcept = default;

  // Returns where the entry went: erasing it there needs no search.
  Cursor Insert(const Entry& entry);
  // The entry must be present with exactly this size and address.
  void Erase(Bytes size, Bytes address);
  // The entry at `cursor` (no search).
  void Erase(Cursor cursor);

  bool empty() const { return count_ == 0; }
  std::size_t size() const { return count_; }
  const Entry& At(Cursor cursor) const { return *cursor.at; }
  // The first entry with size >= `size`.
  std::optional<Cursor> LowerBound(Bytes size) const;
  std::optional<Cursor> Next(Cursor cursor) const;
  std::optional<Cursor> Prev(Cursor cursor) const;
  std::optional<Cursor> First() const { return NonEmptyFrom(0); }
  std::optional<Cursor> Last() const;
  // Every entry, in order.
  std::vector<Entry> Entries() const;

 private:
  static constexpr std::uint32_t kSubBits = 5;
  static constexpr std::uint32_t kBins = (1u << kSubBits) * (64 - kSubBits + 1);
  static constexpr std::uint32_t kWords = (kBins + 63) / 64;

  static std::uint32_t BinOf(Bytes size);
  // The first entry of the first non-empty bin at or after `bin`.
  std::optional<Cursor> NonEmptyFrom(std::uint32_t bin) const;
  // The last entry of the last non-empty bin before `bin`.
  std::optional<Cursor> NonEmptyBefore(std::uint32_t bin) const;
  void MarkBin(std::uint32_t bin);

  std::vector<Bin> bins_;
  std::array<std::uint64_t, kWords> non_empty_{};
  std::size_t count_ = 0;
  std::vector<Bin::node_type> spare_nodes_;  // nodes of erased entries, reused by Insert
};

}  // namespace bucketsim
