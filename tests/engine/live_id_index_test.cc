// The checker's id -> slot table: what was inserted is found until it is erased, whatever the
// ids and however the probe runs wrap and grow.
#include "engine/live_id_index.h"

#include <cstdint>
#include <random>
#include <unordered_map>

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(LiveIdIndex, FindsWhatWasInsertedUntilItIsErased) {
  LiveIdIndex index;
  EXPECT_TRUE(index.Insert(7, 0));
  EXPECT_TRUE(index.Insert(~std::uint64_t{0}, 1));  // any 64-bit id, the largest included
  EXPECT_TRUE(index.Insert(0, 2));
  EXPECT_FALSE(index.Insert(7, 5));  // already there: unchanged
  EXPECT_EQ(index.Find(7), 0u);
  EXPECT_EQ(index.Find(7), 0u);
  EXPECT_EQ(index.Find(~std::uint64_t{0}), 1u);
  EXPECT_EQ(index.Find(0), 2u);
  EXPECT_EQ(index.Find(8), std::nullopt);
  EXPECT_EQ(index.Erase(7), 0u);
  EXPECT_EQ(index.Find(7), std::nullopt);
  EXPECT_EQ(index.Erase(7), std::nullopt);
  EXPECT_EQ(index.Find(0), 2u);
  EXPECT_EQ(index.size(), 2u);
}

// Generated traces allocate consecutive ids and free them in any order; a table of 200,000 live
// ids grows past its first capacity many times.
TEST(LiveIdIndex, KeepsEveryConsecutiveIdThroughGrowth) {
  LiveIdIndex index;
  for (std::uint32_t id = 0; id < 200'000; ++id) ASSERT_TRUE(index.Insert(1'000'000 + id, id));
  for (std::uint32_t id = 0; id < 200'000; id += 2) ASSERT_EQ(index.Erase(1'000'000 + id), id);
  EXPECT_EQ(index.size(), 100'000u);
  for (std::uint32_t id = 0; id < 200'000; ++id) {
    if (id % 2 == 0) {
      EXPECT_EQ(index.Find(1'000'000 + id), std::nullopt) << id;
    } else {
      EXPECT_EQ(index.Find(1'000'000 + id), id) << id;
    }
  }
}

// Random inserts and erases of ids from a small range (so ids come back, as block addresses do
// in imported traces), checked against std::unordered_map after every operation on the id
// touched and, every so often, on every id of the range: erasing from the middle of a probe run
// that wraps around the end of the table must leave the rest of the run reachable. Id k is
// k * `stride`.
void ExpectAgreesWithAnUnorderedMap(std::uint64_t stride) {
  std::mt19937_64 random(14);
  constexpr std::uint64_t kIds = 3000;  // up to 3000 live: the table grows to 8192 entries
  LiveIdIndex index;
  std::unordered_map<std::uint64_t, std::uint32_t> expected;
  auto expect_same = [&](std::uint64_t id) {
    auto it = expected.find(id);
    ASSERT_EQ(index.Find(id),
              it == expected.end() ? std::nullopt : std::optional<std::uint32_t>(it->second));
  };
  for (std::uint32_t step = 0; step < 400'000; ++step) {
    const std::uint64_t id = (random() % kIds) * stride;
    if (auto it = expected.find(id); it != expected.end()) {
      ASSERT_EQ(index.Erase(id), it->second);
      expected.erase(it);
    } else if (random() % 4 != 0) {
      ASSERT_TRUE(index.Insert(id, step));
      expected.emplace(id, step);
    }
    expect_same(id);
    ASSERT_EQ(index.size(), expected.size());
    if (step % 50'000 == 0) {
      for (std::uint64_t k = 0; k < kIds; ++k) expect_same(k * stride);
    }
  }
}

// Ids spread over 64 bits (an odd multiplier keeps them distinct).
TEST(LiveIdIndex, AgreesWithAnUnorderedMapOnScatteredIds) {
  ExpectAgreesWithAnUnorderedMap(0x100000001B3ull);
}

// Consecutive ids: whole groups of 16 fill up and spill into the next.
TEST(LiveIdIndex, AgreesWithAnUnorderedMapOnConsecutiveIds) { ExpectAgreesWithAnUnorderedMap(1); }

// Block addresses are multiples of 512: every id starts its probe at the first entry of its
// group, so probe runs are long and cross groups.
TEST(LiveIdIndex, AgreesWithAnUnorderedMapOnAddressLikeIds) { ExpectAgreesWithAnUnorderedMap(512); }

}  // namespace
}  // namespace bucketsim
