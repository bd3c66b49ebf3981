// The engine driving the sim's time model through a real policy, worked out by hand.
// Profile: alpha 10 µs, busbw 1 GB/s (1000 bytes/µs), copies 1 GB/s. World 2, one group,
// one parameter whose gradient reduces 1000 fp32 per rank: the stacked gradient is
// 2 x 1000 x 4 = 8000 bytes (8 µs to copy), a reduce-scatter of it moves 4000 bus bytes
// (10 + 4 = 14 µs).
// Trace: forward 50 µs; backward 100 µs, the gradient's rs, 30 µs more backward, the final
// flush; step 20 µs.
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/sim/sim_backend.h"
#include "testing/trace_builder.h"

namespace bucketsim {
namespace {

testing::TraceBuilder OneGradient() {
  testing::TraceBuilder t(2);
  t.Streams({"default", "post_backward"});
  t.Group(1, {0, 1}).Fsdp("layer", {{"w", 2000, DType::kFloat32}});
  t.Iteration(0).Phase(Phase::kForward).Compute(50).Phase(Phase::kBackward).Compute(100);
  t.Rs(0, 0, 1, DType::kFloat32, 1000).Compute(30).Flush().Phase(Phase::kStep).Compute(20);
  return t;
}

RunResult ReplayTimed(const testing::TraceBuilder& trace, const char* policy) {
  auto profile = std::make_shared<TimeProfile>();
  profile->reduce_scatter = {{2, 10.0, 1.0, {}}};
  profile->copy_GBps = 1.0;
  ReplayRequest request;
  request.policies = {*ParsePolicySpec(policy)};
  request.make_backend = [profile] { return std::make_unique<SimBackend>(profile); };
  request.timeline_policy = 0;
  Result<ReplayOutcome> outcome = ReplayPolicies(trace.Source(), request);
  EXPECT_TRUE(outcome.ok()) << outcome.status().message();
  return std::move(outcome->runs.front());
}

TEST(TimedReplay, BypassIsHiddenUnderTheRestOfBackward) {
  // Unbucketed: the gradient is ready at 150; cat [150, 158], reduce-scatter [158, 172], under
  // the backward compute [150, 180]. The flush has nothing to do; the step runs [180, 200].
  RunResult run = ReplayTimed(OneGradient(), "unbucketed");
  ASSERT_EQ(run.iterations.size(), 1u);
  EXPECT_EQ(run.iterations[0].iteration_us, 200);
  EXPECT_EQ(run.iterations[0].exposed_communication_us, 0);
  EXPECT_EQ(run.iterations[0].copy_us, 8);
  ASSERT_EQ(run.collectives.size(), 1u);
  EXPECT_EQ(run.collectives[0].start_us, 158);
  EXPECT_EQ(run.collectives[0].dur_us, 14);
}

TEST(TimedReplay, FinalFlushOfABucketIsAnExposedTail) {
  // backward-only: stack [150, 158], copy into the bucket [158, 166]; the flush at the end of
  // backward copies the partial bucket out (.contiguous(), [166, 174]) and reduces it
  // [174, 188]. Backward compute ended at 180, so 8 µs are exposed and the step waits for the
  // post-backward stream: [188, 208].
  RunResult run = ReplayTimed(OneGradient(), "backward-only");
  EXPECT_EQ(run.iterations[0].iteration_us, 208);
  EXPECT_EQ(run.iterations[0].exposed_communication_us, 8);
  EXPECT_EQ(run.iterations[0].copy_us, 24);
  EXPECT_EQ(run.iterations[0].communication_us, 14);
  EXPECT_EQ(run.collectives[0].start_us, 174);
  ASSERT_TRUE(run.stream_timeline);
  ASSERT_EQ(run.stream_timeline->iterations.size(), 1u);
  const std::vector<TimedSpan>& spans = run.stream_timeline->iterations[0].spans;
  ASSERT_EQ(spans.size(), 8u);            // 4 compute, 3 copies, 1 collective
  EXPECT_EQ(spans.back().start_us, 188);  // the step
}

// FSDP2's streams: nothing of the trace on a `reduce_scatter` stream, but the policy's
// collectives run there (foreach_reduce's reduce_scatter_stream) while its buffers are allocated
// on stream 0, so the copy-in (chunk_cat, 8000 bytes: [150, 158]) and the reduce-scatter
// [158, 172] hide under the rest of backward [150, 180]; on stream 0 they would have run after
// that compute and delayed the step by 22 µs. The fsdp2 policy reduces the one parameter at its
// request (its group of one).
TEST(TimedReplay, AReduceScatterStreamTakesThePoliciesCollectives) {
  testing::TraceBuilder t(2);
  t.Streams({"default", "all_gather_copy_in", "all_gather", "reduce_scatter"});
  t.Group(1, {0, 1}).Fsdp("layer", {{"w", 2000, DType::kFloat32}});
  t.Iteration(0).Phase(Phase::kForward).Compute(50).Phase(Phase::kBackward).Compute(100);
  t.Rs(0, 0, 1, DType::kFloat32, 1000).Compute(30).Flush().Phase(Phase::kStep).Compute(20);
  RunResult run = ReplayTimed(t, "fsdp2");
  ASSERT_EQ(run.collectives.size(), 1u);
  EXPECT_EQ(run.collectives[0].start_us, 158);
  EXPECT_EQ(run.collectives[0].dur_us, 14);
  EXPECT_EQ(run.iterations[0].copy_us, 8);
  EXPECT_EQ(run.iterations[0].exposed_communication_us, 0);
  EXPECT_EQ(run.iterations[0].iteration_us, 200);  // 50 + 100 + 30 + 20: nothing waits
}

TEST(TimedReplay, TimelineSamplesMemoryAndInstantsInOrder) {
  RunResult run = ReplayTimed(OneGradient(), "backward-only");
  ASSERT_TRUE(run.stream_timeline);
  const Timeline& timeline = *run.stream_timeline;
  ASSERT_FALSE(timeline.memory.empty());
  for (std::size_t i = 1; i < timeline.memory.size(); ++i) {
    EXPECT_GE(timeline.memory[i].ts_us, timeline.memory[i - 1].ts_us);
  }
  // The bucket buffers appear at the rs (150) and go at teardown after the flush.
  Bytes most_bucket = 0;
  for (const MemorySample& s : timeline.memory) most_bucket = std::max(most_bucket, s.bucket_bytes);
  EXPECT_EQ(most_bucket, run.peak_bucket_bytes);
  EXPECT_EQ(timeline.memory.back().bucket_bytes, 0u);
  // iteration 0 and forward at 0, backward at 50, step at 188: compute waited for the flush.
  ASSERT_EQ(timeline.instants.size(), 4u);
  EXPECT_EQ(timeline.instants[0].category, "iteration");
  EXPECT_EQ(timeline.instants[2].name, "backward");
  EXPECT_EQ(timeline.instants[2].ts_us, 50);
  EXPECT_EQ(timeline.instants[3].name, "step");
  EXPECT_EQ(timeline.instants[3].ts_us, 188);
}

TEST(TimedReplay, NoTimelineUnlessAsked) {
  Result<RunResult> run = testing::ReplayOne(OneGradient(), "backward-only");
  ASSERT_TRUE(run.ok());
  EXPECT_FALSE(run->stream_timeline);
}

}  // namespace
}  // namespace bucketsim
