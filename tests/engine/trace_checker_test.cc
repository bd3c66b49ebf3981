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

// An all_gather receives group-size x numel elements into a live allocation; an all_reduce
// sums numel of them in place.
TEST(TraceChecker, FrameworkCollectivesMustFitInALiveAllocation) {
  TraceBuilder fits = WithOneParam();
  fits.Alloc(1, 8000, Category::kAllGather)
      .Collective(EventKind::kAllGather, 1, 0, 1, DType::kFloat32, 1000)
      .Collective(EventKind::kAllReduce, 1, 0, 1, DType::kFloat32, 2000);
  EXPECT_TRUE(Check(fits).ok());

  TraceBuilder dead = WithOneParam();
  dead.Alloc(1, 8000, Category::kAllGather)
      .Free(1)
      .Collective(EventKind::kAllGather, 1, 0, 1, DType::kFloat32, 1000);
  ExpectInvalid(dead, "event 2: all_gather into id 1, which is not live");

  TraceBuilder beyond = WithOneParam();
  beyond.Alloc(1, 8000, Category::kAllGather)
      .Collective(EventKind::kAllGather, 1, 0, 1, DType::kFloat32, 1001);
  ExpectInvalid(beyond,
                "event 1: all_gather of 2 x 1001 fp32 elements into id 1, which holds 8000 bytes");
  TraceBuilder reduce = WithOneParam();
  reduce.Alloc(1, 8000, Category::kGrad)
      .Collective(EventKind::kAllReduce, 1, 0, 1, DType::kFloat64, 1001);
  ExpectInvalid(reduce,
                "event 1: all_reduce of 1 x 1001 fp64 elements into id 1, which holds 8000 bytes");
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

// Feeds events to a checker one by one, numbering them, as a reader would.
class Feeder {
 public:
  explicit Feeder(TraceChecker& checker) : checker_(checker) {
    header_.streams = {{"default"}};
    EXPECT_TRUE(header_.Finalize().ok());
    EXPECT_TRUE(checker_.OnHeader(header_).ok());
  }
  Status Feed(Event event) {
    event.index = next_++;
    return checker_.OnEvent(event);
  }
  EventIndex next() const { return next_; }

 private:
  TraceChecker& checker_;
  TraceHeader header_;
  EventIndex next_ = 0;
};

// 200000 allocations and frees with fresh ids: the checker keeps the live ids, the last 64
// frees and the ids ever allocated as two ranges (0.. and 1'000'000), not an entry per id.
TEST(TraceChecker, ForgetsFreedIdsSoItsMemoryIsBoundedByWhatIsLive) {
  TraceChecker checker(nullptr, CheckerMode::kReject, /*remembered_frees=*/64);
  Feeder feed(checker);
  ASSERT_TRUE(feed.Feed(AllocEvent(1'000'000, 512, Category::kParam, 0)).ok());  // lives on
  std::size_t most = 0;
  for (std::uint64_t id = 0; id < 100'000; ++id) {
    ASSERT_TRUE(feed.Feed(AllocEvent(id, 512, Category::kActivation, 0)).ok());
    ASSERT_TRUE(feed.Feed(FreeEvent(id)).ok());
    most = std::max(most, checker.remembered_ids());
  }
  // 1 live + at most 64 recent frees + 2 ranges of allocated ids.
  EXPECT_LE(most, 1u + 64u + 2u);
  EXPECT_EQ(checker.summary().max_live_allocations, 2u);
}

TEST(TraceChecker, NamesADoubleFreeOfAnIdItHasForgotten) {
  TraceChecker checker(nullptr, CheckerMode::kReject, 4);
  Feeder feed(checker);
  for (std::uint64_t id = 0; id < 10; ++id) {
    ASSERT_TRUE(feed.Feed(AllocEvent(id, 512, Category::kOther, 0)).ok());
  }
  for (std::uint64_t id = 0; id < 10; ++id) ASSERT_TRUE(feed.Feed(FreeEvent(id)).ok());
  // Id 9 is among the last 4 frees: its event is named. Id 0 was freed 10 frees ago.
  Status recent = feed.Feed(FreeEvent(9));
  EXPECT_EQ(recent.message(), "event 20: double free of id 9 (already freed at event 19)");
  TraceChecker again(nullptr, CheckerMode::kReject, 4);
  Feeder feed_again(again);
  for (std::uint64_t id = 0; id < 10; ++id) {
    ASSERT_TRUE(feed_again.Feed(AllocEvent(id, 512, Category::kOther, 0)).ok());
  }
  for (std::uint64_t id = 0; id < 10; ++id) ASSERT_TRUE(feed_again.Feed(FreeEvent(id)).ok());
  Status old = feed_again.Feed(FreeEvent(0));
  EXPECT_EQ(old.code(), StatusCode::kInvalidTrace);
  EXPECT_EQ(old.message(),
            "event 20: double free of id 0 (already freed, more than 4 frees before)");
}

TEST(TraceChecker, StillRejectsAFreeOfAnIdNeverAllocatedAfterForgetting) {
  TraceChecker checker(nullptr, CheckerMode::kReject, 2);
  Feeder feed(checker);
  for (std::uint64_t id = 0; id < 10; id += 2) {  // even ids only
    ASSERT_TRUE(feed.Feed(AllocEvent(id, 512, Category::kOther, 0)).ok());
    ASSERT_TRUE(feed.Feed(FreeEvent(id)).ok());
  }
  Status status = feed.Feed(FreeEvent(3));
  EXPECT_EQ(status.message(), "event 10: free of unknown allocation id 3");
}

// Imported traces use block addresses as ids: an id comes back after it was freed and
// forgotten, and only its newest life counts.
TEST(TraceChecker, AnIdAllocatedAgainAfterItWasForgottenIsLiveAgain) {
  TraceChecker checker(nullptr, CheckerMode::kReject, 1);
  Feeder feed(checker);
  for (std::uint64_t id : {5, 6, 7, 8}) {
    ASSERT_TRUE(feed.Feed(AllocEvent(id, 512, Category::kOther, 0)).ok());
  }
  for (std::uint64_t id : {5, 6, 7, 8}) ASSERT_TRUE(feed.Feed(FreeEvent(id)).ok());
  ASSERT_TRUE(feed.Feed(AllocEvent(6, 1024, Category::kOther, 0)).ok());  // event 8
  Status live_again = feed.Feed(AllocEvent(6, 1024, Category::kOther, 0));
  EXPECT_EQ(live_again.message(),
            "event 9: alloc of id 6, which is already live (allocated at event 8)");
  ASSERT_TRUE(feed.Feed(FreeEvent(6)).ok());  // event 10
  EXPECT_EQ(feed.Feed(FreeEvent(6)).message(),
            "event 11: double free of id 6 (already freed at event 10)");
  // 5 was freed and forgotten, and never allocated again: still a double free.
  EXPECT_EQ(feed.Feed(FreeEvent(5)).message(),
            "event 12: double free of id 5 (already freed, more than 1 frees before)");
}

TEST(TraceChecker, ReportModeCountsDoubleFreesOfForgottenIds) {
  TraceChecker checker(nullptr, CheckerMode::kReport, 1);
  Feeder feed(checker);
  for (std::uint64_t id : {1, 2, 3}) {
    ASSERT_TRUE(feed.Feed(AllocEvent(id, 512, Category::kOther, 0)).ok());
  }
  for (std::uint64_t id : {1, 2, 3}) ASSERT_TRUE(feed.Feed(FreeEvent(id)).ok());
  for (std::uint64_t id : {1, 2, 3, 4}) ASSERT_TRUE(feed.Feed(FreeEvent(id)).ok());
  ASSERT_TRUE(checker.OnEnd().ok());
  const auto& found = checker.summary().inconsistencies;
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].kind, Inconsistency::kDoubleFree);
  EXPECT_EQ(found[0].count, 3u);
  EXPECT_EQ(found[0].first_events, (std::vector<EventIndex>{6, 7, 8}));
  EXPECT_EQ(found[1].kind, Inconsistency::kFreeOfUnknownId);
  EXPECT_EQ(found[1].count, 1u);
}

}  // namespace
}  // namespace bucketsim
