#include "policy/shard_size.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

// S = int((cap * 2^20 / element_size) // ws), reference/fsdp_semantics.md §1.2 table.
TEST(BucketShardSize, MatchesFairscaleTable) {
  EXPECT_EQ(BucketShardSize(25, 4, 2), 3'276'800u);  // 25 MiB / 4 B / 2
  EXPECT_EQ(BucketShardSize(25, 2, 2), 6'553'600u);  // 25 MiB / 2 B / 2
  EXPECT_EQ(BucketShardSize(25, 4, 8), 819'200u);    // 25 MiB / 4 B / 8
  EXPECT_EQ(BucketShardSize(0.25, 4, 2), 32'768u);   // 0.25 MiB = 65536 fp32, / 2
  EXPECT_EQ(BucketShardSize(0.25, 4, 4), 16'384u);
  EXPECT_EQ(BucketShardSize(0.25, 4, 8), 8'192u);
}

TEST(BucketShardSize, FloorsForGroupSizesThatDoNotDivide) {
  // §9: a 3-rank group at cap 0.25 in fp32: 65536 // 3 = 21845 (21845.33 floored).
  EXPECT_EQ(BucketShardSize(0.25, 4, 3), 21'845u);
}

TEST(BucketShardSize, NonPositiveCapDisablesBucketing) {
  EXPECT_EQ(BucketShardSize(0, 4, 8), 0u);
  EXPECT_EQ(BucketShardSize(-1, 2, 2), 0u);
}

TEST(PythonFloorDiv, FollowsCPythonNotNaiveFloor) {
  EXPECT_EQ(PythonFloorDiv(7.0, 2.0), 3.0);
  EXPECT_EQ(PythonFloorDiv(-7.0, 2.0), -4.0);
  // 1 // 0.1 is 9.0 in Python (0.1 is slightly above 1/10), while floor(1 / 0.1) is 10.
  EXPECT_EQ(PythonFloorDiv(1.0, 0.1), 9.0);
}

}  // namespace
}  // namespace bucketsim

namespace bucketsim {
namespace {

// chunk_and_pad: every rank's shard is ceil(numel / ws); the last rank's chunk is padded.
TEST(PaddedShardNumel, RoundsUpToEqualShards) {
  EXPECT_EQ(PaddedShardNumel(40, 2), 20u);
  EXPECT_EQ(PaddedShardNumel(41, 2), 21u);
  EXPECT_EQ(PaddedShardNumel(1, 8), 1u);
  EXPECT_EQ(PaddedShardNumel(12'596'224, 8), 1'574'528u);
  EXPECT_EQ(PaddedShardNumel(~Numel{0}, 2), Numel{1} << 63);  // no overflow at the top
}

}  // namespace
}  // namespace bucketsim
