#include "cli/sweep_ranks.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "backend/host/mpi_world.h"
#include "report/json_report.h"

namespace bucketsim {
namespace {

// Hands every event to `first` and then, once `first` has accepted it, to `second`.
class TeeSink final : public EventSink {
 public:
  TeeSink(EventSink& first, EventSink& second) : first_(first), second_(second) {}
  Status OnHeader(const TraceHeader& header) override {
    BUCKETSIM_RETURN_IF_ERROR(first_.OnHeader(header));
    return second_.OnHeader(header);
  }
  Status OnEvent(const Event& event) override {
    BUCKETSIM_RETURN_IF_ERROR(first_.OnEvent(event));
    return second_.OnEvent(event);
  }
  Status OnEnd() override {
    BUCKETSIM_RETURN_IF_ERROR(first_.OnEnd());
    return second_.OnEnd();
  }

 private:
  EventSink& first_;
  EventSink& second_;
};

// The bytes a rank sends: per configuration its index, report entry and sweep point.
class Packer {
 public:
  void Uint(std::uint64_t value) { Raw(&value, sizeof value); }
  void Double(double value) { Raw(&value, sizeof value); }
  void String(std::string_view text) {
    Uint(text.size());
    out_.append(text);
  }
  std::string Take() { return std::move(out_); }

 private:
  void Raw(const void* data, std::size_t size) {
    out_.append(static_cast<const char*>(data), size);
  }
  std::string out_;
};

class Unpacker {
 public:
  explicit Unpacker(std::string_view in) : in_(in) {}
  bool done() const { return at_ == in_.size(); }
  std::uint64_t Uint() {
    std::uint64_t value = 0;
    Raw(&value, sizeof value);
    return value;
  }
  double Double() {
    double value = 0;
    Raw(&value, sizeof value);
    return value;
  }
  std::string String() {
    const std::uint64_t size = Uint();
    BUCKETSIM_CHECK(size <= in_.size() - at_);
    std::string text(in_.substr(at_, size));
    at_ += size;
    return text;
  }

 private:
  void Raw(void* data, std::size_t size) {
    BUCKETSIM_CHECK(size <= in_.size() - at_);
    std::memcpy(data, in_.data() + at_, size);
    at_ += size;
  }
  std::string_view in_;
  std::size_t at_ = 0;
};

void PackPoint(Packer& p, const SweepPoint& point) {
  p.String(point.policy);
  p.String(point.canonical);
  p.Double(point.bucket_cap_mb);
  p.Uint(point.peak_allocated_bytes);
  p.Uint(point.peak_reserved_bytes);
  p.Double(point.step_time_us);
  p.Double(point.exposed_communication_us);
  p.Uint(point.bucketed_requests);
  p.Uint(point.bypassed_requests);
  p.Uint(point.out_of_memory);
}

SweepPoint UnpackPoint(Unpacker& u) {
  SweepPoint point;
  point.policy = u.String();
  point.canonical = u.String();
  point.bucket_cap_mb = u.Double();
  point.peak_allocated_bytes = u.Uint();
  point.peak_reserved_bytes = u.Uint();
  point.step_time_us = u.Double();
  point.exposed_communication_us = u.Double();
  point.bucketed_requests = u.Uint();
  point.bypassed_requests = u.Uint();
  point.out_of_memory = u.Uint() != 0;
  return point;
}

// What a rank's bytes hold, record by record: what the report says of a trace (from the rank
// with its first pair), or one pair's report entry and sweep point.
constexpr std::uint64_t kTraceRecord = 0;
constexpr std::uint64_t kEntryRecord = 1;

void PackTrace(Packer& p, const ReportTraceInfo& trace) {
  p.Uint(static_cast<std::uint64_t>(trace.schema_version));
  p.String(trace.description);
  p.Uint(static_cast<std::uint64_t>(trace.world_size));
  p.Uint(static_cast<std::uint64_t>(trace.rank));
  p.Double(trace.bucket_cap_mb);
  p.Uint(trace.events);
  p.Uint(trace.iterations);
  p.Uint(trace.fsdp_instances);
  p.Uint(trace.params);
  p.Uint(trace.process_groups);
  p.Double(trace.compute_us);
}

ReportTraceInfo UnpackTrace(Unpacker& u) {
  ReportTraceInfo trace;
  trace.schema_version = static_cast<int>(u.Uint());
  trace.description = u.String();
  trace.world_size = static_cast<int>(u.Uint());
  trace.rank = static_cast<int>(u.Uint());
  trace.bucket_cap_mb = u.Double();
  trace.events = u.Uint();
  trace.iterations = u.Uint();
  trace.fsdp_instances = u.Uint();
  trace.params = u.Uint();
  trace.process_groups = u.Uint();
  trace.compute_us = u.Double();
  return trace;
}

}  // namespace

ReplayFlags ForTrace(const ReplayFlags& flags, const std::string& trace) {
  ReplayFlags for_trace = flags;
  for_trace.trace = trace;
  return for_trace;
}

bool LaunchedByMpirun() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(name)) return true;
  }
  return false;
}

