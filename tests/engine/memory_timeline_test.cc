#include "engine/memory_timeline.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(MemoryTimeline, KeepsEveryEventWhileUnderTheBound) {
  MemoryTimeline timeline(8);
  for (EventIndex e = 0; e < 5; ++e) timeline.Enter(e, 100 * e, 200 * e);
  const MemoryTimelineData& data = timeline.data();
  EXPECT_EQ(data.span_events, 1u);
  ASSERT_EQ(data.points.size(), 5u);
  EXPECT_EQ(data.points[3].first_event, 3u);
  EXPECT_EQ(data.points[3].allocated_bytes, 300u);
  EXPECT_EQ(data.points[3].reserved_bytes, 600u);
}

TEST(MemoryTimeline, ChargesInsideAnEventRaiseItsPoint) {
  MemoryTimeline timeline(8);
  timeline.Enter(0, 10, 10);
  timeline.Observe(50, 64);  // a temporary allocated and freed within event 0
  timeline.Enter(1, 10, 64);
  EXPECT_EQ(timeline.data().points[0].allocated_bytes, 50u);
  EXPECT_EQ(timeline.data().points[0].reserved_bytes, 64u);
  EXPECT_EQ(timeline.data().points[1].allocated_bytes, 10u);
}

TEST(MemoryTimeline, HalvingDoublesTheSpanAndKeepsTheMaxima) {
  MemoryTimeline timeline(4);
  // Values 1, 9, 2, 3, 7, 4: the bound of 4 points forces spans of 2 events.
  const Bytes values[] = {1, 9, 2, 3, 7, 4};
  for (EventIndex e = 0; e < 6; ++e) timeline.Enter(e, values[e], values[e] + 1);
  const MemoryTimelineData& data = timeline.data();
  EXPECT_EQ(data.span_events, 2u);
  ASSERT_EQ(data.points.size(), 3u);
  EXPECT_EQ(data.points[0].first_event, 0u);
  EXPECT_EQ(data.points[0].allocated_bytes, 9u);
  EXPECT_EQ(data.points[1].first_event, 2u);
  EXPECT_EQ(data.points[1].allocated_bytes, 3u);
  EXPECT_EQ(data.points[2].first_event, 4u);
  EXPECT_EQ(data.points[2].allocated_bytes, 7u);
  EXPECT_EQ(data.points[2].reserved_bytes, 8u);
}

TEST(MemoryTimeline, ALongRunStaysBoundedAndNeverLosesThePeak) {
  MemoryTimeline timeline(512);
  const EventIndex events = 1'000'003;
  const EventIndex peak_at = 777'777;
  for (EventIndex e = 0; e < events; ++e) {
    Bytes value = (e * 7919) % 1000;
    timeline.Enter(e, value, value);
    if (e == peak_at) timeline.Observe(5000, 6000);
  }
  const MemoryTimelineData& data = timeline.data();
  EXPECT_LE(data.points.size(), 512u);
  EXPECT_GT(data.points.size(), 256u);
  EXPECT_EQ(data.span_events, 2048u);  // 1e6 / 2048 = 489 spans: the first width that fits
  auto top = std::max_element(data.points.begin(), data.points.end(),
                              [](const TimelinePoint& a, const TimelinePoint& b) {
                                return a.allocated_bytes < b.allocated_bytes;
                              });
  EXPECT_EQ(top->allocated_bytes, 5000u);
  EXPECT_EQ(top->reserved_bytes, 6000u);
  EXPECT_EQ(top->first_event, peak_at / 2048 * 2048);
  for (std::size_t i = 0; i < data.points.size(); ++i) {
    EXPECT_EQ(data.points[i].first_event, i * data.span_events);
  }
}

}  // namespace
}  // namespace bucketsim
