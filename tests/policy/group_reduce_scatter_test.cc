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
  // f0 (complete at p0; p1 came first, so p1 is columns [0, 50), p0 [50, 200)): input
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
  EXPECT_EQ(host.moves()[4], "fill #4 rows 2 numel 50 at 0 stride 200");
  EXPECT_EQ(host.moves()[5], "fill #4 rows 2 numel 150 at 50 stride 200");
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

}  // namespace
}  // namespace bucketsim
