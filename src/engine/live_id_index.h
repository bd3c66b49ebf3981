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
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace bucketsim {

class LiveIdIndex {
 public:
  LiveIdIndex();

  // The slot of `id`, if it is in the index.
  std::optional<std::uint32_t> Find(std::uint64_t id) const;
  // Adds `id` with `slot`; false (and nothing changes) when `id` is already in the index.
  bool Insert(std::uint64_t id, std::uint32_t slot);
  // Removes `id`; its slot, or nothing when it is not in the index.
  std::optional<std::uint32_t> Erase(std::uint64_t id);

  std::size_t size() const { return size_; }

 private:
  struct Entry {
    std::uint64_t id = 0;
    std::uint32_t slot_plus_one = 0;  // 0: the entry is empty
  };
  static constexpr std::size_t kInitialCapacity = 1024;

  static constexpr int kGroupBits = 4;  // 16 consecutive ids share a group of entries

  // Where the probe for `id` starts: its group, by Fibonacci hashing (the top bits of the group
  // number times 2^64/phi, which spreads groups that differ in any bit), then its offset in it.
  std::size_t Home(std::uint64_t id) const;
  // Where `id` is, or the empty entry its probe run ends at.
  std::size_t Position(std::uint64_t id) const;
  void Grow();

  std::vector<Entry> entries_;
  std::size_t mask_ = 0;
  int shift_ = 0;  // 64 - log2(capacity / group size)
  std::size_t size_ = 0;
};

}  // namespace bucketsim
