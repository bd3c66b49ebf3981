// Consistency rules that need memory of earlier events: each gives a message with the event
// index and the reason, and stops the replay.
#include "engine/trace_checker.h"

#include <gtest/gtest.h>

#include "testing/trace_builder.h"

namespace bucketsim {
namespace {

using testing::TraceBuilder;

Status Check(const TraceBuilder& t) {
  TraceHeader header;
  TraceChecker checker(nullptr);
  return t.Source()(header, checker);
}

void ExpectInvalid(const TraceBuilder& t, const std::string& fragment) {
  Status status = Check(t);
  ASSERT_FALSE(status.ok()) << "expected: " << fragment;
  EXPECT_EQ(status.code(), StatusCode::kInvalidTrace);
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

TraceBuilder WithOneParam() {
  TraceBuilder t(2);
  t.Group(1, {0, 1}).Fsdp("layer", {{"w", 2000, DType::kFloat32}});
  return t;
}

TEST(TraceChecker, AcceptsAConsistentTraceAndSummarisesIt) {
  TraceBuilder t = WithOneParam();
  t.Alloc(1, 100, Category::kParam).Iteration(0).Phase(Phase::kForward);
  t.Alloc(2, 50, Category::kActivation).Phase(Phase::kBackward).Free(2);
  t.Rs(0, 0, 1, DType::kFloat32, 1000).Flush().Phase(Phase::kStep).ZeroGrad();
  TraceHeader header;
  TraceChecker checker(nullptr);
  ASSERT_TRUE(t.Source()(header, checker).ok());
  const TraceSummary& s = checker.summary();
  EXPECT_EQ(s.events, 10u);
  EXPECT_EQ(s.iterations, 1u);
  EXPECT_EQ(s.max_live_bytes, 150u);
  EXPECT_EQ(s.alive_at_end_bytes[static_cast<int>(Category::kParam)], 100u);
  EXPECT_EQ(s.alive_at_end_count[static_cast<int>(Category::kActivation)], 0u);
}

TEST(TraceChecker, RejectsFreeOfUnknownId) {
  TraceBuilder t(1);
  t.Alloc(1, 100, Category::kOther).Free(7);
  ExpectInvalid(t, "event 1: free of unknown allocation id 7");
}

TEST(TraceChecker, RejectsDoubleFree) {
  TraceBuilder t(1);
  t.Alloc(1, 100, Category::kOther).Free(1).Free(1);
  ExpectInvalid(t, "event 2: double free of id 1 (already freed at event 1)");
}

TEST(TraceChecker, AllowsAnIdAgainAfterItWasFreed) {
  TraceBuilder t(1);
  t.Alloc(1, 100, Category::kOther).Free(1).Alloc(1, 200, Category::kOther).Free(1);
  EXPECT_TRUE(Check(t).ok());
}

TEST(TraceChecker, RejectsAllocOfALiveId) {
  TraceBuilder t(1);
  t.Alloc(1, 100, Category::kOther).Alloc(1, 100, Category::kOther);
  ExpectInvalid(t, "event 1: alloc of id 1, which is already live (allocated at event 0)");
}

TEST(TraceChecker, RejectsReduceScatterOutsideBackward) {
  TraceBuilder t = WithOneParam();
  t.Phase(Phase::kForward).Rs(0, 0, 1, DType::kFloat32, 1000);
  ExpectInvalid(t, "event 1: rs outside backward (phase is 'forward')");
}

TEST(TraceChecker, RejectsFlushOutsideBackward) {
  TraceBuilder t = WithOneParam();
  t.Phase(Phase::kStep).Flush();
  ExpectInvalid(t, "event 1: flush outside backward (phase is 'step')");
}

TEST(TraceChecker, RejectsABackwardThatIsNeverFlushed) {
  TraceBuilder t = WithOneParam();
  t.Phase(Phase::kBackward).Rs(0, 0, 1, DType::kFloat32, 1000).Phase(Phase::kStep);
  ExpectInvalid(t, "event 2: phase 'step' begins while 1 reduce-scatter request(s) since event 1");
  TraceBuilder at_end = WithOneParam();
  at_end.Phase(Phase::kBackward).Rs(0, 0, 1, DType::kFloat32, 1000);
  ExpectInvalid(at_end, "the trace ends with 1 reduce-scatter request(s) since event 1");
}

TEST(TraceChecker, RejectsAViewIntoAParameterThatStillHoldsAGradient) {
  TraceBuilder t = WithOneParam();
  t.Phase(Phase::kBackward).Rs(0, 0, 1, DType::kFloat32, 1000).Flush();
  t.ZeroGrad(false).Phase(Phase::kBackward).Rs(0, 0, 1, DType::kFloat32, 1000);
  ExpectInvalid(t, "event 5: rs: shard 'view' for fsdp 0 param 0, which still holds");
  TraceBuilder cleared = WithOneParam();
  cleared.Phase(Phase::kBackward).Rs(0, 0, 1, DType::kFloat32, 1000).Flush();
  cleared.ZeroGrad(true).Phase(Phase::kBackward).Rs(0, 0, 1, DType::kFloat32, 1000).Flush();
  EXPECT_TRUE(Check(cleared).ok());
}

TEST(TraceChecker, RejectsZeroGradBeforeTheFlush) {
  TraceBuilder t = WithOneParam();
  t.Phase(Phase::kBackward).Rs(0, 0, 1, DType::kFloat32, 1000).ZeroGrad().Flush();
  ExpectInvalid(t, "event 2: zero_grad while 1 reduce-scatter request(s) since event 1");
}

TEST(TraceChecker, RejectsIterationsOutOfOrder) {
  TraceBuilder t(1);
  t.Iteration(1).Iteration(1);
  ExpectInvalid(t, "event 1: iteration 1 does not follow iteration 1");
}

}  // namespace
}  // namespace bucketsim
