// Builds a trace in code, event by event, for tests of the checker, the engine and the
// policies; `Source()` streams it like a file would.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/replay_policies.h"

namespace bucketsim::testing {

class TraceBuilder {
 public:
  explicit TraceBuilder(int world_size, int rank = 0, double bucket_cap_mb = 25.0);

  TraceHeader& header() { return header_; }
  TraceBuilder& Group(GroupId id, std::vector<int> ranks);
  TraceBuilder& Fsdp(std::string name, std::vector<ParamInfo> params);
  TraceBuilder& Streams(std::vector<std::string> names);

  TraceBuilder& Iteration(std::uint64_t index);
  TraceBuilder& Phase(bucketsim::Phase phase);
  TraceBuilder& Alloc(std::uint64_t id, Bytes bytes, Category category, StreamId stream = 0);
  TraceBuilder& Free(std::uint64_t id);
  TraceBuilder& Compute(Micros duration, StreamId stream = 0);
  TraceBuilder& Mark(const std::string& name);
  TraceBuilder& Rs(std::uint32_t fsdp, std::uint32_t param, GroupId group, DType dtype, Numel numel,
                   ShardMode mode = ShardMode::kView, DType cast_dtype = DType::kFloat32);
  TraceBuilder& Flush();
  TraceBuilder& ZeroGrad(bool set_to_none = true);
  TraceBuilder& RecordStream(std::uint64_t id, StreamId stream);
  TraceBuilder& Sync(StreamId stream);
  TraceBuilder& EmptyCache();
  // The framework's own all_gather or all_reduce (kind) into allocation `id` (format 5).
  TraceBuilder& Collective(EventKind kind, std::uint64_t id, StreamId stream, GroupId group,
                           DType dtype, Numel numel);
  // An observed event of an imported snapshot (ObservedSegmentEvent, ObservedOomEvent, ...).
  TraceBuilder& Observed(Event event);

  TraceSource Source() const;

 private:
  TraceBuilder& Add(Event event);
  TraceHeader header_;
  std::vector<Event> events_;
};

// Replays the built trace under one policy with the exact model and the sim backend.
Result<RunResult> ReplayOne(const TraceBuilder& trace, const std::string& policy,
                            std::optional<double> bucket_cap_mb = std::nullopt);

}  // namespace bucketsim::testing
