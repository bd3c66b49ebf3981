#include "engine/live_id_index.h"

#include <bit>

namespace bucketsim {

LiveIdIndex::LiveIdIndex()
    : entries_(kInitialCapacity),
      mask_(kInitialCapacity - 1),
      shift_(64 - (std::countr_zero(kInitialCapacity) - kGroupBits)) {}

void LiveIdIndex::Grow() {
  std::vector<Entry> old = std::move(entries_);
  entries_.assign(old.size() * 2, Entry{});
  mask_ = static_cast<std::uint32_t>(entries_.size() - 1);
  --shift_;
  for (const Entry& entry : old) {
    if (entry.slot_plus_one == 0) continue;
    const std::uint32_t home = Home(entry.id);
    entries_[Position(entry.id, home)] = {entry.id, entry.slot_plus_one, home};
  }
}

}  // namespace bucketsim
