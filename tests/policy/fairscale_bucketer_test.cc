// The rules of fairscale's ReduceScatterBucketer (reference/fsdp_semantics.md §1, §4, §9), each
// checked on the exact sequence of allocations, collectives and callbacks it produces.
#include "policy/fairscale_bucketer.h"

#include <gtest/gtest.h>

#include "testing/recording_host.h"

namespace bucketsim {
namespace {

using testing::MakeCall;
using testing::MakeGroup;
using testing::RecordingHost;
using Log = std::vector<std::string>;

// cap 0.25 MiB, fp32, ws 2: S = 32768 elements; data = 2*32768*4 = 262144 B, output 131072 B.
constexpr double kCap = 0.25;
constexpr Numel kS2 = 32'768;

TEST(FairscaleBucketer, InputOfExactlyShardSizeGoesIntoTheBucket) {
  ProcessGroup g = MakeGroup(1, {0, 1});
  FairscaleBucketer bucketer(Lifetime::kBackward, KeyMode::kIdentity, kCap);
  RecordingHost host;
  ASSERT_TRUE(bucketer.ReduceScatter(MakeCall(g, kS2), host).ok());
  EXPECT_EQ(host.TakeLog(), (Log{"alloc bucket_data 262144 #0", "alloc bucket_output 131072 #1",
                                 "alloc rs_stack_temp 262144 #2", "free rs_stack_temp 262144 #2"}));
  EXPECT_EQ(host.deliveries(), 0);
  // A full bucket flushes without a .contiguous() copy: data[:, :S] is the whole buffer.
  ASSERT_TRUE(bucketer.Flush(host).ok());
  EXPECT_EQ(host.TakeLog(), (Log{"collective bucket_flush group 1 in 65536 out 32768 requests 1",
                                 "deliver param 0 from #1", "alloc bucket_output 131072 #3",
                                 "release #1 (kept by 1 view(s))"}));
}

TEST(FairscaleBucketer, OneMoreElementThanShardSizeBypasses) {
  ProcessGroup g = MakeGroup(1, {0, 1});
  FairscaleBucketer bucketer(Lifetime::kBackward, KeyMode::kIdentity, kCap);
  RecordingHost host;
  ASSERT_TRUE(bucketer.ReduceScatter(MakeCall(g, kS2 + 1), host).ok());
  // Output (n*4) before the cat temporary (ws*n*4); callback at once; no bucket touched.
  EXPECT_EQ(host.TakeLog(), (Log{"alloc bypass_output 131076 #0", "alloc rs_cat_temp 262152 #1",
                                 "collective bypass group 1 in 65538 out 32769 requests 1",
                                 "deliver param 0 from #0", "release #0 (kept by 1 view(s))",
                                 "free rs_cat_temp 262152 #1"}));
  EXPECT_EQ(bucketer.counters().buckets, 0u);
  EXPECT_EQ(bucketer.counters().bypasses, 1u);
}

TEST(FairscaleBucketer, OverflowFlushesThePartlyFilledBucketFirst) {
  ProcessGroup g = MakeGroup(1, {0, 1});
  FairscaleBucketer bucketer(Lifetime::kBackward, KeyMode::kIdentity, kCap);
  RecordingHost host;
  ASSERT_TRUE(
      bucketer.ReduceScatter(MakeCall(g, 20'000, DType::kFloat32, ShardMode::kView, 0), host).ok());
  host.TakeLog();
  // 20000 + 20000 > 32768: flush the 20000 columns first (a partial flush: .contiguous() copy of
  // 2*20000*4 = 160000 B), then a fresh output, then the stack of the new input.
  ASSERT_TRUE(
      bucketer.ReduceScatter(MakeCall(g, 20'000, DType::kFloat32, ShardMode::kView, 1), host).ok());
  EXPECT_EQ(host.TakeLog(), (Log{"alloc rs_contiguous_temp 160000 #3",
                                 "collective bucket_flush group 1 in 40000 out 20000 requests 1",
                                 "free rs_contiguous_temp 160000 #3", "deliver param 0 from #1",
                                 "alloc bucket_output 131072 #4", "release #1 (kept by 1 view(s))",
                                 "alloc rs_stack_temp 160000 #5", "free rs_stack_temp 160000 #5"}));
  EXPECT_EQ(bucketer.counters().flushes, 1u);
}

TEST(FairscaleBucketer, FitsWhileTheSumStaysWithinShardSize) {
  ProcessGroup g = MakeGroup(1, {0, 1});
  FairscaleBucketer bucketer(Lifetime::kBackward, KeyMode::kIdentity, kCap);
  RecordingHost host;
  ASSERT_TRUE(bucketer.ReduceScatter(MakeCall(g, 16'384), host).ok());
  ASSERT_TRUE(bucketer.ReduceScatter(MakeCall(g, 16'384), host).ok());  // 16384+16384 == S
  EXPECT_EQ(bucketer.counters().flushes, 0u);
  EXPECT_EQ(host.collectives().size(), 0u);
}

TEST(FairscaleBucketer, CapZeroBypassesEverything) {
  ProcessGroup g = MakeGroup(1, {0, 1, 2, 3});
  FairscaleBucketer bucketer(Lifetime::kBackward, KeyMode::kIdentity, 0.0);
  RecordingHost host;
  for (Numel n : {1u, 2u, 1000u}) ASSERT_TRUE(bucketer.ReduceScatter(MakeCall(g, n), host).ok());
  EXPECT_EQ(bucketer.counters().bypasses, 3u);
  EXPECT_EQ(bucketer.counters().buckets, 0u);
  EXPECT_EQ(host.deliveries(), 3);  // every callback ran at once
  ASSERT_TRUE(bucketer.EndBackward(host).ok());
  EXPECT_EQ(host.collectives().size(), 3u);  // the final flush has nothing to do
}

TEST(FairscaleBucketer, TwoGroupObjectsWithSameMembersAreTwoBucketsByIdentity) {
  ProcessGroup a = MakeGroup(7, {0, 1});
  ProcessGroup b = MakeGroup(9, {0, 1});
  FairscaleBucketer bucketer(Lifetime::kBackward, KeyMode::kIdentity, kCap);
  RecordingHost host;
  ASSERT_TRUE(bucketer.ReduceScatter(MakeCall(a, 100), host).ok());
  ASSERT_TRUE(bucketer.ReduceScatter(MakeCall(b, 100), host).ok());
  EXPECT_EQ(bucketer.counters().buckets, 2u);
  EXPECT_EQ(host.live_bytes(Category::kBucketData), 2 * 262'144u);
  ASSERT_TRUE(bucketer.Flush(host).ok());
  ASSERT_EQ(host.collectives().size(), 2u);
  EXPECT_EQ(host.collectives()[0].group, 7u);  // flushed in creation order
  EXPECT_EQ(host.collectives()[1].group, 9u);
}

TEST(FairscaleBucketer, TwoGroupObjectsWithSameMembersShareOneBucketUnderDedup) {
  ProcessGroup a = MakeGroup(7, {1, 0});
  ProcessGroup b = MakeGroup(9, {0, 1});
  ProcessGroup other = MakeGroup(11, {0, 2});
  FairscaleBucketer bucketer(Lifetime::kBackward, KeyMode::kMembers, kCap);
  RecordingHost host;
  ASSERT_TRUE(bucketer.ReduceScatter(MakeCall(a, 100), host).ok());
  ASSERT_TRUE(bucketer.ReduceScatter(MakeCall(b, 100), host).ok());
  ASSERT_TRUE(bucketer.ReduceScatter(MakeCall(other, 100), host).ok());
  EXPECT_EQ(bucketer.counters().buckets, 2u);  // {0,1} once, {0,2} once
  ASSERT_TRUE(bucketer.Flush(host).ok());
  ASSERT_EQ(host.collectives().size(), 2u);
  // The shared bucket reduces on the first group registered under its key, carrying both.
  EXPECT_EQ(host.collectives()[0].group, 7u);
  EXPECT_EQ(host.collectives()[0].requests, 2u);
  EXPECT_EQ(host.collectives()[0].output_numel, 200u);
  EXPECT_EQ(host.collectives()[1].group, 11u);
}

TEST(FairscaleBucketer, DifferentDtypesNeverShareABucket) {
  ProcessGroup g = MakeGroup(1, {0, 1});
  FairscaleBucketer bucketer(Lifetime::kBackward, KeyMode::kMembers, kCap);
  RecordingHost host;
  ASSERT_TRUE(bucketer.ReduceScatter(MakeCall(g, 10, DType::kFloat32), host).ok());
  ASSERT_TRUE(bucketer.ReduceScatter(MakeCall(g, 10, DType::kFloat16), host).ok());
  EXPECT_EQ(bucketer.counters().buckets, 2u);
  // fp16 at cap 0.25, ws 2: S = 65536; data 2*65536*2 = 262144 B, like fp32's: cap bytes each.
  EXPECT_EQ(host.live_bytes(Category::kBucketData), 2 * 262'144u);
}

TEST(FairscaleBucketer, TeardownOfANonEmptyBucketIsAnError) {
  ProcessGroup g = MakeGroup(1, {0, 1});
  FairscaleBucketer bucketer(Lifetime::kBackward, KeyMode::kIdentity, kCap);
  RecordingHost host;
  ASSERT_TRUE(bucketer.ReduceScatter(MakeCall(g, 10), host).ok());
  Status status = bucketer.Teardown(host);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("teardown of a non-empty bucket"), std::string::npos);
  EXPECT_NE(status.message().find("1 callbacks pending"), std::string::npos);
}

TEST(FairscaleBucketer, BackwardOnlyFreesBuffersAfterFinalFlushAndSetsThemUpAgain) {
  ProcessGroup g = MakeGroup(1, {0, 1});
  FairscaleBucketer bucketer(Lifetime::kBackward, KeyMode::kIdentity, kCap);
  RecordingHost host;
  ASSERT_TRUE(
      bucketer.ReduceScatter(MakeCall(g, 10, DType::kFloat32, ShardMode::kCast), host).ok());
  ASSERT_TRUE(bucketer.EndBackward(host).ok());
  EXPECT_EQ(host.live_bytes(), 0u);  // data and the fresh output torn down; cast: nothing kept
  host.TakeLog();
  // A bypass after the teardown does not set the bucket up (§9).
  ASSERT_TRUE(
      bucketer.ReduceScatter(MakeCall(g, kS2 + 1, DType::kFloat32, ShardMode::kCast), host).ok());
  EXPECT_EQ(host.live_bytes(Category::kBucketData), 0u);
  // The next bucketed input regrows data, then output.
  host.TakeLog();
  ASSERT_TRUE(
      bucketer.ReduceScatter(MakeCall(g, 10, DType::kFloat32, ShardMode::kCast), host).ok());
  Log log = host.TakeLog();
  ASSERT_GE(log.size(), 2u);
  EXPECT_EQ(log[0], "alloc bucket_data 262144 #7");
  EXPECT_EQ(log[1], "alloc bucket_output 131072 #8");
  EXPECT_EQ(bucketer.counters().buckets, 1u);
}

TEST(FairscaleBucketer, AlwaysAllocatedKeepsBuffersAfterBackward) {
  ProcessGroup g = MakeGroup(1, {0, 1});
  FairscaleBucketer bucketer(Lifetime::kAlways, KeyMode::kIdentity, kCap);
  RecordingHost host;
  ASSERT_TRUE(
      bucketer.ReduceScatter(MakeCall(g, 10, DType::kFloat32, ShardMode::kCast), host).ok());
  ASSERT_TRUE(bucketer.EndBackward(host).ok());
  // data 262144 + the fresh output 131072 stay for the life of the bucketer.
  EXPECT_EQ(host.live_bytes(), 262'144u + 131'072u);
  EXPECT_EQ(host.live_bytes(Category::kBucketData), 262'144u);
  EXPECT_EQ(host.live_bytes(Category::kBucketOutput), 131'072u);
}

TEST(FairscaleBucketer, EveryFlushMakesAFreshOutputAndViewsRetainTheOldOnes) {
  ProcessGroup g = MakeGroup(1, {0, 1});
  FairscaleBucketer bucketer(Lifetime::kBackward, KeyMode::kIdentity, kCap);
  RecordingHost host;
  // Three inputs of 20000: each overflows the previous, so two implicit flushes + the final.
  for (std::uint32_t p = 0; p < 3; ++p) {
    ASSERT_TRUE(
        bucketer.ReduceScatter(MakeCall(g, 20'000, DType::kFloat32, ShardMode::kView, p), host)
            .ok());
  }
  ASSERT_TRUE(bucketer.EndBackward(host).ok());
  EXPECT_EQ(bucketer.counters().flushes, 3u);
  // After teardown only the three retired outputs (131072 B each) held by views remain.
  EXPECT_EQ(host.live_bytes(), 3 * 131'072u);
  EXPECT_EQ(host.live_bytes(Category::kRetiredOutput), 3 * 131'072u);
  host.DropGradients();  // zero_grad(set_to_none=True)
  EXPECT_EQ(host.live_bytes(), 0u);
}

TEST(FairscaleBucketer, OneRankGroupFlushesWithoutContiguousCopy) {
  ProcessGroup g = MakeGroup(1, {0});
  FairscaleBucketer bucketer(Lifetime::kBackward, KeyMode::kIdentity, kCap);
  RecordingHost host;
  ASSERT_TRUE(
      bucketer.ReduceScatter(MakeCall(g, 10, DType::kFloat32, ShardMode::kCast), host).ok());
  host.TakeLog();
  ASSERT_TRUE(bucketer.Flush(host).ok());
  for (const std::string& line : host.log()) {
    EXPECT_EQ(line.find("rs_contiguous_temp"), std::string::npos) << line;
  }
}

// fairscale tests/utils/test_reduce_scatter_bucketer.py::test_reduce_scatter, re-expressed:
// cap in {0, 0.25} x shard_size in {1, 262144} x world size in {1, 2, 4, 8}. The callback is
// pending until flush() only for cap 0.25 with shard_size 1; it runs exactly once either way.
TEST(FairscaleBucketerFairscaleSuite, ReduceScatter) {
  for (int ws : {1, 2, 4, 8}) {
    std::vector<int> ranks;
    for (int r = 0; r < ws; ++r) ranks.push_back(r);
    ProcessGroup g = MakeGroup(1, ranks);
    for (double cap : {0.0, 0.25}) {
      for (Numel shard_size : {Numel{1}, Numel{262'144}}) {
        SCOPED_TRACE(::testing::Message() << "ws " << ws << " cap " << cap << " n " << shard_size);
        FairscaleBucketer bucketer(Lifetime::kBackward, KeyMode::kIdentity, cap);
        RecordingHost host;
        ASSERT_TRUE(bucketer.ReduceScatter(MakeCall(g, shard_size), host).ok());
        bool pending = cap > 0 && shard_size * ws * 4 < cap * 1024 * 1024;
        EXPECT_EQ(host.deliveries(), pending ? 0 : 1);
        ASSERT_TRUE(bucketer.Flush(host).ok());
        EXPECT_EQ(host.deliveries(), 1);
        ASSERT_EQ(host.collectives().size(), 1u);
        EXPECT_EQ(host.collectives()[0].output_numel, shard_size);
      }
    }
  }
}

// test_out_of_order_reduction (cap 0.25): small (1), big (262144), small2 (2). The big one
// bypasses and is called back at once; the small ones wait for flush(), in append order.
TEST(FairscaleBucketerFairscaleSuite, OutOfOrderReduction) {
  for (int ws : {2, 4, 8}) {
    std::vector<int> ranks;
    for (int r = 0; r < ws; ++r) ranks.push_back(r);
    ProcessGroup g = MakeGroup(1, ranks);
    FairscaleBucketer bucketer(Lifetime::kBackward, KeyMode::kIdentity, 0.25);
    RecordingHost host;
    ASSERT_TRUE(
        bucketer.ReduceScatter(MakeCall(g, 1, DType::kFloat32, ShardMode::kView, 1), host).ok());
    EXPECT_EQ(host.deliveries(), 0);
    ASSERT_TRUE(
        bucketer.ReduceScatter(MakeCall(g, 262'144, DType::kFloat32, ShardMode::kView, 2), host)
            .ok());
    EXPECT_EQ(host.deliveries(), 1);
    ASSERT_TRUE(
        bucketer.ReduceScatter(MakeCall(g, 2, DType::kFloat32, ShardMode::kView, 3), host).ok());
    EXPECT_EQ(host.deliveries(), 1);
    ASSERT_TRUE(bucketer.Flush(host).ok());
    EXPECT_EQ(host.deliveries(), 3);
    std::vector<std::string> order;
    for (const std::string& line : host.log()) {
      if (line.starts_with("deliver")) order.push_back(line.substr(0, 15));
    }
    EXPECT_EQ(order, (Log{"deliver param 2", "deliver param 1", "deliver param 3"}));
  }
}

}  // namespace
}  // namespace bucketsim
