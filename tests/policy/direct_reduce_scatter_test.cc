// PyTorch FSDP1's direct reduce-scatter (policy/direct_reduce_scatter.h): each unit's padded
// unsharded gradient reduced on its own into a fresh shard, the gradient itself the input
// (staged, never charged), the shard kept as a view or cast. Every byte below is derived in the
// comments.
#include "policy/direct_reduce_scatter.h"

#include <gtest/gtest.h>

#include "framework_policy_fixture.h"

namespace bucketsim {
namespace {

using testing::MakeCall;
using testing::ModelHeader;
using testing::RecordingHost;
using Log = std::vector<std::string>;

// Two units of one flat parameter each, group size 2: f1 (shard 300 elements) reduced first,
// then f0 (shard 100), in backward order.
TEST(DirectReduceScatter, ReducesEachUnitIntoAFreshShardReadingTheGradientInPlace) {
  const TraceHeader header = ModelHeader({{200}, {600}});
  DirectReduceScatter fsdp1;
  ASSERT_TRUE(fsdp1.Start(header).ok());
  RecordingHost host;
  ASSERT_TRUE(
      fsdp1
          .ReduceScatter(
              MakeCall(header.groups[0], 300, DType::kFloat32, ShardMode::kView, 0, 1, 1), host)
          .ok());
  ASSERT_TRUE(
      fsdp1
          .ReduceScatter(
              MakeCall(header.groups[0], 100, DType::kFloat32, ShardMode::kView, 0, 0, 2), host)
          .ok());
  ASSERT_TRUE(fsdp1.EndBackward(host).ok());
  // f1: new_sharded_grad 300 x 4 = 1200 B; the 600-element gradient staged (2400 B, the
  // trace's); reduce_scatter_tensor 600 -> 300; the shard kept as the gradient (a view).
  // f0: 400 B, staged 800 B, 200 -> 100.
  EXPECT_EQ(host.TakeLog(),
            (Log{"alloc bypass_output 1200 #0", "stage 2400 #1",
                 "collective reduce_scatter group 1 in 600 out 300 requests 1", "unstage #1",
                 "deliver param 0 from #0", "release #0 (kept by 1 view(s))",
                 "alloc bypass_output 400 #2", "stage 800 #3",
                 "collective reduce_scatter group 1 in 200 out 100 requests 1", "unstage #3",
                 "deliver param 0 from #2", "release #2 (kept by 1 view(s))"}));
  EXPECT_EQ(host.moves()[0], "fill #1 rows 1 numel 600");
  // Only the shards count: 1200 + 400.
  EXPECT_EQ(host.peak_bytes(), 1600u);
  EXPECT_EQ(fsdp1.counters().bypasses, 2u);
  host.DropGradients();
  EXPECT_EQ(host.live_bytes(), 0u);
}

// Reduced in bf16 (MixedPrecision(param_dtype=bf16)): the bf16 shard is cast to the fp32
// parameter dtype (_cast_grad_to_param_dtype), a new tensor, and the bf16 one goes with the hook.
TEST(DirectReduceScatter, CastsABf16ShardToTheParameterDtype) {
  const TraceHeader header = ModelHeader({{512}});
  DirectReduceScatter fsdp1;
  ASSERT_TRUE(fsdp1.Start(header).ok());
  RecordingHost host;
  ASSERT_TRUE(
      fsdp1
          .ReduceScatter(
              MakeCall(header.groups[0], 256, DType::kBFloat16, ShardMode::kCast, 0, 0, 1), host)
          .ok());
  // 256 x 2 = 512 B output, staged 2 x 256 x 2 = 1024 B, cast 256 x 4 = 1024 B.
  EXPECT_EQ(host.TakeLog(),
            (Log{"alloc bypass_output 512 #0", "stage 1024 #1",
                 "collective reduce_scatter group 1 in 512 out 256 requests 1", "unstage #1",
                 "deliver param 0 from #0", "free bypass_output 512 #0"}));
  EXPECT_EQ(host.live_bytes(), 0u);  // RecordingHost does not allocate the cast itself
}

}  // namespace
}  // namespace bucketsim
