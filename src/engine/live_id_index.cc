#include "engine/live_id_index.h"

#include <bit>

namespace bucketsim {

LiveIdIndex::LiveIdIndex()
    : entries_(kInitialCapacity),
      mask_(kInitialCapacity - 1),
      shift_(64 - (std::countr_zero(kInitialCapacity) - kGroupBits)) {}

std::size_t LiveIdIndex::Home(std::uint64_t id) const {
  constexpr std::uint64_t kOffsetMask = (std::uint64_t{1} << kGroupBits) - 1;
  const auto group =
      static_cast<std::size_t>(((id >> kGroupBits) * 0x9E3779B97F4A7C15ull) >> shift_);
  return (group << kGroupBits) | static_cast<std::size_t>(id & kOffsetMask);
}

std::size_t LiveIdIndex::Position(std::uint64_t id) const {
  std::size_t at = Home(id);
  while (entries_[at].slot_plus_one != 0 && entries_[at].id != id) at = (at + 1) & mask_;
  return at;
}

std::optional<std::uint32_t> LiveIdIndex::Find(std::uint64_t id) const {
  const Entry& entry = entries_[Position(id)];
  if (entry.slot_plus_one == 0) return std::nullopt;
  return entry.slot_plus_one - 1;
}

bool LiveIdIndex::Insert(std::uint64_t id, std::uint32_t slot) {
  if (2 * (size_ + 1) > entries_.size()) Grow();
  Entry& entry = entries_[Position(id)];
  if (entry.slot_plus_one != 0) return false;
  entry = {id, slot + 1};
  ++size_;
  return true;
}

std::optional<std::uint32_t> LiveIdIndex::Erase(std::uint64_t id) {
  std::size_t hole = Position(id);
  if (entries_[hole].slot_plus_one == 0) return std::nullopt;
  const std::uint32_t slot = entries_[hole].slot_plus_one - 1;
  // The entries after the hole, up to the next empty one, were placed by probes that may have
  // passed over it: each whose probe started at or before the hole moves back into it, and its
  // old place becomes the hole. Every id stays reachable from its home without a gap.
  for (std::size_t next = (hole + 1) & mask_; entries_[next].slot_plus_one != 0;
       next = (next + 1) & mask_) {
    const std::size_t home = Home(entries_[next].id);
    if (((next - home) & mask_) >= ((next - hole) & mask_)) {
      entries_[hole] = entries_[next];
      hole = next;
    }
  }
  entries_[hole] = Entry{};
  --size_;
  return slot;
}

void LiveIdIndex::Grow() {
  std::vector<Entry> old = std::move(entries_);
  entries_.assign(old.size() * 2, Entry{});
  mask_ = entries_.size() - 1;
  --shift_;
  for (const Entry& entry : old) {
    if (entry.slot_plus_one != 0) entries_[Position(entry.id)] = entry;
  }
}

}  // namespace bucketsim
