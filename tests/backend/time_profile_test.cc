#include <gtest/gtest.h>

#include "backend/sim/time_profile.h"

namespace bucketsim {
namespace {

TimeProfile TwoSizes() {
  TimeProfile profile;
  profile.reduce_scatter = {{8, 40.0, 300.0}, {2, 10.0, 100.0}};
  profile.copy_GBps = 2.0;
  EXPECT_TRUE(profile.Validate().ok());
  return profile;
}

TEST(TimeProfile, ValidateSortsByGroupSize) {
  TimeProfile profile = TwoSizes();
  EXPECT_EQ(profile.reduce_scatter[0].group_size, 2);
  EXPECT_EQ(profile.reduce_scatter[1].group_size, 8);
}

TEST(TimeProfile, InterpolatesInLog2OfTheGroupSize) {
  // 4 is halfway between 2 and 8 in log2: alpha 25, busbw 200.
  AlphaBeta at4 = TwoSizes().ReduceScatterAt(4);
  EXPECT_DOUBLE_EQ(at4.alpha_us, 25.0);
  EXPECT_DOUBLE_EQ(at4.busbw_GBps, 200.0);
  EXPECT_EQ(at4.group_size, 4);
}

TEST(TimeProfile, ClampsOutsideTheListedSizes) {
  TimeProfile profile = TwoSizes();
  EXPECT_DOUBLE_EQ(profile.ReduceScatterAt(64).busbw_GBps, 300.0);
  EXPECT_EQ(profile.ReduceScatterAt(64).group_size, 64);  // for the (n-1)/n factor
  EXPECT_DOUBLE_EQ(profile.ReduceScatterAt(1).alpha_us, 10.0);
}

TEST(TimeProfile, TimeIsAlphaPlusBusBytesOverBandwidth) {
  // n = 8, S = 8 MB: 7/8 * 8e6 = 7e6 bus bytes at 300 GB/s (3e5 bytes/µs): 23.333 µs + 40.
  EXPECT_NEAR(TwoSizes().ReduceScatterTime(8'000'000, 8), 40.0 + 7e6 / 3e5, 1e-9);
  // A copy of 2e6 bytes at 2 GB/s: 1000 µs.
  EXPECT_DOUBLE_EQ(TwoSizes().CopyTime(2'000'000), 1000.0);
  // n = 64 takes n = 8's figures but its own factor: 63/64 * 8e6 bytes at 3e5 bytes/µs.
  EXPECT_NEAR(TwoSizes().ReduceScatterTime(8'000'000, 64), 40.0 + 63.0 / 64 * 8e6 / 3e5, 1e-9);
}

TEST(TimeProfile, ValidateRejectsBadFigures) {
  TimeProfile empty;
  empty.copy_GBps = 1;
  EXPECT_FALSE(empty.Validate().ok());
  TimeProfile twice = TwoSizes();
  twice.reduce_scatter.push_back({8, 1.0, 1.0});
  EXPECT_NE(twice.Validate().message().find("given twice"), std::string::npos);
  TimeProfile zero_bw = TwoSizes();
  zero_bw.reduce_scatter[0].busbw_GBps = 0;
  EXPECT_NE(zero_bw.Validate().message().find("busbw_GBps must be > 0"), std::string::npos);
  TimeProfile negative_alpha = TwoSizes();
  negative_alpha.reduce_scatter[1].alpha_us = -1;
  EXPECT_FALSE(negative_alpha.Validate().ok());
  TimeProfile no_copy = TwoSizes();
  no_copy.copy_GBps = 0;
  EXPECT_FALSE(no_copy.Validate().ok());
}

}  // namespace
}  // namespace bucketsim
