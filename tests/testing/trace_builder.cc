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
  header_.units.push_back({std::move(name), std::move(params)});
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

TraceBuilder& TraceBuilder::Iteration(std::uint64_t index) { return Add(IterationEvent(index)); }

TraceBuilder& TraceBuilder::Phase(bucketsim::Phase phase) { return Add(PhaseEvent(phase)); }

TraceBuilder& TraceBuilder::Alloc(std::uint64_t id, Bytes bytes, Category category,
                                  StreamId stream) {
  return Add(AllocEvent(id, bytes, category, stream));
}

TraceBuilder& TraceBuilder::Free(std::uint64_t id) { return Add(FreeEvent(id)); }

TraceBuilder& TraceBuilder::Compute(Micros duration, StreamId stream) {
  return Add(ComputeEvent(stream, duration, header_.Intern("")));
}

TraceBuilder& TraceBuilder::Mark(const std::string& name) {
  return Add(MarkEvent(header_.Intern(name)));
}

TraceBuilder& TraceBuilder::Rs(std::uint32_t fsdp, std::uint32_t param, GroupId group, DType dtype,
                               Numel numel, ShardMode mode, DType cast_dtype) {
  return Add(ReduceScatterEvent(fsdp, param, group, dtype, numel, mode, cast_dtype));
}

TraceBuilder& TraceBuilder::Flush() { return Add(FlushEvent()); }

TraceBuilder& TraceBuilder::ZeroGrad(bool set_to_none) { return Add(ZeroGradEvent(set_to_none)); }

TraceBuilder& TraceBuilder::RecordStream(std::uint64_t id, StreamId stream) {
  return Add(RecordStreamEvent(id, stream));
}

TraceBuilder& TraceBuilder::Sync(StreamId stream) { return Add(SyncEvent(stream)); }

TraceBuilder& TraceBuilder::EmptyCache() { return Add(EmptyCacheEvent()); }

TraceBuilder& TraceBuilder::Collective(EventKind kind, std::uint64_t id, StreamId stream,
                                       GroupId group, DType dtype, Numel numel) {
  return Add(TraceCollectiveEvent(kind, id, stream, group, dtype, numel));
}

TraceBuilder& TraceBuilder::Observed(Event event) { return Add(event); }

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
