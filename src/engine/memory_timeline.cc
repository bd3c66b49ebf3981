#include "engine/memory_timeline.h"

#include <algorithm>

#include "core/status.h"

namespace bucketsim {

MemoryTimeline::MemoryTimeline(std::uint32_t max_points) : max_points_(max_points) {
  BUCKETSIM_CHECK(max_points_ >= 2);
  data_.points.reserve(max_points_);
  data_.points.push_back({});
}

void MemoryTimeline::Advance(EventIndex at) {
  while (at / data_.span_events >= max_points_) Halve();
  const EventIndex first = at / data_.span_events * data_.span_events;
  if (first != data_.points.back().first_event) data_.points.push_back({first, 0, 0});
  span_end_ = first + data_.span_events;
}

void MemoryTimeline::Halve() {
  const std::uint64_t width = data_.span_events * 2;
  std::size_t kept = 0;
  for (const TimelinePoint& point : data_.points) {
    const EventIndex first = point.first_event / width * width;
    if (kept > 0 && data_.points[kept - 1].first_event == first) {
      TimelinePoint& merged = data_.points[kept - 1];
      merged.allocated_bytes = std::max(merged.allocated_bytes, point.allocated_bytes);
      merged.reserved_bytes = std::max(merged.reserved_bytes, point.reserved_bytes);
    } else {
      data_.points[kept++] = {first, point.allocated_bytes, point.reserved_bytes};
    }
  }
  data_.points.resize(kept);
  data_.span_events = width;
}

}  // namespace bucketsim
