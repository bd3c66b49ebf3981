// A sink that records what a reader gives it, for the io tests. It can be told to fail at one
// event, to check that a sink's error stops the stream.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/event_sink.h"

namespace bucketsim {

class RecordingSink : public EventSink {
 public:
  Status OnHeader(const TraceHeader& header) override {
    ++headers;
    header_seen = &header;
    return Status::Ok();
  }
  Status OnEvent(const Event& event) override {
    if (fail_at && event.index == *fail_at)
      return InvalidTrace("event " + std::to_string(event.index) + ": refused");
    events.push_back(event);
    return Status::Ok();
  }
  Status OnEnd() override {
    ++ends;
    return Status::Ok();
  }

  std::optional<EventIndex> fail_at;
  int headers = 0;
  int ends = 0;
  const TraceHeader* header_seen = nullptr;
  std::vector<Event> events;
};

}  // namespace bucketsim
