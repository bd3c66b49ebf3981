// The dense slot of each live allocation id, for the trace checker: every alloc inserts an id,
// every free takes one out, so this lookup is paid on every allocation event of every trace.
// Ids are arbitrary 64-bit numbers (generated traces count up, imported ones are block
// addresses), so it is a hash table: open addressing with linear probing over a power-of-two
// array of (id, slot) pairs, kept at most half full, and erasure by moving the following
// entries of the probe run back (no tombstones, so a table that saw millions of allocations
// probes as short as one that saw a few). It allocates nothing per id.
//
// Where an id's probe starts keeps runs of consecutive ids together: ids that differ only in
// their last four bits start in the same group of 16 entries (four cache lines), at their
// offset in it, and the groups are spread over the table by Fibonacci hashing of the rest of
// the id. A deep model keeps tens of thousands of allocations live, a table larger than the
// core's cache; allocations are made and freed in runs of consecutive ids (a layer's forward,
// its backward in reverse), so most lookups land on a cache line a neighbouring id just used,
// where hashing every id to its own random place missed the cache on nearly every one.
//
// Each entry keeps its home beside the id (in what would be padding), so that an erasure, which
// walks the rest of the probe run (often a whole group of 16), compares positions without
// hashing every id it passes. The lookups are in this header: the trace checker makes one per
// alloc and per free, and a call into another translation unit for each was a tenth of its cost.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace bucketsim {

class LiveIdIndex {
 public:
  LiveIdIndex();

  // The slot of `id`, if it is in the index.
  std::optional<std::uint32_t> Find(std::uint64_t id) const {
    const Entry& entry = entries_[Position(id, Home(id))];
    if (entry.slot_plus_one == 0) return std::nullopt;
    return entry.slot_plus_one - 1;
  }
  // Adds `id` with `slot`; false (and nothing changes) when `id` is already in the index.
  bool Insert(std::uint64_t id, std::uint32_t slot) {
    if (2 * (size_ + 1) > entries_.size()) Grow();
    const std::uint32_t home = Home(id);
    Entry& entry = entries_[Position(id, home)];
    if (entry.slot_plus_one != 0) return false;
    entry = {id, slot + 1, home};
    ++size_;
    return true;
  }
  // Removes `id`; its slot, or nothing when it is not in the index.
  std::optional<std::uint32_t> Erase(std::uint64_t id) {
    std::uint32_t hole = Position(id, Home(id));
    if (entries_[hole].slot_plus_one == 0) return std::nullopt;
    const std::uint32_t slot = entries_[hole].slot_plus_one - 1;
    // The entries after the hole, up to the next empty one, were placed by probes that may have
    // passed over it: each whose probe started at or before the hole moves back into it, and its
    // old place becomes the hole. Every id stays reachable from its home without a gap.
    for (std::uint32_t next = (hole + 1) & mask_; entries_[next].slot_plus_one != 0;
         next = (next + 1) & mask_) {
      const Entry& moving = entries_[next];
      if (((next - moving.home) & mask_) >= ((next - hole) & mask_)) {
        entries_[hole] = moving;
        hole = next;
      }
    }
    entries_[hole] = Entry{};
    --size_;
    return slot;
  }

  std::size_t size() const { return size_; }

 private:
  struct Entry {
    std::uint64_t id = 0;
    std::uint32_t slot_plus_one = 0;  // 0: the entry is empty
    std::uint32_t home = 0;           // Home(id), kept for Erase
  };
  static constexpr std::uint32_t kInitialCapacity = 1024;

  static constexpr int kGroupBits = 4;  // 16 consecutive ids share a group of entries

  // Where the probe for `id` starts: its group, by Fibonacci hashing (the top bits of the group
  // number times 2^64/phi, which spreads groups that differ in any bit), then its offset in it.
  std::uint32_t Home(std::uint64_t id) const {
    constexpr std::uint64_t kOffsetMask = (std::uint64_t{1} << kGroupBits) - 1;
    const auto group =
        static_cast<std::uint32_t>(((id >> kGroupBits) * 0x9E3779B97F4A7C15ull) >> shift_);
    return (group << kGroupBits) | static_cast<std::uint32_t>(id & kOffsetMask);
  }
  // Where `id` (whose probe starts at `home`) is, or the empty entry its probe run ends at.
  std::uint32_t Position(std::uint64_t id, std::uint32_t home) const {
    std::uint32_t at = home;
    while (entries_[at].slot_plus_one != 0 && entries_[at].id != id) at = (at + 1) & mask_;
    return at;
  }
  void Grow();

  std::vector<Entry> entries_;
  std::uint32_t mask_ = 0;  // capacity - 1; the capacity stays below 2^32 (half full at most)
  int shift_ = 0;           // 64 - log2(capacity / group size)
  std::size_t size_ = 0;
};

}  // namespace bucketsim
