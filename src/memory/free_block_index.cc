#include "memory/free_block_index.h"

#include <bit>

#include "core/status.h"

namespace bucketsim {

FreeBlockIndex::FreeBlockIndex() : bins_(kBins) {}

// Sizes below 32 get a bin each; above, the bin is the power of two and the next kSubBits bits.
// Bins are monotonic in size, so scanning bins upward visits sizes in order.
std::uint32_t FreeBlockIndex::BinOf(Bytes size) {
  constexpr Bytes kLinear = Bytes{1} << kSubBits;
  if (size < kLinear) return static_cast<std::uint32_t>(size);
  const auto log2 = static_cast<std::uint32_t>(std::bit_width(size) - 1);
  const auto sub = static_cast<std::uint32_t>((size >> (log2 - kSubBits)) - kLinear);
  return static_cast<std::uint32_t>(kLinear) + (log2 - kSubBits) * (1u << kSubBits) + sub;
}

void FreeBlockIndex::MarkBin(std::uint32_t bin) {
  const std::uint64_t bit = std::uint64_t{1} << (bin % 64);
  if (bins_[bin].empty()) {
    non_empty_[bin / 64] &= ~bit;
  } else {
    non_empty_[bin / 64] |= bit;
  }
}

FreeBlockIndex::Cursor FreeBlockIndex::Insert(const Entry& entry) {
  const std::uint32_t bin = BinOf(entry.size);
  Bin::iterator at;
  if (spare_nodes_.empty()) {
    at = bins_[bin].insert(entry).first;
  } else {
    Bin::node_type node = std::move(spare_nodes_.back());
    spare_nodes_.pop_back();
    node.value() = entry;
    at = bins_[bin].insert(std::move(node)).position;
  }
  MarkBin(bin);
  ++count_;
  return Cursor{bin, at};
}

void FreeBlockIndex::Erase(Bytes size, Bytes address) {
  const std::uint32_t bin = BinOf(size);
  Bin& entries = bins_[bin];
  auto at = entries.find(Entry{size, address, 0});
  BUCKETSIM_CHECK(at != entries.end());
  Erase(Cursor{bin, at});
}

void FreeBlockIndex::Erase(Cursor cursor) {
  spare_nodes_.push_back(bins_[cursor.bin].extract(cursor.at));
  MarkBin(cursor.bin);
  --count_;
}

std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::NonEmptyFrom(std::uint32_t bin) const {
  if (bin >= kBins) return std::nullopt;
  std::uint32_t word = bin / 64;
  std::uint64_t bits = non_empty_[word] & (~std::uint64_t{0} << (bin % 64));
  while (bits == 0) {
    if (++word == kWords) return std::nullopt;
    bits = non_empty_[word];
  }
  const auto found = word * 64 + static_cast<std::uint32_t>(std::countr_zero(bits));
  return Cursor{found, bins_[found].begin()};
}

std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::NonEmptyBefore(std::uint32_t bin) const {
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
  return Cursor{found, std::prev(bins_[found].end())};
}

std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::LowerBound(Bytes size) const {
  const std::uint32_t bin = BinOf(size);
  const Bin& entries = bins_[bin];
  if (!entries.empty() && std::prev(entries.end())->size >= size) {
    return Cursor{bin, entries.lower_bound(Entry{size, 0, 0})};
  }
  return NonEmptyFrom(bin + 1);
}

std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::Next(Cursor cursor) const {
  if (auto next = std::next(cursor.at); next != bins_[cursor.bin].end()) {
    return Cursor{cursor.bin, next};
  }
  return NonEmptyFrom(cursor.bin + 1);
}

std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::Prev(Cursor cursor) const {
  if (cursor.at != bins_[cursor.bin].begin()) return Cursor{cursor.bin, std::prev(cursor.at)};
  return NonEmptyBefore(cursor.bin);
}

std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::Last() const { return NonEmptyBefore(kBins); }

std::vector<FreeBlockIndex::Entry> FreeBlockIndex::Entries() const {
  std::vector<Entry> entries;
  entries.reserve(count_);
  for (auto cursor = First(); cursor; cursor = Next(*cursor)) entries.push_back(At(*cursor));
  return entries;
}

}  // namespace bucketsim
