#include "memory/alloc_conf.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(ParseAllocConf, EmptyGivesPyTorchDefaults) {
  auto conf = ParseAllocConf("");
  ASSERT_TRUE(conf.ok());
  EXPECT_EQ(conf->max_split_size, AllocConf::kUnlimited);
  EXPECT_EQ(conf->max_non_split_rounding, 20 * kMiB);
  for (auto d : conf->roundup_power2_divisions) EXPECT_EQ(d, 0u);
  EXPECT_EQ(conf->garbage_collection_threshold, 0.0);
  EXPECT_FALSE(conf->expandable_segments);
}

TEST(ParseAllocConf, ReadsEveryModelledKey) {
  auto conf = ParseAllocConf(
      "expandable_segments:True, max_split_size_mb:128,max_non_split_rounding_mb:40,"
      "garbage_collection_threshold:0.6,roundup_power2_divisions:4,backend:native,"
      "release_lock_on_cudamalloc:True,pinned_use_background_threads:True");
  ASSERT_TRUE(conf.ok()) << conf.status().ToString();
  EXPECT_TRUE(conf->expandable_segments);
  EXPECT_EQ(conf->max_split_size, 128 * kMiB);
  EXPECT_EQ(conf->max_non_split_rounding, 40 * kMiB);
  EXPECT_DOUBLE_EQ(conf->garbage_collection_threshold, 0.6);
  for (auto d : conf->roundup_power2_divisions) EXPECT_EQ(d, 4u);
}

TEST(ParseAllocConf, RoundupListFillsBelowFirstAndAfterLastNamed) {
  // 256 MB is interval log2(256) = 8, 512 -> 9, 1024 -> 10. The first pair also fills 0..7;
  // ">" fills from last+1 = 11 to 15, so 1024 MB keeps its own 4 (the docs' reading).
  auto conf = ParseAllocConf("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
  ASSERT_TRUE(conf.ok()) << conf.status().ToString();
  const auto& table = conf->roundup_power2_divisions;
  for (std::size_t i = 0; i <= 8; ++i) EXPECT_EQ(table[i], 1u) << i;
  EXPECT_EQ(table[9], 2u);
  EXPECT_EQ(table[10], 4u);
  for (std::size_t i = 11; i < 16; ++i) EXPECT_EQ(table[i], 8u) << i;
  // Lookup: 300 MiB has log2 = 28, interval 8; 1.5 GiB -> log2 30, interval 10; 1 KiB -> 0.
  EXPECT_EQ(conf->RoundupDivisions(300 * kMiB), 1u);
  EXPECT_EQ(conf->RoundupDivisions(1536 * kMiB), 4u);
  EXPECT_EQ(conf->RoundupDivisions(1024), 1u);
  EXPECT_EQ(conf->RoundupDivisions(64 * kGiB), 8u);
}

TEST(ParseAllocConf, RoundupListWithoutGreaterLeavesUpperIntervalsOff) {
  // [256:1,512:2]: intervals 0..8 = 1, 9 = 2, 10..15 stay 0; a zero value disables one.
  auto conf = ParseAllocConf("roundup_power2_divisions:[256:1,512:2,2048:0]");
  ASSERT_TRUE(conf.ok()) << conf.status().ToString();
  EXPECT_EQ(conf->roundup_power2_divisions[9], 2u);
  EXPECT_EQ(conf->roundup_power2_divisions[10], 0u);
  EXPECT_EQ(conf->roundup_power2_divisions[11], 0u);
  EXPECT_EQ(conf->roundup_power2_divisions[15], 0u);
}

TEST(ParseAllocConf, RoundupListCombinesWithOtherKeys) {
  auto conf = ParseAllocConf("roundup_power2_divisions:[1:2,>:4],expandable_segments:False");
  ASSERT_TRUE(conf.ok()) << conf.status().ToString();
  EXPECT_EQ(conf->roundup_power2_divisions[0], 2u);
  EXPECT_EQ(conf->roundup_power2_divisions[1], 4u);
  EXPECT_EQ(conf->roundup_power2_divisions[15], 4u);
  EXPECT_FALSE(conf->expandable_segments);
}

void ExpectInvalid(std::string_view text, std::string_view mentions) {
  auto conf = ParseAllocConf(text);
  ASSERT_FALSE(conf.ok()) << text;
  EXPECT_EQ(conf.status().code(), StatusCode::kInvalidArgument) << text;
  EXPECT_NE(conf.status().message().find(mentions), std::string::npos)
      << text << " -> " << conf.status().message();
}

TEST(ParseAllocConf, RejectsBadValuesNamingTheKey) {
  ExpectInvalid("max_split_size_mb:19", "max_split_size_mb");
  ExpectInvalid("max_split_size_mb:abc", "max_split_size_mb");
  ExpectInvalid("max_non_split_rounding_mb:10", "max_non_split_rounding_mb");
  ExpectInvalid("roundup_power2_divisions:3", "roundup_power2_divisions");
  ExpectInvalid("roundup_power2_divisions:0", "roundup_power2_divisions");
  ExpectInvalid("roundup_power2_divisions:[256:3]", "roundup_power2_divisions");
  ExpectInvalid("roundup_power2_divisions:[300:4]", "roundup_power2_divisions");
  ExpectInvalid("roundup_power2_divisions:[256:4", "roundup_power2_divisions");
  ExpectInvalid("garbage_collection_threshold:0", "garbage_collection_threshold");
  ExpectInvalid("garbage_collection_threshold:1", "garbage_collection_threshold");
  ExpectInvalid("garbage_collection_threshold:1.5", "garbage_collection_threshold");
  ExpectInvalid("expandable_segments:true", "expandable_segments");
  ExpectInvalid("expandable_segments", "expandable_segments");
}

TEST(ParseAllocConf, RejectsUnknownKeys) { ExpectInvalid("max_split_mb:128", "unknown key"); }

TEST(ParseAllocConf, RealButUnmodelledKeysSayNotModelled) {
  ExpectInvalid("backend:cudaMallocAsync", "not modelled");
  ExpectInvalid("large_segment_size_mb:40", "not modelled");
  ExpectInvalid("per_process_memory_fraction:0.5", "not modelled");
  ExpectInvalid("graph_capture_record_stream_reuse:True", "not modelled");
}

}  // namespace
}  // namespace bucketsim
