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

TEST(SimBackend, ListsOnlyCollectivesUnlessAskedForEverySpanAndTimesTheIterationAlike) {
  // The same work with and without every span listed: the timing is the same figures, and
  // without every span the list keeps the collective alone.
  auto run = [](bool every) {
    TraceHeader header;
    header.streams = {{"default"}, {"post_backward"}};
    auto profile = std::make_shared<TimeProfile>();
    profile->reduce_scatter = {{2, 10.0, 1.0, {}}};  // alpha 10 µs: the collective outlasts 10 µs
    SimBackend sim(profile);
    sim.set_list_every_span(every);
    EXPECT_TRUE(sim.Start(header).ok());
    sim.Compute(0, 100);
    sim.WaitStream(1, 0);
    CollectiveRecord record;
    record.group_size = 2;
    record.input_numel = 1000;
    sim.Collective(record, {}, 1);  // [100, 100 + t)
    sim.Compute(0, 10);             // [100, 110): hides part of the collective
    Result<IterationSpans> spans = sim.EndIteration();
    EXPECT_TRUE(spans.ok());
    return *spans;
  };
  const IterationSpans every = run(true);
  const IterationSpans collectives = run(false);
  ASSERT_EQ(every.spans.size(), 3u);
  ASSERT_EQ(collectives.spans.size(), 1u);
  EXPECT_EQ(collectives.spans[0].kind, SpanKind::kCollective);
  EXPECT_DOUBLE_EQ(collectives.spans[0].end_us, every.spans[1].end_us);
  ASSERT_TRUE(collectives.timing.has_value());
  const IterationTiming summarized = SummarizeIteration(every, 0);
  const IterationTiming timed = *collectives.timing;
  EXPECT_GT(summarized.exposed_communication_us, 0);
  EXPECT_EQ(timed.iteration_us, summarized.iteration_us);
  EXPECT_EQ(timed.compute_us, summarized.compute_us);
  EXPECT_EQ(timed.communication_us, summarized.communication_us);
  EXPECT_EQ(timed.exposed_communication_us, summarized.exposed_communication_us);
}

}  // namespace
}  // namespace bucketsim
