#include "backend/span_timing.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TimedSpan Compute(Micros start, Micros end) { return {SpanKind::kCompute, 0, start, end}; }
TimedSpan Collective(Micros start, Micros end) { return {SpanKind::kCollective, 1, start, end}; }
TimedSpan CopySpan(Micros start, Micros end) { return {SpanKind::kCopy, 1, start, end}; }

TEST(SummarizeIteration, CollectiveUnderComputeIsNotExposed) {
  // compute [0, 100); collective [20, 60) lies inside it.
  IterationTiming t = SummarizeIteration({0, 100, {Compute(0, 100), Collective(20, 60)}}, 3);
  EXPECT_EQ(t.iteration, 3u);
  EXPECT_DOUBLE_EQ(t.iteration_us, 100);
  EXPECT_DOUBLE_EQ(t.compute_us, 100);
  EXPECT_DOUBLE_EQ(t.communication_us, 40);
  EXPECT_DOUBLE_EQ(t.exposed_communication_us, 0);
}

TEST(SummarizeIteration, TailAfterTheLastComputeIsExposed) {
  // compute [0, 100) and [150, 200); collectives [90, 130) and [120, 160) and [210, 230).
  // Union of collectives: [90, 160) and [210, 230) = 70 + 20 = 90 µs. Overlap with compute:
  // [90, 100) and [150, 160) = 20 µs. Exposed: 90 - 20 = 70 µs. Sum of collective spans: 40 +
  // 40 + 20 = 100 µs.
  IterationTiming t =
      SummarizeIteration({0,
                          230,
                          {Compute(0, 100), Collective(90, 130), Collective(120, 160),
                           Compute(150, 200), Collective(210, 230), CopySpan(85, 90)}},
                         0);
  EXPECT_DOUBLE_EQ(t.compute_us, 150);
  EXPECT_DOUBLE_EQ(t.communication_us, 100);
  EXPECT_DOUBLE_EQ(t.copy_us, 5);
  EXPECT_DOUBLE_EQ(t.exposed_communication_us, 70);
}

TEST(IterationTimer, MergesSpansThatArriveOutOfStartOrder) {
  // Two streams' compute spans arrive out of start order: [50, 60), [0, 10), [20, 30), then
  // [9, 21), which joins the first two into [0, 30), then [70, 80) and [60, 65), which touches
  // [50, 60). Cover: [0, 30), [50, 65), [70, 80). The collective [5, 75) overlaps it by 25 + 15
  // + 5 = 45 µs: exposed 70 - 45 = 25 µs.
  IterationTimer timer;
  for (const TimedSpan& span : {Compute(50, 60), Compute(0, 10), Compute(20, 30), Compute(9, 21),
                                Compute(70, 80), Compute(60, 65), Collective(5, 75)}) {
    timer.Add(span);
  }
  IterationTiming t = timer.Take(0, 80);
  EXPECT_EQ(t.iteration, 0u);
  EXPECT_DOUBLE_EQ(t.iteration_us, 80);
  EXPECT_DOUBLE_EQ(t.compute_us, 10 + 10 + 10 + 12 + 10 + 5);
  EXPECT_DOUBLE_EQ(t.communication_us, 70);
  EXPECT_DOUBLE_EQ(t.exposed_communication_us, 25);
  // Take starts over: an iteration of one exposed collective.
  timer.Add(Collective(100, 110));
  t = timer.Take(80, 110);
  EXPECT_DOUBLE_EQ(t.compute_us, 0);
  EXPECT_DOUBLE_EQ(t.exposed_communication_us, 10);
}

TEST(SumTimings, StepTimeIsTheMedianAfterTheWarmUpIteration) {
  std::vector<IterationTiming> iterations(4);
  iterations[0].iteration_us = 1000;  // warm-up: excluded
  iterations[1].iteration_us = 30;
  iterations[2].iteration_us = 10;
  iterations[3].iteration_us = 20;
  EXPECT_DOUBLE_EQ(SumTimings(iterations, {}).step_time_us, 20);
  iterations.pop_back();  // two left after the warm-up: their mean
  EXPECT_DOUBLE_EQ(SumTimings(iterations, {}).step_time_us, 20);
  iterations.resize(1);  // one iteration: its own time
  EXPECT_DOUBLE_EQ(SumTimings(iterations, {}).step_time_us, 1000);
}

TEST(SumTimings, BandwidthsFollowNcclTests) {
  // Two fp32 collectives on 4 ranks, 1e6 and 3e6 bytes of send buffer, 2 ms of communication.
  std::vector<IterationTiming> iterations(1);
  iterations[0].communication_us = 2000;
  CollectiveRecord a;
  a.group_size = 4;
  a.input_numel = 250000;  // 1e6 bytes
  CollectiveRecord b = a;
  b.input_numel = 750000;  // 3e6 bytes
  CollectiveTotals collectives;
  collectives.Add(a);
  collectives.Add(b);
  TimingTotals totals = SumTimings(iterations, collectives);
  EXPECT_EQ(totals.collective_bytes, 4000000u);
  EXPECT_DOUBLE_EQ(totals.algbw_GBps, 2.0);                     // 4e6 B / 2e-3 s = 2 GB/s
  EXPECT_DOUBLE_EQ(totals.busbw_GBps, 1.5);                     // * 3/4
  EXPECT_DOUBLE_EQ(BusBandwidthGBps(1000000, 1000, 8), 0.875);  // 1 GB/s * 7/8
  EXPECT_DOUBLE_EQ(AlgBandwidthGBps(1000, 0), 0);
}

}  // namespace
}  // namespace bucketsim
