#include "memory/free_block_index.h"

#include <algorithm>
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

// A training step caches thousands of blocks of one size: among them the lowest address is the
// best fit, whatever order they were freed in, and erasing any of them keeps that order.
TEST(FreeBlockIndex, ManyBlocksOfOneSizeAreTakenLowestAddressFirst) {
  constexpr int kBlocks = 5000;
  std::vector<Bytes> addresses;
  for (int i = 0; i < kBlocks; ++i) addresses.push_back(kMiB * (1 + static_cast<Bytes>(i)));
  std::mt19937_64 rng(3);
  std::shuffle(addresses.begin(), addresses.end(), rng);
  FreeBlockIndex index;
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    index.Insert({4 * kMiB, addresses[i], static_cast<std::uint32_t>(i)});
  }
  index.Insert({4 * kMiB - 512, 999 * kMiB * kMiB, 77777});  // smaller, at a high address
  EXPECT_EQ(index.size(), kBlocks + 1u);
  EXPECT_EQ(index.At(*index.LowerBound(4 * kMiB - 512)).block, 77777u);
  // Ties on size break by address: 1 MiB, 2 MiB, ... in turn, as each best fit is taken.
  for (Bytes expected = kMiB; expected <= 100 * kMiB; expected += kMiB) {
    auto best = index.LowerBound(4 * kMiB);
    ASSERT_TRUE(best.has_value());
    ASSERT_EQ(index.At(*best).address, expected);
    index.Erase(4 * kMiB, expected);
  }
  // Erasing from the middle leaves the neighbours linked in order.
  index.Erase(4 * kMiB, 200 * kMiB);
  auto at = index.LowerBound(4 * kMiB);
  for (Bytes expected = 101 * kMiB; expected < 200 * kMiB; expected += kMiB) at = index.Next(*at);
  EXPECT_EQ(index.At(*at).address, 201 * kMiB);
  EXPECT_EQ(index.At(*index.Prev(*at)).address, 199 * kMiB);
  EXPECT_EQ(index.size(), kBlocks + 1u - 101u);
}

// A cursor stays valid while other entries come and go, even in its own bin (the release of
// oversize blocks walks backwards while erasing what it walked past).
TEST(FreeBlockIndex, ACursorSurvivesTheErasureOfOtherEntries) {
  FreeBlockIndex index;
  for (Bytes i = 1; i <= 8; ++i)
    index.Insert({64 * kMiB, i * 64 * kMiB, static_cast<std::uint32_t>(i)});
  auto last = index.Last();
  ASSERT_TRUE(last.has_value());
  auto before = index.Prev(*last);
  index.Erase(64 * kMiB, 8 * 64 * kMiB);  // what `last` named
  index.Erase(64 * kMiB, 1 * 64 * kMiB);
  index.Insert({64 * kMiB, 9 * 64 * kMiB, 9});
  EXPECT_EQ(index.At(*before).block, 7u);
  EXPECT_EQ(index.At(*index.Next(*before)).block, 9u);
  EXPECT_EQ(index.At(*index.First()).block, 2u);
}

