#include <gtest/gtest.h>

#include "engine/cap_search.h"
#include "policy/shard_size.h"

namespace bucketsim {
namespace {

// The reduce requests of traces/tiny-ws2.json, one backward: fp32 (4 bytes), world size 2;
// instance c (51,200 elements per rank) and a (20,480) on group 101, b (20,480) on group 102.
//   thresholds: 20,480 * 2 * 4 = 163,840 B = 0.15625 MiB; 51,200 * 2 * 4 = 409,600 B = 0.390625 MiB
//   one bucket per backward: group 101 receives 409,600 + 163,840 = 573,440 B = 0.546875 MiB
CapThresholds TinyTrace(int backwards) {
  CapThresholds t;
  for (int i = 0; i < backwards; ++i) {
    t.StartBackward();
    t.AddRequest(51200, 4, 2, 101);
    t.AddRequest(20480, 4, 2, 101);
    t.AddRequest(20480, 4, 2, 102);
  }
  return t;
}

TEST(CapThresholds, ARequestIsBucketedFromExactlyItsThreshold) {
  CapThresholds t = TinyTrace(2);
  EXPECT_EQ(t.requests(), 6u);
  std::vector<RequestSize> sizes = t.Sizes();
  ASSERT_EQ(sizes.size(), 2u);
  EXPECT_EQ(sizes[0].ThresholdCapMb(), 0.15625);
  EXPECT_EQ(sizes[0].count, 4u);
  EXPECT_EQ(sizes[1].ThresholdCapMb(), 0.390625);
  // At the threshold the shard size is exactly the request (fairscale buckets n <= S).
  EXPECT_EQ(BucketShardSize(0.15625, 4, 2), 20480u);
  EXPECT_EQ(BucketShardSize(0.390625, 4, 2), 51200u);
  // 0.0625 MiB (S = 8,192) buckets nothing; 0.25 (S = 32,768) buckets a and b; 1 buckets all.
  EXPECT_EQ(t.BucketedAt(0.0625), 0u);
  EXPECT_EQ(t.BucketedAt(0.15625), 4u);
  EXPECT_EQ(t.BucketedAt(0.1562), 0u);
  EXPECT_EQ(t.BucketedAt(0.25), 4u);
  EXPECT_EQ(t.BucketedAt(0.390625), 6u);
  EXPECT_EQ(t.BucketedAt(0), 0u);
  EXPECT_EQ(t.SmallestBucketingCapMb().value_or(0), 0.15625);
  // Per backward, not summed over both.
  EXPECT_EQ(t.AllInOneBucketCapMb(), 0.546875);
}

TEST(CapThresholds, NoRequestsNoThreshold) {
  CapThresholds t;
  EXPECT_FALSE(t.SmallestBucketingCapMb());
  EXPECT_FALSE(AutoCapRange(t));
}

TEST(CapSearch, CapsAreRoundedUpToThreeSignificantDigits) {
  EXPECT_EQ(RoundCapUp(0.15625), 0.157);
  EXPECT_EQ(RoundCapUp(0.390625), 0.391);
  EXPECT_EQ(RoundCapUp(12.3), 12.3);
  EXPECT_EQ(RoundCapUp(12.3456), 12.4);
  EXPECT_EQ(RoundCapUp(25), 25.0);
  EXPECT_EQ(RoundCapUp(9.991), 10.0);
  EXPECT_EQ(RoundCapUp(1234.5), 1240.0);
}

TEST(CapSearch, FirstRoundTriesTheThresholdsTheGridAndTheEnds) {
  CapThresholds t = TinyTrace(1);
  std::optional<CapRange> range = AutoCapRange(t);
  ASSERT_TRUE(range);
  EXPECT_EQ(range->from_mb, 0.157);
  EXPECT_EQ(range->to_mb, 0.547);
  std::vector<double> caps = InitialSearchCaps(t, *range);
  EXPECT_EQ(caps.front(), 0.157);
  EXPECT_EQ(caps.back(), 0.547);
  EXPECT_TRUE(std::is_sorted(caps.begin(), caps.end()));
  EXPECT_EQ(std::adjacent_find(caps.begin(), caps.end()), caps.end());
  // The threshold of c, rounded up: the first cap that buckets all three requests.
  EXPECT_NE(std::find(caps.begin(), caps.end(), 0.391), caps.end());
  // 10 grid steps strictly inside, at three digits some may coincide: at most 12 + 1 caps.
  EXPECT_LE(caps.size(), 13u);
  EXPECT_GE(caps.size(), 8u);
}

// Refinement looks only where the figures change next to the choice: the knee at cap 4 differs
// from cap 1 below it and equals cap 16 above, so only (1, 4) is searched: 4^(k/4) for k = 1..3
// = 1.41421..., 2, 2.82842... rounded up to 1.42, 2 and 2.83.
TEST(CapSearch, RefinesBetweenTheChoiceAndANeighbourWithOtherFigures) {
  auto point = [](double cap, Bytes reserved, Micros step) {
    SweepPoint p;
    p.policy = "backward-only";
    p.bucket_cap_mb = cap;
    p.peak_reserved_bytes = reserved;
    p.step_time_us = step;
    return p;
  };
  std::vector<SweepPoint> points = {point(1, 100, 50), point(4, 200, 40), point(16, 200, 40)};
  std::vector<double> caps = RefineSearchCaps(points, {1}, {1, 4, 16}, CapRange{1, 16});
  EXPECT_EQ(caps, (std::vector<double>{1.42, 2, 2.83}));
  // Nothing new once those are tried.
  EXPECT_TRUE(RefineSearchCaps(points, {1}, {1, 1.42, 2, 2.83, 4, 16}, CapRange{1, 16}).empty());
}

}  // namespace
}  // namespace bucketsim
