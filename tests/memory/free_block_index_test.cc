#include "memory/free_block_index.h"

#include <random>
#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

using Key = std::tuple<Bytes, Bytes>;  // (size, address)

Key KeyOf(const FreeBlockIndex::Entry& entry) { return {entry.size, entry.address}; }

TEST(FreeBlockIndex, LowerBoundIsSmallestSizeThenLowestAddress) {
  FreeBlockIndex index;
  EXPECT_FALSE(index.LowerBound(1).has_value());
  index.Insert({3 * kMiB, 300, 1});
  index.Insert({2 * kMiB, 200, 2});
  index.Insert({2 * kMiB, 100, 3});
  index.Insert({512, 50, 4});
  EXPECT_EQ(index.At(*index.LowerBound(kMiB)).block, 3u);  // 2 MiB at the lower address
  EXPECT_EQ(index.At(*index.LowerBound(2 * kMiB + 1)).block, 1u);
  EXPECT_FALSE(index.LowerBound(3 * kMiB + 1).has_value());
  EXPECT_EQ(index.At(*index.Last()).block, 1u);
  index.Erase(2 * kMiB, 100);
  EXPECT_EQ(index.At(*index.LowerBound(600)).block, 2u);
}

// Against std::set on random operations: same order, same lower bounds, same neighbours.
TEST(FreeBlockIndex, AgreesWithAnOrderedSet) {
  std::mt19937_64 rng(7);
  FreeBlockIndex index;
  std::set<Key> reference;
  Bytes next_address = 0;
  for (int step = 0; step < 20000; ++step) {
    const Bytes size = (rng() % 3 == 0) ? (1 + rng() % 4) * kMiB : 512 * (1 + rng() % 100000);
    if (rng() % 2 == 0 || reference.empty()) {
      index.Insert({size, next_address, static_cast<std::uint32_t>(step)});
      reference.insert({size, next_address});
      next_address += 512;
    } else {
      auto victim = reference.lower_bound({size, 0});
      if (victim == reference.end()) victim = reference.begin();
      index.Erase(std::get<0>(*victim), std::get<1>(*victim));
      reference.erase(victim);
    }
    const Bytes probe = 512 * (1 + rng() % 200000);
    auto expected = reference.lower_bound({probe, 0});
    auto cursor = index.LowerBound(probe);
    ASSERT_EQ(cursor.has_value(), expected != reference.end()) << step;
    if (cursor) {
      ASSERT_EQ(KeyOf(index.At(*cursor)), *expected) << step;
      auto next = index.Next(*cursor);
      ASSERT_EQ(next.has_value(), std::next(expected) != reference.end());
      if (next) {
        ASSERT_EQ(KeyOf(index.At(*next)), *std::next(expected));
      }
      auto prev = index.Prev(*cursor);
      ASSERT_EQ(prev.has_value(), expected != reference.begin());
      if (prev) {
        ASSERT_EQ(KeyOf(index.At(*prev)), *std::prev(expected));
      }
    }
    ASSERT_EQ(index.empty(), reference.empty());
    if (!reference.empty()) {
      ASSERT_EQ(KeyOf(index.At(*index.Last())), *reference.rbegin());
    }
  }
  std::vector<Key> all;
  for (const auto& entry : index.Entries()) all.push_back(KeyOf(entry));
  EXPECT_EQ(all, std::vector<Key>(reference.begin(), reference.end()));
}

}  // namespace
}  // namespace bucketsim
