#include "backend/cuda/stream_plan.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(StreamPlan, EveryTraceStreamGetsItsOwnCudaStream) {
  TraceHeader header;
  header.streams = {{"default"}, {"all_gather"}, {"post_backward"}};
  ASSERT_TRUE(header.Finalize().ok());
  StreamPlan plan = StreamPlan::ForTrace(header);
  EXPECT_EQ(plan.streams(), 3);
  EXPECT_EQ(plan.compute_slot(), 0);
  EXPECT_EQ(plan.post_backward_slot(), 2);
  EXPECT_EQ(plan.name(1), "all_gather");
  EXPECT_EQ(*plan.Slot(2), 2);
}

TEST(StreamPlan, WithoutAPostBackwardStreamThePolicyRunsOnTheDefaultStream) {
  TraceHeader header;
  ASSERT_TRUE(header.Finalize().ok());  // names no stream: one, "default"
  StreamPlan plan = StreamPlan::ForTrace(header);
  EXPECT_EQ(plan.streams(), 1);
  EXPECT_EQ(plan.post_backward_slot(), 0);
}

TEST(StreamPlan, UnknownStreamIsAnError) {
  TraceHeader header;
  header.streams = {{"default"}, {"post_backward"}};
  ASSERT_TRUE(header.Finalize().ok());
  Result<int> slot = StreamPlan::ForTrace(header).Slot(2);
  ASSERT_FALSE(slot.ok());
  EXPECT_EQ(slot.status().message(), "stream 2 is not among the trace's 2 streams");
}

}  // namespace
}  // namespace bucketsim
