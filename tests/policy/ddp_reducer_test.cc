// DDP's Reducer (policy/ddp_reducer.h): its bucket assignment, the first iteration's single
// bucket, the rebuild at the second forward, all-reduce per bucket in bucket order, and
// gradient_as_bucket_view. Every byte below is derived in the comments.
#include "policy/ddp_reducer.h"

#include <gtest/gtest.h>

#include "framework_policy_fixture.h"

namespace bucketsim {
namespace {

using testing::MakeCall;
using testing::ModelHeader;
using testing::RecordingHost;
using Log = std::vector<std::string>;

TEST(DdpBucketAssignment, ClosesABucketOnceItReachesItsLimitThenTakesTheNextLimit) {
  // Limits [100, 300] bytes. 60 < 100; 60 + 50 = 110 >= 100 closes {0, 1}; the limit is now
  // 300: 200 < 300, 200 + 150 = 350 >= 300 closes {2, 3}; {4} stays open until the end.
  std::vector<DdpTensor> tensors = {{60, DType::kFloat32},
                                    {50, DType::kFloat32},
                                    {200, DType::kFloat32},
                                    {150, DType::kFloat32},
                                    {10, DType::kFloat32}};
  EXPECT_EQ(DdpBucketAssignment(tensors, {100, 300}),
            (std::vector<std::vector<std::size_t>>{{0, 1}, {2, 3}, {4}}));
}

TEST(DdpBucketAssignment, KeepsOneBucketPerDtype) {
  // fp16 and fp32 accumulate separately; each has its own limit iterator.
  std::vector<DdpTensor> tensors = {
      {80, DType::kFloat16}, {80, DType::kFloat32}, {80, DType::kFloat16}, {10, DType::kFloat32}};
  EXPECT_EQ(DdpBucketAssignment(tensors, {100}),
            (std::vector<std::vector<std::size_t>>{{0, 2}, {1, 3}}));
}

// Model (instance 0, fp32, model order): A 40000, B 30000, C 100000, D 20000, E 50000
// elements = 160000, 120000, 400000, 80000, 200000 bytes; 240000 elements, 960000 B in all.
// Backward produces E, D, C, B, A (events 10..14). Caps: first 0.25 MiB = 262144 B, then
// 0.5 MiB = 524288 B.
class DdpReducerTest : public ::testing::Test {
 protected:
  TraceHeader header_ = ModelHeader({{40'000, 30'000, 100'000, 20'000, 50'000}});
  ProcessGroup& group() { return header_.groups[0]; }
  void Backward(DdpReducer& ddp, RecordingHost& host) {
    const Numel shard[] = {20'000, 15'000, 50'000, 10'000, 25'000};  // per-rank, unused by DDP
    for (std::uint32_t p = 5; p-- > 0;) {
      ASSERT_TRUE(ddp.ReduceScatter(MakeCall(group(), shard[p], DType::kFloat32, ShardMode::kView,
                                             p, 0, 10 + (4 - p)),
                                    host)
                      .ok());
    }
    ASSERT_TRUE(ddp.EndBackward(host).ok());
  }
};

TEST_F(DdpReducerTest, FirstIterationAllReducesOneBucketOverTheWholeModel) {
  DdpReducer ddp(0.5, 0.25, /*gradient_as_bucket_view=*/true);
  ASSERT_TRUE(ddp.Start(header_).ok());
  RecordingHost host;
  Backward(ddp, host);
  // [sys.maxsize]: one bucket of 240000 elements (960000 B), allocated at E's gradient; the
  // all-reduce waits for the last gradient (A). Offsets are model order: A 0, B 40000,
  // C 70000, D 170000, E 190000.
  EXPECT_EQ(host.TakeLog(), (Log{"alloc bucket_data 960000 #0",
                                 "collective all_reduce group 1 in 240000 out 240000 requests 5"}));
  EXPECT_EQ(host.moves().front(), "fill #0 rows 1 numel 50000 at 190000 stride 50000");
  EXPECT_EQ(host.moves().back(),
            "all_reduce #0 -> #0 [190000+50000] [170000+20000] [70000+100000] [40000+30000] "
            "[0+40000]");
}

TEST_F(DdpReducerTest, RebuildsBucketsInReadyOrderAtTheSecondForward) {
  DdpReducer ddp(0.5, 0.25, /*gradient_as_bucket_view=*/true);
  ASSERT_TRUE(ddp.Start(header_).ok());
  RecordingHost host;
  Backward(ddp, host);
  host.TakeLog();
  // Ready order E, D, C, B, A with limits [262144, 524288]: E 200000 < 262144; + D = 280000
  // >= 262144 closes {E, D} (70000 elements: over the first cap, DDP's >= rule); C 400000,
  // + B 520000 < 524288, + A 680000 >= 524288 closes {C, B, A} (170000 elements).
  // With gradient_as_bucket_view the old bucket is freed after the new ones exist.
  ASSERT_TRUE(ddp.BeginPhase(Phase::kForward, host).ok());
  EXPECT_EQ(host.TakeLog(), (Log{"alloc bucket_data 280000 #1", "alloc bucket_data 680000 #2",
                                 "free bucket_data 960000 #0"}));
  EXPECT_EQ(host.peak_bytes(), 960'000u + 280'000u + 680'000u);
  // Second backward: no allocation; bucket 0 goes once E and D are in, bucket 1 after A.
  Backward(ddp, host);
  EXPECT_EQ(host.TakeLog(), (Log{"collective all_reduce group 1 in 70000 out 70000 requests 2",
                                 "collective all_reduce group 1 in 170000 out 170000 requests 3"}));
  // Rebuilt once: the third forward changes nothing.
  ASSERT_TRUE(ddp.BeginPhase(Phase::kForward, host).ok());
  EXPECT_TRUE(host.TakeLog().empty());
  EXPECT_EQ(host.live_bytes(), 960'000u);
}

TEST_F(DdpReducerTest, WithoutBucketViewParamGradsPersistAndOldBucketsGoFirst) {
  DdpReducer ddp(0.5, 0.25, /*gradient_as_bucket_view=*/false);
  ASSERT_TRUE(ddp.Start(header_).ok());
  RecordingHost host;
  Backward(ddp, host);
  // param.grad of each parameter (its unsharded bytes), kept: E, D, C, B, A.
  EXPECT_EQ(host.TakeLog(), (Log{"alloc bucket_data 960000 #0", "alloc grad_shard 200000 #1",
                                 "alloc grad_shard 80000 #2", "alloc grad_shard 400000 #3",
                                 "alloc grad_shard 120000 #4", "alloc grad_shard 160000 #5",
                                 "collective all_reduce group 1 in 240000 out 240000 requests 5"}));
  // buckets_.clear() frees the old bucket before the new ones are allocated.
  ASSERT_TRUE(ddp.BeginPhase(Phase::kForward, host).ok());
  EXPECT_EQ(host.TakeLog(), (Log{"free bucket_data 960000 #0", "alloc bucket_data 280000 #6",
                                 "alloc bucket_data 680000 #7"}));
  Backward(ddp, host);
  // G (buckets) + G (param.grad): 960000 + 960000.
  EXPECT_EQ(host.live_bytes(), 1'920'000u);
  EXPECT_EQ(host.peak_bytes(), 1'920'000u);
}

}  // namespace
}  // namespace bucketsim
