// Megatron-Core's contiguous grad buffer (policy/megatron_grad_buffer.h): the layout (reverse
// order, 64-element parameter starts, bucket ends at lcm(dp, 128)), bucket_size only with
// overlap_grad_reduce, in-place reduce-scatter or all-reduce. Every element is derived below.
#include "policy/megatron_grad_buffer.h"

#include <gtest/gtest.h>

#include "framework_policy_fixture.h"

namespace bucketsim {
namespace {

using testing::MakeCall;
using testing::ModelHeader;
using testing::RecordingHost;
using Log = std::vector<std::string>;

TEST(LayOutMegatronBuffer, PadsParamStartsTo64AndBucketEndsToLcmOfDpAnd128) {
  // Buffer order C 1000, B 200, A 100; dp 2, bucket_size 1000, distributed optimizer, overlap.
  // C [0, 1000): 1000 - 0 >= 1000 closes bucket 0 at pad(1000, lcm(2, 128) = 128) = 1024.
  // B starts at pad(1024, 64) = 1024, ends 1224; A starts at pad(1224, 64) = 1280, ends 1380;
  // the last bucket ends at pad(1380, 128) = 1408.
  MegatronLayout layout = LayOutMegatronBuffer({1000, 200, 100}, 2, {1000, true, true, false});
  EXPECT_EQ(layout.param_start, (std::vector<Numel>{0, 1024, 1280}));
  ASSERT_EQ(layout.buckets.size(), 2u);
  EXPECT_EQ(layout.buckets[0].end, 1024u);
  EXPECT_EQ(layout.buckets[1].start, 1024u);
  EXPECT_EQ(layout.buckets[1].end, 1408u);
  EXPECT_EQ(layout.numel, 1408u);
}

TEST(LayOutMegatronBuffer, HighBusbwPaddingUsesLcmWith65536) {
  // lcm(2, 128, 65536) = 65536: one bucket (no overlap) of 1300 elements ends at 65536.
  MegatronLayout layout =
      LayOutMegatronBuffer({1000, 200, 100}, 2, {std::nullopt, true, false, true});
  ASSERT_EQ(layout.buckets.size(), 1u);
  EXPECT_EQ(layout.numel, 65'536u);
}

TEST(LayOutMegatronBuffer, NoPaddingWithoutTheDistributedOptimizer) {
  MegatronLayout layout = LayOutMegatronBuffer({1000, 200, 100}, 2, {1000, false, true, false});
  EXPECT_EQ(layout.param_start, (std::vector<Numel>{0, 1000, 1200}));
  EXPECT_EQ(layout.numel, 1300u);
}

TEST(LayOutMegatronBuffer, DefaultBucketSizeIsMax40MAnd1MTimesDp) {
  // 30M + 15M params, dp 64: bucket_size max(40M, 64M) = 64M holds both.
  MegatronLayout layout =
      LayOutMegatronBuffer({30'000'000, 15'000'000}, 64, {std::nullopt, true, true, false});
  EXPECT_EQ(layout.buckets.size(), 1u);
  // dp 8: 40M; 30M < 40M, 45M >= 40M closes one bucket with both.
  EXPECT_EQ(LayOutMegatronBuffer({30'000'000, 15'000'000, 1}, 8, {std::nullopt, true, true, false})
                .buckets.size(),
            2u);
}

// Model order A 100, B 200, C 1000 (fp32); backward produces C, B, A (events 7, 8, 9).
class MegatronGradBufferTest : public ::testing::Test {
 protected:
  TraceHeader header_ = ModelHeader({{100, 200, 1000}});
  void Backward(MegatronGradBuffer& megatron, RecordingHost& host) {
    for (std::uint32_t p = 3; p-- > 0;) {
      ASSERT_TRUE(megatron
                      .ReduceScatter(MakeCall(header_.groups[0], 1, DType::kFloat32,
                                              ShardMode::kView, p, 0, 9 - p),
                                     host)
                      .ok());
    }
    ASSERT_TRUE(megatron.EndBackward(host).ok());
  }
};

TEST_F(MegatronGradBufferTest, OverlapReducesEachBucketInPlaceWhenItIsComplete) {
  MegatronGradBuffer megatron({1000, true, true, false});
  ASSERT_TRUE(megatron.Start(header_).ok());
  RecordingHost host;
  Backward(megatron, host);
  // The buffer: 1408 elements (layout above) = 5632 B, kept. Bucket 0 (C) is complete at once:
  // 1024 elements, 512 per rank; bucket 1 (B, A) after A: [1024, 1408), 384 elements.
  EXPECT_EQ(host.TakeLog(), (Log{"alloc bucket_data 5632 #0",
                                 "collective reduce_scatter group 1 in 1024 out 512 requests 1",
                                 "collective reduce_scatter group 1 in 384 out 192 requests 2"}));
  EXPECT_EQ(host.moves()[1], "reduce_scatter #0 -> #0 [0+1000]");
  // Slices are relative to the bucket: B at 1024 - 1024 = 0, A at 1280 - 1024 = 256.
  EXPECT_EQ(host.moves()[4], "reduce_scatter #0+1024 -> #0 [0+200] [256+100]");
  Backward(megatron, host);
  EXPECT_EQ(host.live_bytes(), 5632u);
}

TEST_F(MegatronGradBufferTest, WithoutOverlapOneBucketIsReducedAtTheEnd) {
  MegatronGradBuffer megatron({std::nullopt, true, false, false});
  ASSERT_TRUE(megatron.Start(header_).ok());
  RecordingHost host;
  Backward(megatron, host);
  // One bucket: C [0, 1000), B [1024, 1224), A [1280, 1380), end pad(1380, 128) = 1408.
  EXPECT_EQ(host.TakeLog(), (Log{"alloc bucket_data 5632 #0",
                                 "collective reduce_scatter group 1 in 1408 out 704 requests 3"}));
}

TEST_F(MegatronGradBufferTest, AllReducesWithoutTheDistributedOptimizer) {
  MegatronGradBuffer megatron({std::nullopt, false, false, false});
  ASSERT_TRUE(megatron.Start(header_).ok());
  RecordingHost host;
  Backward(megatron, host);
  // No padding: 1300 elements = 5200 B, all-reduced whole.
  EXPECT_EQ(host.TakeLog(), (Log{"alloc bucket_data 5200 #0",
                                 "collective all_reduce group 1 in 1300 out 1300 requests 3"}));
}

}  // namespace
}  // namespace bucketsim
