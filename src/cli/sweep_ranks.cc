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
  std::vector<GatheredSweep> sweeps(rank == 0 ? traces.size() : 0);
  Packer packer;
  std::size_t failed_trace = traces.size();  // this rank's first error: at this trace
  Status failed;
  for (std::size_t t = 0; t < traces.size() && failed.ok(); ++t) {
    // Pair t * per_trace + c is configuration c of trace t.
    std::vector<std::size_t> mine;
    for (std::size_t c = 0; c < per_trace; ++c) {
      if ((t * per_trace + c) % ranks == rank) mine.push_back(c);
    }
    // Rank 0 reads every trace, with or without configurations of it, as a single process does.
    if (mine.empty() && rank != 0) continue;
    std::vector<PolicySpec> policies;
    for (std::size_t c : mine) policies.push_back(configurations[c]);
    CapThresholdScan scan;
    Result<ReplayOutcome> outcome = ReplaySweepPass(ForTrace(flags, traces[t]), std::move(policies),
                                                    rank == 0 ? &scan : nullptr);
    if (!outcome.ok()) {
      failed = outcome.status();
      failed_trace = t;
      break;
    }
    for (std::size_t k = 0; k < mine.size(); ++k) {
      packer.Uint(t * per_trace + mine[k]);
      packer.String(RunJsonFragment(outcome->runs[k]));
      PackPoint(packer, SweepPointOf(outcome->runs[k]));
    }
    if (rank != 0) continue;
    GatheredSweep& sweep = sweeps[t];
    sweep.header = std::move(outcome->header);
    sweep.summary = outcome->summary;
    sweep.thresholds = scan.Take();
    sweep.entries.resize(per_trace);
    sweep.points.resize(per_trace);
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
  std::size_t received = 0;
  for (const std::string& bytes : *gathered) {
    Unpacker unpacker(bytes);
    while (!unpacker.done()) {
      const std::uint64_t pair = unpacker.Uint();
      BUCKETSIM_CHECK(pair < traces.size() * per_trace);
      GatheredSweep& sweep = sweeps[pair / per_trace];
      sweep.entries[pair % per_trace] = unpacker.String();
      sweep.points[pair % per_trace] = UnpackPoint(unpacker);
      ++received;
    }
  }
  BUCKETSIM_CHECK(received == traces.size() * per_trace);
  return std::optional<std::vector<GatheredSweep>>(std::move(sweeps));
}

}  // namespace bucketsim
