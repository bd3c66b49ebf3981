// The consumer side of a trace. A reader (or the generator) calls OnHeader once, OnEvent for
// every event in order, then OnEnd. Sinks chain: the checker validates and forwards, a fan-out
// feeds one replay per policy, a writer serialises. A non-OK Status stops the stream; messages
// about an event start with "event N: " and the reader adds the file name in front.
#pragma once

#include "core/event.h"
#include "core/status.h"
#include "core/trace_header.h"

namespace bucketsim {

class EventSink {
 public:
  virtual ~EventSink() = default;
  // `header` stays valid (and its `names` may grow) until OnEnd returns.
  virtual Status OnHeader(const TraceHeader& header) = 0;
  virtual Status OnEvent(const Event& event) = 0;
  virtual Status OnEnd() = 0;
};

}  // namespace bucketsim
