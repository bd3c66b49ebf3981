// The sim's event model on small timelines worked out by hand. Every case uses one profile:
// alpha = 10 µs and busbw = 1 GB/s (1000 bytes per µs) for reduce-scatters, copies at 1 GB/s.
// A reduce-scatter of S = 4000 bytes in a group of 2 moves (n-1)/n * S = 2000 bus bytes:
// 10 + 2000 / 1000 = 12 µs. A copy of 4000 bytes takes 4 µs.
// Stream 0 is the compute stream, stream 1 the post-backward stream; the calls are those the
// engine makes (it waits post-backward on compute before each gradient's reduce-scatter and
// compute on post-backward after the final flush).
#include <gtest/gtest.h>

#include "backend/sim/sim_backend.h"
#include "backend/span_timing.h"

namespace bucketsim {
namespace {

constexpr StreamId kCompute = 0;
constexpr StreamId kPost = 1;

std::shared_ptr<const TimeProfile> TestProfile() {
  auto profile = std::make_shared<TimeProfile>();
  profile->name = "test";
  profile->reduce_scatter = {{2, 10.0, 1.0, {}}};
  profile->copy_GBps = 1.0;
  return profile;
}

// 2 rows of 500 fp32 elements: S = 4000 bytes.
CollectiveRecord Rs4000(CollectiveKind kind = CollectiveKind::kBucketFlush) {
  return {kind,
          /*group=*/7,
          /*group_size=*/2,
          DType::kFloat32,
          /*input_numel=*/1000,
          /*output_numel=*/500,
          1};
}
GradientFill Fill4000() { return {/*buffer=*/3, /*request=*/0, /*rows=*/2, 500, DType::kFloat32}; }
BufferCopy Copy4000() { return {1, 500, 0, 3, 500, 0, 2, 500, DType::kFloat32}; }

class SimTimeline : public ::testing::Test {
 protected:
  void SetUp() override {
    TraceHeader header;
    header.streams = {{"default"}, {"post_backward"}};
    header.groups = {{9, {0, 1}, "replicas"}};
    ASSERT_TRUE(sim_.Start(header).ok());
  }
  IterationSpans End() {
    Result<IterationSpans> spans = sim_.EndIteration();
    EXPECT_TRUE(spans.ok());
    return *spans;
  }
  SimBackend sim_{TestProfile()};
};

TEST_F(SimTimeline, CollectiveHiddenUnderComputeIsNotExposed) {
  sim_.Compute(kCompute, 100);           // backward of the last layer: [0, 100]
  sim_.WaitStream(kPost, kCompute);      // its gradient is ready at 100
  sim_.Collective(Rs4000(), {}, kPost);  // [100, 112]
  sim_.Compute(kCompute, 50);            // the next layer's backward: [100, 150]
  sim_.WaitStream(kCompute, kPost);      // final flush waited for: 112 < 150
  IterationSpans spans = End();
  EXPECT_EQ(spans.end_us, 150);
  ASSERT_EQ(spans.spans.size(), 3u);
  EXPECT_EQ(spans.spans[1].start_us, 100);
  EXPECT_EQ(spans.spans[1].end_us, 112);
  IterationTiming timing = SummarizeIteration(spans, 0);
  EXPECT_EQ(timing.communication_us, 12);
  EXPECT_EQ(timing.exposed_communication_us, 0);  // [100, 112] lies inside compute [100, 150]
  EXPECT_EQ(timing.iteration_us, 150);
}

TEST_F(SimTimeline, FinalFlushLeavesAnExposedTail) {
  sim_.Compute(kCompute, 100);           // the whole backward: [0, 100]
  sim_.WaitStream(kPost, kCompute);      // last gradient at 100
  sim_.Collective(Rs4000(), {}, kPost);  // the final flush: [100, 112]
  sim_.WaitStream(kCompute, kPost);      // the step cannot start before 112
  sim_.Compute(kCompute, 20);            // optimizer step: [112, 132]
  IterationSpans spans = End();
  EXPECT_EQ(spans.spans[2].start_us, 112);
  IterationTiming timing = SummarizeIteration(spans, 0);
  EXPECT_EQ(timing.iteration_us, 132);             // 100 compute + 12 tail + 20 step
  EXPECT_EQ(timing.exposed_communication_us, 12);  // nothing computes during [100, 112]
  EXPECT_EQ(timing.compute_us, 120);
}

TEST_F(SimTimeline, RefillOfABucketWaitsForTheCollectiveThatReadsIt) {
  // Gradient A, ready at 100: stacked [100, 104], copied into the bucket [104, 108]; the bucket
  // is now full. Gradient B is ready at 110, finds the bucket full: fairscale flushes first
  // (collective [110, 122], reading the bucket in place: full, so no .contiguous()), and only
  // then stacks B [122, 126] and copies it into the bucket [126, 130]. B waited 12 µs behind
  // the collective although the post-backward stream was idle from 108 to 110.
  sim_.Compute(kCompute, 100);
  sim_.WaitStream(kPost, kCompute);
  sim_.FillGradient(Fill4000(), kPost);
  sim_.Copy(Copy4000(), kPost);
  sim_.Compute(kCompute, 10);  // [100, 110]: B is produced
  sim_.WaitStream(kPost, kCompute);
  sim_.Collective(Rs4000(), {}, kPost);
  sim_.FillGradient(Fill4000(), kPost);
  sim_.Copy(Copy4000(), kPost);
  IterationSpans spans = End();
  ASSERT_EQ(spans.spans.size(), 7u);
  const TimedSpan& collective = spans.spans[4];
  const TimedSpan& refill_stack = spans.spans[5];
  const TimedSpan& refill_copy = spans.spans[6];
  EXPECT_EQ(collective.kind, SpanKind::kCollective);
  EXPECT_EQ(collective.start_us, 110);
  EXPECT_EQ(collective.end_us, 122);
  EXPECT_EQ(refill_stack.start_us, 122);  // stalled: B was ready at 110
  EXPECT_EQ(refill_copy.start_us, 126);
  EXPECT_EQ(refill_copy.end_us, 130);
  IterationTiming timing = SummarizeIteration(spans, 0);
  EXPECT_EQ(timing.copy_us, 16);                   // four 4-µs copies
  EXPECT_EQ(timing.exposed_communication_us, 12);  // compute ended at 110
  EXPECT_EQ(timing.iteration_us, 130);
}

TEST_F(SimTimeline, BypassCollectiveCostsItsCatCopyAndItsWholeSize) {
  // A gradient larger than the bucket shard: torch.cat of 2 rows of 2000 fp32 (16000 bytes,
  // 16 µs) then one reduce-scatter of S = 16000: 10 + 8000 / 1000 = 18 µs. Ready at 40,
  // the next layer computes [40, 60]: cat [40, 56], collective [56, 74], 14 µs exposed.
  sim_.Compute(kCompute, 40);
  sim_.WaitStream(kPost, kCompute);
  sim_.FillGradient({3, 0, 2, 2000, DType::kFloat32}, kPost);
  sim_.Collective({CollectiveKind::kBypass, 7, 2, DType::kFloat32, 4000, 2000, 1}, {}, kPost);
  sim_.Compute(kCompute, 20);
  sim_.WaitStream(kCompute, kPost);
  IterationSpans spans = End();
  EXPECT_EQ(spans.spans[2].start_us, 56);
  EXPECT_EQ(spans.spans[2].end_us, 74);
  IterationTiming timing = SummarizeIteration(spans, 0);
  EXPECT_EQ(timing.exposed_communication_us, 14);  // [60, 74]
  EXPECT_EQ(timing.iteration_us, 74);
}

// A framework's all-gather of 500 fp32 elements a rank on 2 ranks receives S = 4000 bytes and
// costs what a reduce-scatter of S does (12 µs); an all-reduce of S twice that (24 µs). A
// reduction followed by the all-reduce of its 2000-byte shard over 2 replicas
// (TraceHeader::replicate_group) is two spans: 12 µs, then 2 * (10 + 1000 / 1000) = 22 µs.
TEST_F(SimTimeline, AllGathersAndReplicaAllReducesArePricedAsTheirBytes) {
  CollectiveRecord gather{CollectiveKind::kAllGather, 7, 2, DType::kFloat32, 500, 1000, 0};
  EXPECT_EQ(SendBytes(gather), 4000u);
  sim_.Collective(gather, {}, kPost);  // [0, 12]
  CollectiveRecord reduce{CollectiveKind::kAllReduce, 7, 2, DType::kFloat32, 1000, 1000, 0};
  sim_.Collective(reduce, {}, kPost);  // [12, 36]
  CollectiveRecord hybrid = Rs4000(CollectiveKind::kReduceScatter);
  hybrid.replicate_group = 9;          // the header's replicas, 2 of them
  sim_.Collective(hybrid, {}, kPost);  // [36, 48], then [48, 70]
  IterationSpans spans = End();
  ASSERT_EQ(spans.spans.size(), 4u);
  EXPECT_DOUBLE_EQ(spans.spans[0].end_us, 12);
  EXPECT_DOUBLE_EQ(spans.spans[1].end_us, 36);
  EXPECT_DOUBLE_EQ(spans.spans[2].end_us, 48);
  EXPECT_DOUBLE_EQ(spans.spans[3].start_us, 48);
  EXPECT_DOUBLE_EQ(spans.spans[3].end_us, 70);
}

TEST_F(SimTimeline, NextIterationStartsWhenEveryStreamIsIdle) {
  // Compute on another stream (all_gather prefetch) that outlasts the step: the next
  // iteration's forward starts after it.
  sim_.Compute(2, 300);  // stream 2: [0, 300]
  sim_.Compute(kCompute, 100);
  EXPECT_EQ(End().end_us, 300);
  sim_.Compute(kCompute, 10);
  IterationSpans next = End();
  EXPECT_EQ(next.start_us, 300);
  EXPECT_EQ(next.spans[0].start_us, 300);
  EXPECT_EQ(next.end_us, 310);
}

TEST(SimBackend, WithoutAProfileCopiesAndCollectivesAreFree) {
  SimBackend sim;
  TraceHeader header;
  header.streams = {{"default"}, {"post_backward"}};
  ASSERT_TRUE(sim.Start(header).ok());
  sim.Compute(kCompute, 100);
  sim.WaitStream(kPost, kCompute);
  sim.FillGradient(Fill4000(), kPost);
  sim.Collective(Rs4000(), {}, kPost);
  Result<IterationSpans> spans = sim.EndIteration();
  ASSERT_TRUE(spans.ok());
  ASSERT_EQ(spans->spans.size(), 2u);  // no copy span; a zero-length collective
  EXPECT_EQ(spans->spans[1].start_us, 100);
  EXPECT_EQ(spans->spans[1].end_us, 100);
  EXPECT_EQ(spans->end_us, 100);
}

TEST(SimBackend, IssueClockIsTheStreamsClock) {
  SimBackend sim(TestProfile());
  TraceHeader header;
  header.streams = {{"default"}, {"post_backward"}};
  ASSERT_TRUE(sim.Start(header).ok());
  sim.Compute(kCompute, 25);
  EXPECT_EQ(sim.IssueClock(kCompute).value_or(-1), 25);
  EXPECT_EQ(sim.IssueClock(kPost).value_or(-1), 0);
}

}  // namespace
}  // namespace bucketsim