// The shape of a training step, against std::set: a few sizes with thousands of blocks each,
// taken and returned mostly at the lowest address (LIFO), sometimes at the highest (a new
// segment) or anywhere, so chunks fill, split, drain and merge. Every step checks the best fit
// of each size and the neighbours of a random entry; the whole order is compared now and then.
TEST(FreeBlockIndex, ThousandsOfBlocksOfFewSizesAgreeWithAnOrderedSet) {
  std::mt19937_64 rng(11);
  const std::vector<Bytes> sizes = {2 * kMiB, 20 * kMiB, 20 * kMiB + 512};
  FreeBlockIndex index;
  std::set<Key> reference;
  std::vector<Bytes> low(sizes.size()), high(sizes.size());  // per size: next new lowest/highest
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    low[s] = Bytes{1} << 40;
    high[s] = low[s] + 512;
  }
  auto size_keys = [&](Bytes size) {
    std::vector<Key> keys;
    for (auto it = reference.lower_bound({size, 0});
         it != reference.end() && std::get<0>(*it) == size; ++it) {
      keys.push_back(*it);
    }
    return keys;
  };
  for (int step = 0; step < 60000; ++step) {
    const std::size_t s = rng() % sizes.size();
    const Bytes size = sizes[s];
    const int op = static_cast<int>(rng() % 100);
    // The first half grows the index, the second half drains it.
    const bool grow = step < 30000 ? op < 60 : op < 40;
    if (grow) {
      Bytes address = 0;
      const int where = static_cast<int>(rng() % 10);
      if (where < 7) {
        address = low[s] -= 512 * (1 + rng() % 4);  // a new lowest
      } else if (where < 9) {
        address = high[s] += 512 * (1 + rng() % 4);  // a new highest
      } else {
        address = low[s] + 512 * (rng() % ((high[s] - low[s]) / 512));  // anywhere, if free
        if (reference.count({size, address}) != 0) continue;
      }
      index.Insert({size, address, static_cast<std::uint32_t>(step)});
      reference.insert({size, address});
    } else {
      const std::vector<Key> keys = size_keys(size);
      if (keys.empty()) continue;
      const int where = static_cast<int>(rng() % 10);
      const Key victim = where < 7   ? keys.front()
                         : where < 8 ? keys.back()
                                     : keys[rng() % keys.size()];
      if (where < 7) {
        auto best = index.LowerBound(size);  // taken as the model takes a best fit
        ASSERT_TRUE(best.has_value());
        ASSERT_EQ(KeyOf(index.At(*best)), victim) << step;
        index.Erase(*best);
      } else {
        index.Erase(std::get<0>(victim), std::get<1>(victim));
      }
      reference.erase(victim);
    }
    ASSERT_EQ(index.size(), reference.size()) << step;
    for (Bytes probe : {sizes[0], sizes[1], sizes[2], sizes[0] + 512, Bytes{1}}) {
      auto expected = reference.lower_bound({probe, 0});
      auto cursor = index.LowerBound(probe);
      ASSERT_EQ(cursor.has_value(), expected != reference.end()) << step;
      if (cursor) {
        ASSERT_EQ(KeyOf(index.At(*cursor)), *expected) << step;
      }
    }
    if (!reference.empty()) {
      // A random entry's neighbours, reached by stepping from the best fit of its size.
      const std::vector<Key> keys = size_keys(sizes[rng() % sizes.size()]);
      if (!keys.empty()) {
        const std::size_t k = rng() % std::min<std::size_t>(keys.size(), 80);
        auto cursor = index.LowerBound(std::get<0>(keys[0]));
        for (std::size_t i = 0; i < k; ++i) cursor = index.Next(*cursor);
        ASSERT_EQ(KeyOf(index.At(*cursor)), keys[k]) << step;
        auto expected = reference.find(keys[k]);
        auto next = index.Next(*cursor);
        ASSERT_EQ(next.has_value(), std::next(expected) != reference.end()) << step;
        if (next) {
          ASSERT_EQ(KeyOf(index.At(*next)), *std::next(expected)) << step;
        }
        auto prev = index.Prev(*cursor);
        ASSERT_EQ(prev.has_value(), expected != reference.begin()) << step;
        if (prev) {
          ASSERT_EQ(KeyOf(index.At(*prev)), *std::prev(expected)) << step;
        }
      }
      ASSERT_EQ(KeyOf(index.At(*index.Last())), *reference.rbegin()) << step;
      ASSERT_EQ(KeyOf(index.At(*index.First())), *reference.begin()) << step;
    }
    if (step % 1000 == 0) {
      std::vector<Key> all;
      for (const auto& entry : index.Entries()) all.push_back(KeyOf(entry));
      ASSERT_EQ(all, std::vector<Key>(reference.begin(), reference.end())) << step;
    }
  }
  EXPECT_TRUE(index.empty() || index.size() == reference.size());
}

// A cursor whose entry was erased still steps to the entries around that key, and erasing
// through a cursor taken before other changes erases its own entry.
TEST(FreeBlockIndex, AStaleCursorStepsFromItsKey) {
  FreeBlockIndex index;
  for (Bytes i = 1; i <= 100; ++i) index.Insert({kMiB, i * kMiB, static_cast<std::uint32_t>(i)});
  auto fifty = index.LowerBound(kMiB);
  for (int i = 1; i < 50; ++i) fifty = index.Next(*fifty);
  ASSERT_EQ(index.At(*fifty).block, 50u);
  auto sixty = fifty;
  for (int i = 0; i < 10; ++i) sixty = index.Next(*sixty);
  index.Erase(*fifty);
  index.Insert({kMiB, 1000 * kMiB, 1000});
  EXPECT_EQ(index.At(*index.Next(*fifty)).block, 51u);
  EXPECT_EQ(index.At(*index.Prev(*fifty)).block, 49u);
  index.Erase(*sixty);  // stale: found again by its key
  EXPECT_EQ(index.size(), 99u);
  auto at = index.LowerBound(kMiB);
  for (int i = 1; i < 58; ++i) at = index.Next(*at);
  EXPECT_EQ(index.At(*at).block, 59u);
  EXPECT_EQ(index.At(*index.Next(*at)).block, 61u);
}

}  // namespace
}  // namespace bucketsim
