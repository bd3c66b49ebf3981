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
  index.Insert(7, 0);
  index.Insert(~std::uint64_t{0}, 1);  // any 64-bit id, the largest included
  index.Insert(0, 2);
  EXPECT_EQ(index.Find(7), 0u);
  EXPECT_EQ(index.Find(~std::uint64_t{0}), 1u);
  EXPECT_EQ(index.Find(0), 2u);
  EXPECT_EQ(index.Find(8), std::nullopt);
  index.Erase(7);
  EXPECT_EQ(index.Find(7), std::nullopt);
  EXPECT_EQ(index.Find(0), 2u);
  EXPECT_EQ(index.size(), 2u);
}

// Generated traces allocate consecutive ids and free them in any order; a table of 200,000 live
// ids grows past its first capacity many times.
TEST(LiveIdIndex, KeepsEveryConsecutiveIdThroughGrowth) {
  LiveIdIndex index;
  for (std::uint32_t id = 0; id < 200'000; ++id) index.Insert(1'000'000 + id, id);
  for (std::uint32_t id = 0; id < 200'000; id += 2) index.Erase(1'000'000 + id);
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
// that wraps around the end of the table must leave the rest of the run reachable.
TEST(LiveIdIndex, AgreesWithAnUnorderedMapThroughRandomInsertsAndErases) {
  std::mt19937_64 random(14);
  constexpr std::uint64_t kIds = 3000;  // up to 3000 live: the table grows to 8192 entries
  LiveIdIndex index;
  std::unordered_map<std::uint64_t, std::uint32_t> expected;
  for (std::uint32_t step = 0; step < 400'000; ++step) {
    // Ids spread over 64 bits, as addresses are: a fixed odd multiple keeps them distinct.
    const std::uint64_t id = (random() % kIds) * 0x100000001B3ull;
    if (expected.count(id) != 0) {
      index.Erase(id);
      expected.erase(id);
    } else if (random() % 4 != 0) {
      index.Insert(id, step);
      expected.emplace(id, step);
    }
    auto want = expected.find(id);
    ASSERT_EQ(index.Find(id),
              want == expected.end() ? std::nullopt : std::optional<std::uint32_t>(want->second));
    ASSERT_EQ(index.size(), expected.size());
    if (step % 50'000 == 0) {
      for (std::uint64_t k = 0; k < kIds; ++k) {
        const std::uint64_t other = k * 0x100000001B3ull;
        auto it = expected.find(other);
        ASSERT_EQ(index.Find(other),
                  it == expected.end() ? std::nullopt : std::optional<std::uint32_t>(it->second));
      }
    }
  }
}

}  // namespace
}  // namespace bucketsim
