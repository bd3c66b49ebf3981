// An EventSink that keeps everything a generator emits, and a one-line rendering of each event
// so that generator tests can state a whole expected trace as readable text.
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/category.h"
#include "core/event_sink.h"

namespace bucketsim::testing {

// The header is copied at OnEnd, when its interned names are complete (a generator's own header
// dies when it returns).
class RecordingSink : public EventSink {
 public:
  Status OnHeader(const TraceHeader& header) override {
    live_header_ = &header;
    return Status::Ok();
  }
  Status OnEvent(const Event& event) override {
    events.push_back(event);
    return Status::Ok();
  }
  Status OnEnd() override {
    header = *live_header_;
    ended = true;
    return Status::Ok();
  }

  TraceHeader header;
  std::vector<Event> events;
  bool ended = false;

 private:
  const TraceHeader* live_header_ = nullptr;
};

// "alloc 4 3240 s1 all_gather", "free 4", "rs 1.0 g1 fp32 1448 view", "compute forward block0",
// "mark after fwd", "phase backward", "iteration 0", "flush", "zero_grad".
inline std::string Summarize(const Event& e, const TraceHeader& header) {
  switch (e.kind) {
    case EventKind::kAlloc:
      return fmt::format("alloc {} {} s{} {}", e.id, e.bytes, e.stream, CategoryName(e.category));
    case EventKind::kFree:
      return fmt::format("free {}", e.id);
    case EventKind::kReduceScatter:
      return fmt::format("rs {}.{} g{} {} {} {}", e.unit, e.param, e.group, DTypeName(e.dtype),
                         e.numel, ShardModeName(e.shard_mode));
    case EventKind::kCompute:
      return fmt::format("compute {}", header.names[e.name]);
    case EventKind::kMark:
      return fmt::format("mark {}", header.names[e.name]);
    case EventKind::kPhase:
      return fmt::format("phase {}", PhaseName(e.phase));
    case EventKind::kIteration:
      return fmt::format("iteration {}", e.id);
    case EventKind::kAllGather:
    case EventKind::kAllReduce:
      return fmt::format("{} {} s{} g{} {} {}", EventKindName(e.kind), e.id, e.stream, e.group,
                         DTypeName(e.dtype), e.numel);
    default:
      return std::string(EventKindName(e.kind));
  }
}

// Every event, one line each; without `collectives`, not the framework's own all_gather and
// all_reduce events (an emitter's memory order, which its tests state, reads without them).
inline std::vector<std::string> SummarizeAll(const RecordingSink& sink, bool collectives = true) {
  std::vector<std::string> lines;
  for (const Event& e : sink.events) {
    const bool collective = e.kind == EventKind::kAllGather || e.kind == EventKind::kAllReduce;
    if (collectives || !collective) lines.push_back(Summarize(e, sink.header));
  }
  return lines;
}

}  // namespace bucketsim::testing
