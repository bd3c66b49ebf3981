// StallDetector (backend/host/stall_detector.h): a tick later than the limit after the previous
// one is a stall of this process; ticks within it are not, however many.
#include "backend/host/stall_detector.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

using std::chrono::milliseconds;

TEST(StallDetector, ATickLaterThanTheLimitIsAStall) {
  const StallDetector::Clock::time_point start = StallDetector::Clock::now();
  StallDetector stall(milliseconds(100));
  EXPECT_FALSE(stall.Stalled(start + milliseconds(60)));
  EXPECT_FALSE(stall.Stalled(start + milliseconds(120)));  // 60 ms after the last tick
  EXPECT_FALSE(stall.Stalled(start + milliseconds(180)));
  EXPECT_TRUE(stall.Stalled(start + milliseconds(1180)));   // a second without a tick
  EXPECT_FALSE(stall.Stalled(start + milliseconds(1200)));  // counted from the late tick
}

TEST(StallDetector, TheLimitIsAQuarterOfTheTimeout) {
  EXPECT_EQ(StallDetector::LimitFor(2.0), milliseconds(500));
  EXPECT_EQ(StallDetector::LimitFor(300.0), milliseconds(75'000));
}

}  // namespace
}  // namespace bucketsim
