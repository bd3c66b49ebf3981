#include "testing/trace_builder.h"

namespace bucketsim::testing {

TraceBuilder::TraceBuilder(int world_size, int rank, double bucket_cap_mb) {
  header_.world_size = world_size;
  header_.rank = rank;
  header_.bucket_cap_mb = bucket_cap_mb;
  header_.streams = {{"default"}, {"post_backward"}};
}

TraceBuilder& TraceBuilder::Group(GroupId id, std::vector<int> ranks) {
  header_.groups.push_back({id, std::move(ranks), ""});
  return *this;
}

TraceBuilder& TraceBuilder::Fsdp(std::string name, std::vector<ParamInfo> params) {
  header_.fsdp.push_back({std::move(name), std::move(params)});
  return *this;
}

TraceBuilder& TraceBuilder::Streams(std::vector<std::string> names) {
  header_.streams.clear();
  for (auto& name : names) header_.streams.push_back({std::move(name)});
  return *this;
}

TraceBuilder& TraceBuilder::Add(Event event) {
  event.index = events_.size();
  events_.push_back(event);
  return *this;
}

TraceBuilder& TraceBuilder::Iteration(std::uint64_t index) {
  Event e;
  e.kind = EventKind::kIteration;
  e.id = index;
  return Add(e);
}

TraceBuilder& TraceBuilder::Phase(bucketsim::Phase phase) {
  Event e;
  e.kind = EventKind::kPhase;
  e.phase = phase;
  return Add(e);
}

TraceBuilder& TraceBuilder::Alloc(std::uint64_t id, Bytes bytes, Category category,
                                  StreamId stream) {
  Event e;
  e.kind = EventKind::kAlloc;
  e.id = id;
  e.bytes = bytes;
  e.category = category;
  e.stream = stream;
  return Add(e);
}

TraceBuilder& TraceBuilder::Free(std::uint64_t id) {
  Event e;
  e.kind = EventKind::kFree;
  e.id = id;
  return Add(e);
}

TraceBuilder& TraceBuilder::Compute(Micros duration, StreamId stream) {
  Event e;
  e.kind = EventKind::kCompute;
  e.dur_us = duration;
  e.stream = stream;
  e.name = header_.Intern("");
  return Add(e);
}

TraceBuilder& TraceBuilder::Mark(const std::string& name) {
  Event e;
  e.kind = EventKind::kMark;
  e.name = header_.Intern(name);
  return Add(e);
}

TraceBuilder& TraceBuilder::Rs(std::uint32_t fsdp, std::uint32_t param, GroupId group,
                               DType dtype, Numel numel, ShardMode mode, DType cast_dtype) {
  Event e;
  e.kind = EventKind::kReduceScatter;
  e.fsdp = fsdp;
  e.param = param;
  e.group = group;
  e.dtype = dtype;
  e.numel = numel;
  e.shard_mode = mode;
  e.cast_dtype = cast_dtype;
  return Add(e);
}

TraceBuilder& TraceBuilder::Flush() {
  Event e;
  e.kind = EventKind::kFlush;
  return Add(e);
}

TraceBuilder& TraceBuilder::ZeroGrad(bool set_to_none) {
  Event e;
  e.kind = EventKind::kZeroGrad;
  e.set_to_none = set_to_none;
  return Add(e);
}

TraceSource TraceBuilder::Source() const {
  return [header = header_, events = events_](TraceHeader& out, EventSink& sink) -> Status {
    out = header;
    BUCKETSIM_RETURN_IF_ERROR(out.Finalize());
    BUCKETSIM_RETURN_IF_ERROR(sink.OnHeader(out));
    for (const Event& event : events) BUCKETSIM_RETURN_IF_ERROR(sink.OnEvent(event));
    return sink.OnEnd();
  };
}

Result<RunResult> ReplayOne(const TraceBuilder& trace, const std::string& policy,
                            std::optional<double> bucket_cap_mb) {
  Result<PolicySpec> spec = ParsePolicySpec(policy);
  if (!spec.ok()) return spec.status();
  ReplayRequest request;
  request.policies = {*spec};
  request.bucket_cap_mb = bucket_cap_mb;
  Result<ReplayOutcome> outcome = ReplayPolicies(trace.Source(), request);
  if (!outcome.ok()) return outcome.status();
  return std::move(outcome->runs.front());
}

}  // namespace bucketsim::testing
