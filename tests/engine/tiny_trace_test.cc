// traces/tiny-ws2.json, replayed under the four default policies, against numbers worked out by
// hand. World size 2, cap 0.25 MiB, fp32: S = 0.25 MiB / 4 B / 2 = 32768 elements, so a bucket's
// data is 2*32768*4 = 262144 B (D) and its output 32768*4 = 131072 B (O).
// Instances: a and b reduce n = 20480 elements (bucketed: 20480 <= S), c reduces 51200 (bypass:
// 51200 > S). a and c use group object 101, b uses 102; 101 and 102 have the same members.
// Trace allocations: params P = 368640 B, activation 1000000 B charged A = 1000448 B (rounded up
// to 512 B: 1954 * 512), Adam state 737280 B at the first step only.
// Per request: stack temp ws*n*4 = 163840 B (a, b); bypass output n*4 = 204800 B and cat temp
// ws*n*4 = 409600 B (c); a partial flush of 20480 columns copies 163840 B (.contiguous()).
#include <algorithm>

#include <gtest/gtest.h>

#include "engine/replay_policies.h"
#include "io/trace_reader.h"

namespace bucketsim {
namespace {

struct Expected {
  const char* policy;
  Bytes peak;
  EventIndex peak_event;
  std::vector<Bytes> marks;  // after fwd, after bwd, after step; iteration 0 then 1
  Bytes final_bytes;
  std::uint64_t buckets;
  std::uint64_t flushes;
  std::uint64_t bypasses;
};

// Start of backward in iteration 1 (all policies but always-allocated): P + O_adam + A =
// 368640 + 737280 + 1000448 = 2106368.
const Expected kExpected[] = {
    // always-allocated: iteration 0 after bwd keeps both buckets: P + c's output 204800 + two
    // retired outputs 2*131072 + two buckets 2*(D + O) = 1622016; after step + 737280 = 2359296;
    // zero_grad drops c's output and the retired ones: 1892352. Iteration 1 forward: + A =
    // 2892800; the peak is c's cat temp: 2892800 + 204800 + 409600 = 3507200 at event 27.
    {"always-allocated",
     3'507'200,
     27,
     {1'369'088, 1'622'016, 2'359'296, 2'892'800, 2'359'296, 2'359'296},
     1'892'352,
     2,
     4,
     2},
    // backward-only: iteration 1, after c (2311168), a's bucket D+O and b's bucket D+O:
    // 2311168 + 2*393216 = 3097600, then b's stack 163840: peak 3261440 at event 29. After bwd:
    // teardown leaves P + Adam + c's output + two retired outputs = 1572864.
    {"backward-only",
     3'261'440,
     29,
     {1'369'088, 835'584, 1'572'864, 2'106'368, 1'572'864, 1'572'864},
     1'105'920,
     2,
     4,
     2},
    // per-group-dedup: a and b share one bucket; b overflows it (20480 > 32768 - 20480), so a is
    // flushed first and b lands in a fresh output: 2311168 + D + O + a's retired O + b's stack
    // = 2311168 + 262144 + 131072 + 131072 + 163840 = 2999296 at event 29.
    {"per-group-dedup",
     2'999'296,
     29,
     {1'369'088, 835'584, 1'572'864, 2'106'368, 1'572'864, 1'572'864},
     1'105'920,
     1,
     4,
     2},
    // unbucketed: everything bypasses; the peak is c's cat temp in iteration 1:
    // 2106368 + 204800 + 409600 = 2720768 at event 27. After bwd: P + outputs 204800 + 2*81920.
    {"unbucketed",
     2'720'768,
     27,
     {1'369'088, 737'280, 1'474'560, 2'106'368, 1'474'560, 1'474'560},
     1'105'920,
     0,
     0,
     6},
};

Result<ReplayOutcome> ReplayTiny(std::vector<PolicySpec> policies) {
  std::string path = std::string(BUCKETSIM_SOURCE_DIR) + "/traces/tiny-ws2.json";
  ReplayRequest request;
  request.policies = std::move(policies);
  return ReplayPolicies(
      [&](TraceHeader& header, EventSink& sink) { return ReadTrace(path, header, sink); }, request);
}

TEST(TinyTrace, EveryPolicyMatchesTheHandComputedBytes) {
  Result<ReplayOutcome> outcome = ReplayTiny(DefaultPolicies());
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  ASSERT_EQ(outcome->runs.size(), std::size(kExpected));
  for (std::size_t i = 0; i < std::size(kExpected); ++i) {
    const Expected& want = kExpected[i];
    const RunResult& run = outcome->runs[i];
    SCOPED_TRACE(want.policy);
    EXPECT_EQ(run.policy, want.policy);
    EXPECT_EQ(run.peak.allocated_bytes, want.peak);
    EXPECT_EQ(run.peak.event_index, want.peak_event);
    EXPECT_EQ(run.peak.iteration, 1u);
    EXPECT_EQ(run.peak.phase, Phase::kBackward);
    std::vector<Bytes> marks;
    for (const MarkSample& mark : run.marks) marks.push_back(mark.allocated_bytes);
    EXPECT_EQ(marks, want.marks);
    EXPECT_EQ(run.final_allocated_bytes, want.final_bytes);
    EXPECT_EQ(run.counters.buckets, want.buckets);
    EXPECT_EQ(run.counters.flushes, want.flushes);
    EXPECT_EQ(run.counters.bypasses, want.bypasses);
    EXPECT_DOUBLE_EQ(run.compute_us, 700.0);
  }
}

TEST(TinyTrace, PeakCompositionNamesTheBuffersAliveAtThePeak) {
  Result<ReplayOutcome> outcome = ReplayTiny({*ParsePolicySpec("backward-only")});
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  const PeakInfo& peak = outcome->runs[0].peak;
  // At b's stack in iteration 1: P, Adam, A, c's output, two buckets (D + O each), the stack.
  auto at = [&](Category c) { return peak.by_category[static_cast<int>(c)]; };
  EXPECT_EQ(at(Category::kParam), 368'640u);
  EXPECT_EQ(at(Category::kOptimizerState), 737'280u);
  EXPECT_EQ(at(Category::kActivation), 1'000'448u);
  EXPECT_EQ(at(Category::kBypassOutput), 204'800u);
  EXPECT_EQ(at(Category::kBucketData), 2 * 262'144u);
  EXPECT_EQ(at(Category::kBucketOutput), 2 * 131'072u);
  EXPECT_EQ(at(Category::kRsStackTemp), 163'840u);
  EXPECT_EQ(at(Category::kRetiredOutput), 0u);
  ASSERT_FALSE(peak.largest.empty());
  EXPECT_EQ(peak.largest[0].what, "trace alloc id 11");  // the activation
  EXPECT_EQ(peak.largest[1].category, Category::kOptimizerState);
}

TEST(TinyTrace, DedupFlushesOnTheFirstGroupRegistered) {
  Result<ReplayOutcome> outcome = ReplayTiny({*ParsePolicySpec("per-group-dedup")});
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  const auto& log = outcome->runs[0].collectives;
  ASSERT_EQ(log.size(), 6u);
  // Iteration 0: c bypasses (event 8), b's request overflows and flushes a (event 10), the
  // final flush reduces b (event 12), all on group 101 (a's group, registered first).
  EXPECT_EQ(log[0].kind, CollectiveKind::kBypass);
  EXPECT_EQ(log[0].event_index, 8u);
  EXPECT_EQ(log[0].input_numel, 102'400u);
  EXPECT_EQ(log[1].kind, CollectiveKind::kBucketFlush);
  EXPECT_EQ(log[1].event_index, 10u);
  EXPECT_EQ(log[1].group, 101u);
  EXPECT_EQ(log[1].output_numel, 20'480u);
  EXPECT_EQ(log[2].event_index, 12u);
  EXPECT_EQ(log[2].group, 101u);
}

TEST(TinyTrace, TimelineKeepsEveryEventAndPeaksWhereThePeakIs) {
  Result<ReplayOutcome> outcome = ReplayTiny(DefaultPolicies());
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  for (std::size_t i = 0; i < std::size(kExpected); ++i) {
    const RunResult& run = outcome->runs[i];
    SCOPED_TRACE(run.policy);
    // 38 events are under the 512-point bound: one point per event.
    EXPECT_EQ(run.timeline.span_events, 1u);
    ASSERT_EQ(run.timeline.points.size(), 38u);
    Bytes top = 0;
    for (const TimelinePoint& p : run.timeline.points) top = std::max(top, p.allocated_bytes);
    EXPECT_EQ(top, kExpected[i].peak);
    // The peak is reached inside its event (a temporary of an rs): that point holds it.
    EXPECT_EQ(run.timeline.points[kExpected[i].peak_event].allocated_bytes, kExpected[i].peak);
    // Event 0 allocates the parameters: the point of event 1 starts from them.
    EXPECT_EQ(run.timeline.points[1].allocated_bytes, 368'640u);
    // Phase bands tile the replay: each ends where the next begins, the last at event 38.
    ASSERT_EQ(run.phases.size(), 9u);
    for (std::size_t p = 0; p + 1 < run.phases.size(); ++p) {
      EXPECT_EQ(run.phases[p].end_event, run.phases[p + 1].first_event);
    }
    EXPECT_EQ(run.phases.front().end_event, 2u);
    EXPECT_EQ(run.phases.back().end_event, 38u);
  }
}

TEST(TinyTrace, BucketLifetimesFollowSetupFlushAndTeardown) {
  Result<ReplayOutcome> outcome = ReplayTiny({*ParsePolicySpec("backward-only")});
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  const std::vector<BucketLifetime>& lifetimes = outcome->runs[0].bucket_lifetimes;
  struct Want {
    Category category;
    GroupId group;
    Bytes bytes;
    EventIndex allocated;
    std::optional<EventIndex> retired;
    std::optional<EventIndex> freed;
  };
  const Category D = Category::kBucketData;
  const Category O = Category::kBucketOutput;
  // Per iteration: a's bucket (group 101) set up at a's rs, b's (group 102) at b's; at the final
  // flush each gets a fresh output shard, the old one is retired (kept by the gradient views
  // until zero_grad) and the teardown frees data and the fresh shard.
  std::vector<Want> want;
  for (EventIndex shift : {0, 19}) {
    const EventIndex flush = 12 + shift;
    const EventIndex zero_grad = 19 + shift - (shift ? 1 : 0);
    want.insert(want.end(), {{D, 101, 262'144, 9 + shift, {}, flush},
                             {O, 101, 131'072, 9 + shift, flush, zero_grad},
                             {D, 102, 262'144, 10 + shift, {}, flush},
                             {O, 102, 131'072, 10 + shift, flush, zero_grad},
                             {O, 101, 131'072, flush, {}, flush},
                             {O, 102, 131'072, flush, {}, flush}});
  }
  ASSERT_EQ(lifetimes.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(lifetimes[i].category, want[i].category);
    EXPECT_EQ(lifetimes[i].dtype, DType::kFloat32);
    EXPECT_EQ(lifetimes[i].group, want[i].group);
    EXPECT_EQ(lifetimes[i].bytes, want[i].bytes);
    EXPECT_EQ(lifetimes[i].allocated_event, want[i].allocated);
    EXPECT_EQ(lifetimes[i].retired_event, want[i].retired);
    EXPECT_EQ(lifetimes[i].freed_event, want[i].freed);
  }
  EXPECT_EQ(outcome->runs[0].bucket_lifetimes_dropped, 0u);
}

TEST(TinyTrace, AlwaysAllocatedBucketsOutliveTheReplay) {
  Result<ReplayOutcome> outcome = ReplayTiny({*ParsePolicySpec("always-allocated")});
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  const std::vector<BucketLifetime>& lifetimes = outcome->runs[0].bucket_lifetimes;
  // Data of both buckets from their first use in iteration 0, never freed.
  ASSERT_GE(lifetimes.size(), 4u);
  EXPECT_EQ(lifetimes[0].category, Category::kBucketData);
  EXPECT_EQ(lifetimes[0].allocated_event, 9u);
  EXPECT_FALSE(lifetimes[0].freed_event.has_value());
  std::size_t alive = 0;
  for (const BucketLifetime& b : lifetimes) alive += b.freed_event.has_value() ? 0 : 1;
  EXPECT_EQ(alive, 4u);  // two data buffers and the two current output shards
}

}  // namespace
}  // namespace bucketsim
