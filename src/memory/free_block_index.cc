#include "memory/free_block_index.h"

#include <algorithm>
#include <bit>

#include "core/status.h"

namespace bucketsim {
namespace {

bool Before(const FreeBlockIndex::Entry& a, Bytes size, Bytes address) {
  return a.size != size ? a.size < size : a.address < address;
}

}  // namespace

FreeBlockIndex::FreeBlockIndex() : bins_(kBins) {}

// Sizes below 16 get a bin each; above, the bin is the power of two and the next kSubBits bits.
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

void FreeBlockIndex::Insert(const Entry& entry) {
  const std::uint32_t bin = BinOf(entry.size);
  std::vector<Entry>& entries = bins_[bin];
  auto at =
      std::lower_bound(entries.begin(), entries.end(), entry,
                       [](const Entry& a, const Entry& b) { return Before(a, b.size, b.address); });
  entries.insert(at, entry);
  MarkBin(bin);
  ++count_;
}

void FreeBlockIndex::Erase(Bytes size, Bytes address) {
  const std::uint32_t bin = BinOf(size);
  std::vector<Entry>& entries = bins_[bin];
  auto at =
      std::lower_bound(entries.begin(), entries.end(), Entry{size, address, 0},
                       [](const Entry& a, const Entry& b) { return Before(a, b.size, b.address); });
  BUCKETSIM_CHECK(at != entries.end() && at->size == size && at->address == address);
  entries.erase(at);
  MarkBin(bin);
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
  return Cursor{word * 64 + static_cast<std::uint32_t>(std::countr_zero(bits)), 0};
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
  return Cursor{found, static_cast<std::uint32_t>(bins_[found].size() - 1)};
}

std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::LowerBound(Bytes size) const {
  const std::uint32_t bin = BinOf(size);
  const std::vector<Entry>& entries = bins_[bin];
  auto at = std::lower_bound(entries.begin(), entries.end(), size,
                             [](const Entry& a, Bytes s) { return a.size < s; });
  if (at != entries.end()) return Cursor{bin, static_cast<std::uint32_t>(at - entries.begin())};
  return NonEmptyFrom(bin + 1);
}

std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::Next(Cursor cursor) const {
  if (cursor.offset + 1 < bins_[cursor.bin].size()) return Cursor{cursor.bin, cursor.offset + 1};
  return NonEmptyFrom(cursor.bin + 1);
}

std::optional<FreeBlockIndex::Cursor> FreeBlockIndex::Prev(Cursor cursor) const {
  if (cursor.offset > 0) return Cursor{cursor.bin, cursor.offset - 1};
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
