#include "backend/cuda/spin_calibration.h"

#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(SpinCalibration, SlopeBetweenSamplesCancelsLaunchCost) {
  // 1.98 GHz (an H200's boost clock) and 7 µs of launch cost on both samples.
  SpinSample short_sample{1'980'000, (1000.0 + 7.0) / 1000.0};
  SpinSample long_sample{19'800'000, (10000.0 + 7.0) / 1000.0};
  Result<double> rate = CyclesPerMicro(short_sample, long_sample);
  ASSERT_TRUE(rate.ok()) << rate.status().ToString();
  EXPECT_NEAR(*rate, 1980.0, 1e-6);
}

TEST(SpinCalibration, RefusesSamplesThatGiveNoRate) {
  EXPECT_EQ(CyclesPerMicro({1000, 1.0}, {1000, 2.0}).status().code(), StatusCode::kDeviceError);
  EXPECT_EQ(CyclesPerMicro({2000, 1.0}, {1000, 2.0}).status().code(), StatusCode::kDeviceError);
  Result<double> not_longer = CyclesPerMicro({1000, 2.0}, {2000, 2.0});
  EXPECT_EQ(not_longer.status().code(), StatusCode::kDeviceError);
  EXPECT_NE(not_longer.status().message().find("must take longer"), std::string::npos);
  EXPECT_FALSE(CyclesPerMicro({1000, 2.0}, {2000, 1.5}).ok());
}

TEST(SpinCalibration, CyclesScaleWithDurationAndComputeScale) {
  EXPECT_EQ(SpinCyclesFor(100.0, 1.0, 1980.0), 198'000u);
  EXPECT_EQ(SpinCyclesFor(100.0, 0.5, 1980.0), 99'000u);
  EXPECT_EQ(SpinCyclesFor(0.25, 1.0, 1980.0), 495u);
  EXPECT_EQ(SpinCyclesFor(0.0001, 1.0, 1980.0), 0u);  // 0.198 cycles rounds to none
  EXPECT_EQ(SpinCyclesFor(100.0, 0.0, 1980.0), 0u);
  EXPECT_EQ(SpinCyclesFor(-5.0, 1.0, 1980.0), 0u);
  EXPECT_EQ(SpinCyclesFor(std::numeric_limits<double>::quiet_NaN(), 1.0, 1980.0), 0u);
  EXPECT_EQ(SpinCyclesFor(1e300, 1.0, 1980.0), std::numeric_limits<std::uint64_t>::max());
}

}  // namespace
}  // namespace bucketsim
