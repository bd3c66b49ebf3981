// FSDP2's per-group reduce-scatter and the hold-until-end pattern
// (policy/group_reduce_scatter.h): one collective per FSDP instance once all its gradients are
// in, the (group size x columns) input, the in-flight limit, outputs held to the end of
// backward. Every byte below is derived in the comments.
#include "policy/group_reduce_scatter.h"

#include <gtest/gtest.h>

#include "framework_policy_fixture.h"

namespace bucketsim {
namespace {

using testing::MakeCall;
using testing::ModelHeader;
using testing::RecordingHost;
using Log = std::vector<std::string>;

// Instances: f0 {p0, p1}, f1 {p0}, f2 {p0}. Backward (per-rank fp32 numel, events 1..4):
// f2.p0 100, f1.p0 300, f0.p1 50, f0.p0 150. Group size 2.
class GroupReduceScatterTest : public ::testing::Test {
 protected:
  TraceHeader header_ = ModelHeader({{300, 100}, {600}, {200}});
  void Backward(GroupReduceScatter& policy, RecordingHost& host) {
    struct Request {
      std::uint32_t fsdp, param;
      Numel numel;
    };
    const Request requests[] = {{2, 0, 100}, {1, 0, 300}, {0, 1, 50}, {0, 0, 150}};
    EventIndex index = 1;
    for (const Request& r : requests) {
      ASSERT_TRUE(policy
                      .ReduceScatter(MakeCall(header_.groups[0], r.numel, DType::kFloat32,
                                              ShardMode::kView, r.param, r.fsdp, index++),
                                     host)
                      .ok());
    }
    ASSERT_TRUE(policy.EndBackward(host).ok());
  }
};

TEST_F(GroupReduceScatterTest, OneInputInFlightIsDroppedBeforeTheNextCopyIn) {
  GroupReduceScatter fsdp2(/*inflight=*/1);
  ASSERT_TRUE(fsdp2.Start(header_).ok());
  RecordingHost host;
  Backward(fsdp2, host);
  // f2: input 2 x 100 x 4 = 800 B, output 100 x 4 = 400 B, reduce-scatter 200 -> 100.
  // f1: the previous input goes first; input 2400 B, output 1200 B.
  // f0 (its input at p1, the first to come; its output at p0, the last; chunk_cat lays the
  //     gradients out in parameter order: p0 is columns [0, 150), p1 [150, 200)): input
  //     2 x 200 x 4 = 1600 B, output 800 B.
  // End of backward: the last input goes; the outputs are released to the gradient views.
  EXPECT_EQ(
      host.TakeLog(),
      (Log{"alloc bucket_data 800 #0", "alloc bucket_output 400 #1",
           "collective bucket_flush group 1 in 200 out 100 requests 1", "deliver param 0 from #1",
           "free bucket_data 800 #0", "alloc bucket_data 2400 #2", "alloc bucket_output 1200 #3",
           "collective bucket_flush group 1 in 600 out 300 requests 1", "deliver param 0 from #3",
           "free bucket_data 2400 #2", "alloc bucket_data 1600 #4", "alloc bucket_output 800 #5",
           "collective bucket_flush group 1 in 400 out 200 requests 2", "deliver param 1 from #5",
           "deliver param 0 from #5", "free bucket_data 1600 #4", "release #1 (kept by 1 view(s))",
           "release #3 (kept by 1 view(s))", "release #5 (kept by 2 view(s))"}));
  EXPECT_EQ(host.moves()[4], "fill #4 rows 2 numel 50 at 150 stride 200");
  EXPECT_EQ(host.moves()[5], "fill #4 rows 2 numel 150 at 0 stride 200");
  // Peak: after f1's allocations (400 + 2400 + 1200) or f0's (400 + 1200 + 1600 + 800): 4000.
  EXPECT_EQ(host.peak_bytes(), 4000u);
}

TEST_F(GroupReduceScatterTest, TwoInputsInFlightKeepThePreviousGroupsInput) {
  GroupReduceScatter fsdp2(/*inflight=*/2);
  ASSERT_TRUE(fsdp2.Start(header_).ok());
  RecordingHost host;
  Backward(fsdp2, host);
  // f0's copy-in drops only f2's input: 400 + 2400 + 1200 + 1600 + 800 = 6400 B at the peak.
  EXPECT_EQ(host.peak_bytes(), 6400u);
}

TEST_F(GroupReduceScatterTest, HoldUntilEndKeepsEveryInput) {
  GroupReduceScatter hold(/*inflight=*/0);
  ASSERT_TRUE(hold.Start(header_).ok());
  RecordingHost host;
  Backward(hold, host);
  // Every input and output alive at the end: 800 + 400 + 2400 + 1200 + 1600 + 800.
  EXPECT_EQ(host.peak_bytes(), 7200u);
  // Then only the outputs the gradients view remain.
  EXPECT_EQ(host.live_bytes(), 400u + 1200u + 800u);
}

// foreach_reduce allocates the input, copies the gradients in and frees them, then allocates
// the output: the input comes with the group's first request (sized from the header: every
// parameter of the group), the output with its last, so that the emitter's frees of the
// unsharded gradients fall between them.
TEST_F(GroupReduceScatterTest, InputComesWithTheFirstRequestOutputWithTheLast) {
  GroupReduceScatter fsdp2(/*inflight=*/1);
  ASSERT_TRUE(fsdp2.Start(header_).ok());
  RecordingHost host;
  const ProcessGroup& group = header_.groups[0];
  ASSERT_TRUE(
      fsdp2.ReduceScatter(MakeCall(group, 150, DType::kFloat32, ShardMode::kView, 0, 0, 1), host)
          .ok());
  // f0: columns 150 + 50: input 2 x 200 x 4 = 1600 B, nothing else yet.
  EXPECT_EQ(host.TakeLog(), (Log{"alloc bucket_data 1600 #0"}));
  ASSERT_TRUE(
      fsdp2.ReduceScatter(MakeCall(group, 50, DType::kFloat32, ShardMode::kView, 1, 0, 2), host)
          .ok());
  EXPECT_EQ(host.TakeLog(), (Log{"alloc bucket_output 800 #1",
                                 "collective bucket_flush group 1 in 400 out 200 requests 2",
                                 "deliver param 0 from #1", "deliver param 1 from #1"}));
}

// reduce_dtype bf16 with fp32 parameters: the bf16 output is cast to fp32 as one tensor
// (_to_dtype_if_needed(reduce_output, orig_dtype)), which the sharded gradients view; the bf16
// output has no reference left and goes at once; the input stays in flight.
TEST_F(GroupReduceScatterTest, CastOutputIsOneFp32TensorAndTheOutputGoesAtOnce) {
  GroupReduceScatter fsdp2(/*inflight=*/1);
  ASSERT_TRUE(fsdp2.Start(header_).ok());
  RecordingHost host;
  const ProcessGroup& group = header_.groups[0];
  for (std::uint32_t p : {0u, 1u}) {
    ReduceScatterCall call =
        MakeCall(group, p == 0 ? 150 : 50, DType::kBFloat16, ShardMode::kCast, p, 0, p + 1);
    call.event.cast_dtype = DType::kFloat32;
    ASSERT_TRUE(fsdp2.ReduceScatter(call, host).ok());
  }
  // Input 2 x 200 x 2 = 800 B, output 200 x 2 = 400 B, the fp32 gradients 200 x 4 = 800 B.
  EXPECT_EQ(host.TakeLog(),
            (Log{"alloc bucket_data 800 #0", "alloc bucket_output 400 #1",
                 "collective bucket_flush group 1 in 400 out 200 requests 2",
                 "alloc grad_shard 800 #2", "deliver param 0 from #2", "deliver param 1 from #2",
                 "release #2 (kept by 2 view(s))", "free bucket_output 400 #1"}));
  ASSERT_TRUE(fsdp2.EndBackward(host).ok());
  EXPECT_EQ(host.TakeLog(), (Log{"free bucket_data 800 #0"}));
}

// CPUOffloadPolicy: each sharded gradient is copied to the CPU (new_sharded_grad.to("cpu")),
// so nothing views the output, which goes once delivered instead of at the end of backward.
TEST_F(GroupReduceScatterTest, OffloadedGradientsLeaveNothingOfTheOutputOnTheDevice) {
  GroupReduceScatter fsdp2(/*inflight=*/1);
  ASSERT_TRUE(fsdp2.Start(header_).ok());
  RecordingHost host;
  const ProcessGroup& group = header_.groups[0];
  for (std::uint32_t p : {0u, 1u}) {
    ASSERT_TRUE(fsdp2
                    .ReduceScatter(MakeCall(group, p == 0 ? 150 : 50, DType::kFloat32,
                                            ShardMode::kOffload, p, 0, p + 1),
                                   host)
                    .ok());
  }
  EXPECT_EQ(host.TakeLog(), (Log{"alloc bucket_data 1600 #0", "alloc bucket_output 800 #1",
                                 "collective bucket_flush group 1 in 400 out 200 requests 2",
                                 "deliver param 0 from #1", "deliver param 1 from #1",
                                 "free bucket_output 800 #1"}));
  ASSERT_TRUE(fsdp2.EndBackward(host).ok());
  EXPECT_EQ(host.TakeLog(), (Log{"free bucket_data 1600 #0"}));
}

// f0.p1 got no gradient (shard "no_grad", first): the input is p0's 150 columns alone, 2 x 150 x
// 4 = 1200 B, p0 at column 0, and the group is complete with p0's request. f1, whose only
// parameter got none, is not reduced at all and leaves f0's input in flight.
TEST_F(GroupReduceScatterTest, ParametersWithoutAGradientAreLeftOut) {
  GroupReduceScatter fsdp2(/*inflight=*/1);
  ASSERT_TRUE(fsdp2.Start(header_).ok());
  RecordingHost host;
  const ProcessGroup& group = header_.groups[0];
  ASSERT_TRUE(
      fsdp2.ReduceScatter(MakeCall(group, 50, DType::kFloat32, ShardMode::kNoGrad, 1, 0, 1), host)
          .ok());
  EXPECT_EQ(host.TakeLog(), Log{});
  ASSERT_TRUE(
      fsdp2.ReduceScatter(MakeCall(group, 150, DType::kFloat32, ShardMode::kView, 0, 0, 2), host)
          .ok());
  EXPECT_EQ(host.TakeLog(), (Log{"alloc bucket_data 1200 #0", "alloc bucket_output 600 #1",
                                 "collective bucket_flush group 1 in 300 out 150 requests 1",
                                 "deliver param 0 from #1"}));
  EXPECT_EQ(host.moves()[0], "fill #0 rows 2 numel 150 at 0 stride 150");
  ASSERT_TRUE(
      fsdp2.ReduceScatter(MakeCall(group, 300, DType::kFloat32, ShardMode::kNoGrad, 0, 1, 3), host)
          .ok());
  EXPECT_EQ(host.TakeLog(), Log{});
  ASSERT_TRUE(fsdp2.EndBackward(host).ok());
  EXPECT_EQ(host.TakeLog(), (Log{"free bucket_data 1200 #0", "release #1 (kept by 1 view(s))"}));
  EXPECT_EQ(fsdp2.counters().buckets, 1u);
  // The next backward's group is whole again: 2 x 200 x 4 = 1600 B.
  ASSERT_TRUE(
      fsdp2.ReduceScatter(MakeCall(group, 150, DType::kFloat32, ShardMode::kView, 0, 0, 4), host)
          .ok());
  EXPECT_EQ(host.TakeLog(), (Log{"alloc bucket_data 1600 #2"}));
}

// A no_grad request after one of its group with a gradient comes too late: the input is sized.
TEST_F(GroupReduceScatterTest, ANoGradRequestAfterTheGroupsFirstIsAnError) {
  GroupReduceScatter fsdp2(/*inflight=*/1);
  ASSERT_TRUE(fsdp2.Start(header_).ok());
  RecordingHost host;
  const ProcessGroup& group = header_.groups[0];
  ASSERT_TRUE(
      fsdp2.ReduceScatter(MakeCall(group, 150, DType::kFloat32, ShardMode::kView, 0, 0, 1), host)
          .ok());
  EXPECT_EQ(
      fsdp2.ReduceScatter(MakeCall(group, 50, DType::kFloat32, ShardMode::kNoGrad, 1, 0, 2), host)
          .message(),
      "event 2: rs: shard 'no_grad' for fsdp 0 param 1 after a request of its group with a "
      "gradient (event 1): fsdp2 sizes a group's reduce-scatter input at its first request, so "
      "the parameters without a gradient come first");
}

}  // namespace
}  // namespace bucketsim
