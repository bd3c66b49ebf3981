#include "backend/sim/sim_backend.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(SimBackend, WaitMovesTheWaitingStreamToTheProducersClock) {
  TraceHeader header;
  header.streams = {{"default"}, {"post_backward"}};
  SimBackend sim;
  ASSERT_TRUE(sim.Start(header).ok());
  sim.Compute(0, 100);
  sim.WaitStream(1, 0);  // post_backward waits for the gradient's producer
  sim.Compute(1, 30);    // [100, 130)
  sim.Compute(0, 10);    // [100, 110): the compute stream did not wait
  sim.WaitStream(0, 1);  // the final flush: the default stream waits -> 130
  sim.Compute(0, 5);     // [130, 135)
  Result<IterationSpans> spans = sim.EndIteration();
  ASSERT_TRUE(spans.ok());
  EXPECT_DOUBLE_EQ(spans->end_us, 135);
  ASSERT_EQ(spans->spans.size(), 4u);
  EXPECT_DOUBLE_EQ(spans->spans[1].start_us, 100);
  EXPECT_DOUBLE_EQ(spans->spans[3].start_us, 130);
  // The next iteration starts where every stream ended.
  sim.Compute(1, 1);
  Result<IterationSpans> next = sim.EndIteration();
  ASSERT_TRUE(next.ok());
  EXPECT_DOUBLE_EQ(next->start_us, 135);
  EXPECT_DOUBLE_EQ(next->end_us, 136);
}

}  // namespace
}  // namespace bucketsim
