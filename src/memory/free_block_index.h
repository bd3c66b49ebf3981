// The cached free blocks of one stream and pool, ordered by (size, address): the order in which
// PyTorch's caching allocator picks a best fit (smallest size >= request, then lowest address).
// A std::set gives the same order but spends most of a malloc/free pair in tree rebalancing
// and cache misses, so the blocks are binned by size class instead (two-level segregated fit:
// a power of two split into 32 sub-classes; classes are in size order) with a bitmap of
// non-empty bins, and each bin is a short vector kept sorted. The index owns only the entries;
// the model owns the blocks they name.
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
  // A position: a bin and an offset in it. Inserting or erasing invalidates cursors at or after
  // the changed position in that bin only.
  struct Cursor {
    std::uint32_t bin = 0;
    std::uint32_t offset = 0;
  };

  FreeBlockIndex();

  void Insert(const Entry& entry);
  // The entry must be present with exactly this size and address.
  void Erase(Bytes size, Bytes address);

  bool empty() const { return count_ == 0; }
  const Entry& At(Cursor cursor) const { return bins_[cursor.bin][cursor.offset]; }
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
  std::optional<Cursor> NonEmptyFrom(std::uint32_t bin) const;
  std::optional<Cursor> NonEmptyBefore(std::uint32_t bin) const;
  void MarkBin(std::uint32_t bin);

  std::vector<std::vector<Entry>> bins_;
  std::array<std::uint64_t, kWords> non_empty_{};
  std::size_t count_ = 0;
};

}  // namespace bucketsim
