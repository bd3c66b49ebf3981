#include <gtest/gtest.h>

#include "backend/sim/time_profile.h"

namespace bucketsim {
namespace {

TimeProfile TwoSizes() {
  TimeProfile profile;
  profile.reduce_scatter = {{8, 40.0, 300.0, {}}, {2, 10.0, 100.0, {}}};
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

// A group size with measurements: 1 KiB in 5 µs, 1 MiB in 400 µs, 4 MiB in 3000 µs (a
// bandwidth cliff no straight line follows); alpha 5, busbw 2 GB/s summarise it.
TimeProfile Measured() {
  TimeProfile profile;
  profile.reduce_scatter = {{2, 5.0, 2.0, {{4 * kMiB, 3000.0}, {kKiB, 5.0}, {kMiB, 400.0}}},
                            {8, 40.0, 300.0, {}}};
  profile.copy_GBps = 2.0;
  EXPECT_TRUE(profile.Validate().ok());
  return profile;
}

TEST(TimeProfile, MeasuredPointsAreInterpolatedInBytes) {
  TimeProfile profile = Measured();
  EXPECT_EQ(profile.reduce_scatter[0].measured.front().bytes, kKiB);  // sorted
  EXPECT_DOUBLE_EQ(profile.ReduceScatterTime(kMiB, 2), 400.0);
  // Halfway from 1 MiB to 4 MiB: 1700 µs, where the line alpha + S/2 / 2e3 says 1315.
  EXPECT_DOUBLE_EQ(profile.ReduceScatterTime(kMiB * 5 / 2, 2), 1700.0);
  // Below the smallest: its time (latency bound).
  EXPECT_DOUBLE_EQ(profile.ReduceScatterTime(16, 2), 5.0);
  // Beyond the largest: the last segment's slope, 2600 µs per 3 MiB.
  EXPECT_DOUBLE_EQ(profile.ReduceScatterTime(7 * kMiB, 2), 3000.0 + 2600.0);
  // Other group sizes keep the alpha-beta model (the measurements are of n = 2 only).
  EXPECT_NEAR(profile.ReduceScatterTime(8'000'000, 8), 40.0 + 7e6 / 3e5, 1e-9);
  EXPECT_DOUBLE_EQ(profile.ReduceScatterTime(kMiB, 4),
                   AlphaBetaTime(profile.ReduceScatterAt(4), kMiB));
}

TEST(TimeProfile, OneMeasuredPointExtrapolatesAtBusbw) {
  TimeProfile profile;
  profile.reduce_scatter = {{2, 5.0, 2.0, {{kMiB, 400.0}}}};
  profile.copy_GBps = 1;
  ASSERT_TRUE(profile.Validate().ok());
  // 1 MiB more at n = 2: half of it crosses the link at 2e3 bytes/µs.
  EXPECT_DOUBLE_EQ(profile.ReduceScatterTime(2 * kMiB, 2), 400.0 + kMiB / 2 / 2e3);
}

TEST(TimeProfile, ValidateRejectsBadMeasurements) {
  TimeProfile twice = Measured();
  twice.reduce_scatter[0].measured.push_back({kMiB, 1.0});
  EXPECT_NE(twice.Validate().message().find("measured send_bytes 1048576 must be > 0 and distinct"),
            std::string::npos)
      << twice.Validate().message();
  TimeProfile negative = Measured();
  negative.reduce_scatter[0].measured[1].time_us = -1;
  EXPECT_NE(negative.Validate().message().find("measured time_us at"), std::string::npos);
}

TEST(TimeProfile, ValidateRejectsBadFigures) {
  TimeProfile empty;
  empty.copy_GBps = 1;
  EXPECT_FALSE(empty.Validate().ok());
  TimeProfile twice = TwoSizes();
  twice.reduce_scatter.push_back({8, 1.0, 1.0, {}});
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
