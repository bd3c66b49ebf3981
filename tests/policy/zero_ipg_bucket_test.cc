// DeepSpeed ZeRO's IPG bucket (policy/zero_ipg_bucket.h): the fill rule
// (elements + numel > reduce_bucket_size reduces first), the extra-large gradient, the kept
// partition, and the lifetimes of stages 1/2 (per backward, doubled by overlap_comm) and 3
// (persistent). Every byte below is derived in the comments.
#include "policy/zero_ipg_bucket.h"

#include <gtest/gtest.h>

#include "framework_policy_fixture.h"

namespace bucketsim {
namespace {

using testing::MakeCall;
using testing::ModelHeader;
using testing::RecordingHost;
using Log = std::vector<std::string>;

// Model (fp32, one instance): A 300, B 500, C 400, D 1500, E 100 elements = 2800; the kept
// partition is ceil(2800 / 2) = 1400 elements = 5600 B. reduce_bucket_size 1000 elements:
// each IPG buffer is 4000 B. Backward order A, B, C, D, E (events 1..5).
class ZeroIpgBucketTest : public ::testing::Test {
 protected:
  TraceHeader header_ = ModelHeader({{300, 500, 400, 1500, 100}});
  void Backward(ZeroIpgBucket& zero, RecordingHost& host) {
    ASSERT_TRUE(zero.BeginPhase(Phase::kBackward, host).ok());
    const Numel shard[] = {150, 250, 200, 750, 50};
    for (std::uint32_t p = 0; p < 5; ++p) {
      ASSERT_TRUE(zero.ReduceScatter(MakeCall(header_.groups[0], shard[p], DType::kFloat32,
                                              ShardMode::kView, p, 0, 1 + p),
                                     host)
                      .ok());
    }
    ASSERT_TRUE(zero.EndBackward(host).ok());
  }
};

TEST_F(ZeroIpgBucketTest, Stage12ReducesWhenTheNextGradientWouldOverflow) {
  ZeroIpgBucket zero(ZeroIpgBucket::Stage::kOneTwo, 1000, /*overlap_comm=*/false);
  ASSERT_TRUE(zero.Start(header_).ok());
  RecordingHost host;
  Backward(zero, host);
  // A: the IPG buffer (4000 B) at the first gradient of the first backward; A at 0 (300).
  // B: 300 + 500 = 800 <= 1000, at 300.
  // C: 800 + 400 > 1000: reduce the 800 filled (400 per rank), keep the partition (5600 B);
  //    C at 0 (400).
  // D: 400 + 1500 > 1000: reduce C (200 per rank); D (1500) > 1000 is reduced alone from a
  //    temporary of 1500 elements (6000 B): 750 per rank.
  // E: at 0 (100). End of backward: reduce E (50 per rank), release the IPG buffer.
  EXPECT_EQ(host.TakeLog(), (Log{"alloc bucket_data 4000 #0",
                                 "collective reduce_scatter group 1 in 800 out 400 requests 2",
                                 "alloc grad_shard 5600 #1",
                                 "collective reduce_scatter group 1 in 400 out 200 requests 1",
                                 "alloc rs_cat_temp 6000 #2",
                                 "collective reduce_scatter group 1 in 1500 out 750 requests 1",
                                 "free rs_cat_temp 6000 #2",
                                 "collective reduce_scatter group 1 in 100 out 50 requests 1",
                                 "free bucket_data 4000 #0"}));
  EXPECT_EQ(zero.counters().bypasses, 1u);
  EXPECT_EQ(zero.counters().flushes, 3u);
  // The second backward allocates the IPG buffer at backward(), before any gradient.
  ASSERT_TRUE(zero.BeginPhase(Phase::kBackward, host).ok());
  EXPECT_EQ(host.TakeLog(), (Log{"alloc bucket_data 4000 #3"}));
  EXPECT_EQ(host.live_bytes(), 5600u + 4000u);
}

TEST_F(ZeroIpgBucketTest, OverlapCommDoublesTheBufferAndAlternates) {
  ZeroIpgBucket zero(ZeroIpgBucket::Stage::kOneTwo, 1000, /*overlap_comm=*/true);
  ASSERT_TRUE(zero.Start(header_).ok());
  RecordingHost host;
  Backward(zero, host);
  const Log& log = host.log();
  ASSERT_GE(log.size(), 2u);
  EXPECT_EQ(log[0], "alloc bucket_data 4000 #0");
  EXPECT_EQ(log[1], "alloc bucket_data 4000 #1");
  // A, B into buffer 0; after the reduction C goes into buffer 1; after the next, E into 0.
  EXPECT_EQ(host.moves()[2], "reduce_scatter #0 -> #0 [0+300] [300+500]");
  EXPECT_EQ(host.moves()[3], "fill #1 rows 1 numel 400");
  EXPECT_EQ(host.moves()[4], "reduce_scatter #1 -> #1 [0+400]");
  EXPECT_EQ(host.moves()[7], "fill #0 rows 1 numel 100");
  // 2 x 4000 B + 5600 B + the 6000 B temporary at the peak; the buffers go at the end.
  EXPECT_EQ(host.peak_bytes(), 8000u + 5600u + 6000u);
  EXPECT_EQ(host.live_bytes(), 5600u);
}

TEST_F(ZeroIpgBucketTest, Stage3KeepsItsOneFlatBuffer) {
  ZeroIpgBucket zero(ZeroIpgBucket::Stage::kThree, 1000, /*overlap_comm=*/true);
  ASSERT_TRUE(zero.Start(header_).ok());
  RecordingHost host;
  Backward(zero, host);
  Backward(zero, host);
  // One 4000 B buffer (overlap_comm adds none in stage 3) and the 5600 B partition, both kept;
  // only the extra-large gradient's temporaries came and went.
  EXPECT_EQ(host.live_bytes(), 4000u + 5600u);
  EXPECT_EQ(host.live_bytes(Category::kBucketData), 4000u);
  EXPECT_EQ(host.collectives().size(), 8u);
}

}  // namespace
}  // namespace bucketsim
