// The dense slot of each live allocation id, for the trace checker: every alloc inserts an id,
// every free finds and erases one, so this lookup is paid on every allocation event of every
// trace. Ids are arbitrary 64-bit numbers (generated traces count up, imported ones are block
// addresses), so it is a hash table: open addressing with linear probing over a power-of-two
// array of (id, slot) pairs, kept at most half full, and erasure by moving the following
// entries of the probe run back (no tombstones, so a table that sees millions of allocations
// stays as short to probe as one that saw a few). Compared with std::unordered_map it allocates
// nothing per id and finds an id in one cache line most of the time. Memory is proportional to
// the most ids live at once.
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
  // `id` must not be in the index.
  void Insert(std::uint64_t id, std::uint32_t slot);
  // `id` must be in the index.
  void Erase(std::uint64_t id);

  std::size_t size() const { return size_; }

 private:
  struct Entry {
    std::uint64_t id = 0;
    std::uint32_t slot_plus_one = 0;  // 0: the entry is empty
  };
  static constexpr std::size_t kInitialCapacity = 1024;

  // Where the probe for `id` starts (Fibonacci hashing: the top bits of id times 2^64/phi, which
  // spreads ids that differ in any bit, consecutive ones included).
  std::size_t Home(std::uint64_t id) const;
  // Where `id` is, or the empty entry its probe run ends at.
  std::size_t Position(std::uint64_t id) const;
  void Grow();

  std::vector<Entry> entries_;
  std::size_t mask_ = 0;
  int shift_ = 0;  // 64 - log2(capacity)
  std::size_t size_ = 0;
};

}  // namespace bucketsim