Result<ReplayOutcome> ReplaySweepPass(const ReplayFlags& flags, std::vector<PolicySpec> policies,
                                      CapThresholdScan* scan) {
  Result<ReplayRequest> request =
      MakeReplayRequest(flags, DefaultPolicies(), {std::move(policies), std::nullopt, 1.0});
  if (!request.ok()) return request.status();
  const std::string detail = fmt::format("{} configurations", request->policies.size());
  return ReplayPolicies(
      [&flags, &detail, scan](TraceHeader& header, EventSink& checker) {
        if (!scan) {
          return ReadTraceWithProgress(flags.trace, header, checker, flags.progress, "sweeping",
                                       detail);
        }
        TeeSink tee(checker, *scan);
        return ReadTraceWithProgress(flags.trace, header, tee, flags.progress, "sweeping", detail);
      },
      *request);
}

Result<std::optional<std::vector<GatheredSweep>>> ReplayOverRanks(
    MpiWorld& world, const ReplayFlags& flags, const std::vector<std::string>& traces,
    const std::vector<PolicySpec>& configurations) {
  const auto ranks = static_cast<std::size_t>(world.size());
  const auto rank = static_cast<std::size_t>(world.rank());
  const std::size_t per_trace = configurations.size();
  const std::size_t pairs = traces.size() * per_trace;
  const std::size_t run = (pairs + ranks - 1) / ranks;  // pair i on rank i / run
  Packer packer;
  std::size_t failed_trace = traces.size();  // this rank's first error: at this trace
  Status failed;
  for (std::size_t t = 0; t < traces.size(); ++t) {
    // Pair t * per_trace + c is configuration c of trace t.
    std::vector<std::size_t> mine;
    for (std::size_t c = 0; c < per_trace; ++c) {
      if ((t * per_trace + c) / run == rank) mine.push_back(c);
    }
    if (mine.empty()) continue;
    const bool first = mine.front() == 0;  // this rank tells what the trace is
    std::vector<PolicySpec> policies;
    for (std::size_t c : mine) policies.push_back(configurations[c]);
    CapThresholdScan scan;
    Result<ReplayOutcome> outcome =
        ReplaySweepPass(ForTrace(flags, traces[t]), std::move(policies), first ? &scan : nullptr);
    if (!outcome.ok()) {
      failed = outcome.status();
      failed_trace = t;
      break;
    }
    if (first) {
      packer.Uint(kTraceRecord);
      packer.Uint(t);
      PackTrace(packer, TraceInfoOf(outcome->header, outcome->summary));
      packer.String(outcome->header.content_digest);
      packer.Uint(ReduceScatterRequests(outcome->summary));
      const std::optional<double> smallest = scan.Take().SmallestBucketingCapMb();
      packer.Uint(smallest.has_value());
      packer.Double(smallest.value_or(0));
    }
    for (std::size_t k = 0; k < mine.size(); ++k) {
      packer.Uint(kEntryRecord);
      packer.Uint(t * per_trace + mine[k]);
      packer.String(RunJsonFragment(outcome->runs[k]));
      PackPoint(packer, SweepPointOf(outcome->runs[k]));
    }
  }
  // An error on any rank is every rank's: that of the earliest trace with one (where a single
  // process stops), from the lowest rank there. Agreed once every rank is done, so that no rank
  // waits for the others between traces (Open MPI spins while it waits, taking a core).
  for (std::size_t t = 0; t < traces.size(); ++t) {
    BUCKETSIM_RETURN_IF_ERROR(world.Agree(t == failed_trace ? failed : Status::Ok()));
  }
  Result<std::vector<std::string>> gathered = world.GatherToRoot(packer.Take());
  if (!gathered.ok()) return gathered.status();
  if (rank != 0) return std::optional<std::vector<GatheredSweep>>();
  std::vector<GatheredSweep> sweeps(traces.size());
  for (GatheredSweep& sweep : sweeps) {
    sweep.entries.resize(per_trace);
    sweep.points.resize(per_trace);
  }
  std::size_t traces_received = 0;
  std::size_t entries_received = 0;
  for (const std::string& bytes : *gathered) {
    Unpacker unpacker(bytes);
    while (!unpacker.done()) {
      if (unpacker.Uint() == kTraceRecord) {
        const std::uint64_t t = unpacker.Uint();
        BUCKETSIM_CHECK(t < traces.size());
        GatheredSweep& sweep = sweeps[t];
        sweep.trace = UnpackTrace(unpacker);
        sweep.content_digest = unpacker.String();
        sweep.reduce_scatter_requests = unpacker.Uint();
        const bool has_smallest = unpacker.Uint() != 0;
        const double smallest = unpacker.Double();
        if (has_smallest) sweep.smallest_bucketing_cap_mb = smallest;
        ++traces_received;
        continue;
      }
      const std::uint64_t pair = unpacker.Uint();
      BUCKETSIM_CHECK(pair < pairs);
      GatheredSweep& sweep = sweeps[pair / per_trace];
      sweep.entries[pair % per_trace] = unpacker.String();
      sweep.points[pair % per_trace] = UnpackPoint(unpacker);
      ++entries_received;
    }
  }
  BUCKETSIM_CHECK(traces_received == traces.size() && entries_received == pairs);
  return std::optional<std::vector<GatheredSweep>>(std::move(sweeps));
}

}  // namespace bucketsim
