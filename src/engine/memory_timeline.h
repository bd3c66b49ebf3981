// Memory over the replay clock, bounded: allocated and reserved bytes against the trace's event
// index, kept in at most `max_points` spans of equal width. Each span keeps the *largest*
// figures reached during it (the value carried in at its first event and every charge inside
// it), so decimation never loses a peak: the largest point of the timeline is the run's peak.
// When an event falls past the last span the spans are merged pairwise and their width doubles,
// which costs O(1) per event amortized and bounds memory by `max_points` whatever the trace's
// length (a ten-million-event trace keeps 305 spans of 2^15 events under the default bound). 512
// points are more than a chart's plot area has pixel columns to tell apart.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/event.h"
#include "core/units.h"

namespace bucketsim {

// One span [first_event, first_event + span_events) of the timeline.
struct TimelinePoint {
  EventIndex first_event = 0;
  Bytes allocated_bytes = 0;  // the largest allocated figure during the span
  Bytes reserved_bytes = 0;   // the largest reserved figure during the span
};

struct MemoryTimelineData {
  std::uint64_t span_events = 1;  // the width of every span, in events (a power of two)
  std::vector<TimelinePoint> points;
};

class MemoryTimeline {
 public:
  static constexpr std::uint32_t kDefaultMaxPoints = 512;

  // Starts with one empty span at event 0. `max_points` >= 2.
  explicit MemoryTimeline(std::uint32_t max_points = kDefaultMaxPoints);

  // Whether event `at` falls past the last span, so that Enter starts a new one.
  bool Begins(EventIndex at) const { return at >= span_end_; }
  // The figures as event `at` begins (what the previous events left). Events come in order.
  void Enter(EventIndex at, Bytes allocated, Bytes reserved) {
    if (at >= span_end_) Advance(at);
    Observe(allocated, reserved);
  }
  // Figures reached inside the current event (after a charge).
  void Observe(Bytes allocated, Bytes reserved) {
    ObserveAllocated(allocated);
    ObserveReserved(reserved);
  }
  void ObserveAllocated(Bytes allocated) {
    Bytes& top = data_.points.back().allocated_bytes;
    if (allocated > top) top = allocated;
  }
  void ObserveReserved(Bytes reserved) {
    Bytes& top = data_.points.back().reserved_bytes;
    if (reserved > top) top = reserved;
  }

  const MemoryTimelineData& data() const { return data_; }
  MemoryTimelineData Take() { return std::move(data_); }

 private:
  void Advance(EventIndex at);
  void Halve();

  std::uint32_t max_points_;
  EventIndex span_end_ = 1;  // the end of the last span (exclusive)
  MemoryTimelineData data_;
};

}  // namespace bucketsim
