#include "cli/sweep_ranks.h"

#include <cstdlib>
#include <cstring>
#include <type_traits>

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

// A number or an enum: every rank runs the same binary, so it travels as its bytes.
template <typename T>
concept Plain = std::is_arithmetic_v<T> || std::is_enum_v<T>;

// The bytes a rank sends, record by record: what the report says of a trace (from the rank with
// its first pair), or one pair's report entry and sweep point.
class Packer {
 public:
  template <Plain T>
  void Field(const T& value) {
    out_.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  void Field(const std::string& text) {
    Field(std::uint64_t{text.size()});
    out_.append(text);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Unpacker {
 public:
  explicit Unpacker(std::string_view in) : in_(in) {}
  bool done() const { return at_ == in_.size(); }
  template <Plain T>
  void Field(T& value) {
    BUCKETSIM_CHECK(sizeof value <= in_.size() - at_);
    std::memcpy(&value, in_.data() + at_, sizeof value);
    at_ += sizeof value;
  }
  void Field(std::string& text) {
    std::uint64_t size = 0;
    Field(size);
    BUCKETSIM_CHECK(size <= in_.size() - at_);
    text.assign(in_.substr(at_, size));
    at_ += size;
  }
  template <typename T>
  T Read() {
    T value{};
    Field(value);
    return value;
  }

 private:
  std::string_view in_;
  std::size_t at_ = 0;
};

// What a rank's bytes hold, record by record.
enum class Record : std::uint8_t { kTrace, kEntry };

// The fields of a trace's `trace` object and of a sweep point, in order, through a Packer (the
// struct const) or an Unpacker: one list for both sides. A point's Pareto mark is not sent: rank
// 0 marks it over all the points.
template <typename Io, typename Trace>
void TraceInfoFields(Io& io, Trace& t) {
  io.Field(t.schema_version);
  io.Field(t.description);
  io.Field(t.world_size);
  io.Field(t.rank);
  io.Field(t.bucket_cap_mb);
  io.Field(t.events);
  io.Field(t.iterations);
  io.Field(t.fsdp_instances);
  io.Field(t.params);
  io.Field(t.process_groups);
  io.Field(t.compute_us);
}

template <typename Io, typename Point>
void PointFields(Io& io, Point& p) {
  io.Field(p.policy);
  io.Field(p.canonical);
  io.Field(p.setting);
  io.Field(p.bucket_cap_mb);
  io.Field(p.peak_allocated_bytes);
  io.Field(p.peak_reserved_bytes);
  io.Field(p.step_time_us);
  io.Field(p.exposed_communication_us);
  io.Field(p.bucketed_requests);
  io.Field(p.bypassed_requests);
  io.Field(p.out_of_memory);
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
      const std::optional<double> smallest = scan.Take().SmallestBucketingCapMb();
      packer.Field(Record::kTrace);
      packer.Field(t);
      const ReportTraceInfo trace = TraceInfoOf(outcome->header, outcome->summary);
      TraceInfoFields(packer, trace);
      packer.Field(outcome->header.content_digest);
      packer.Field(ReduceScatterRequests(outcome->summary));
      packer.Field(smallest.has_value());
      packer.Field(smallest.value_or(0));
    }
    for (std::size_t k = 0; k < mine.size(); ++k) {
      packer.Field(Record::kEntry);
      packer.Field(t * per_trace + mine[k]);
      packer.Field(RunJsonFragment(outcome->runs[k]));
      const SweepPoint point = SweepPointOf(outcome->runs[k]);
      PointFields(packer, point);
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
      if (unpacker.Read<Record>() == Record::kTrace) {
        const auto t = unpacker.Read<std::size_t>();
        BUCKETSIM_CHECK(t < traces.size());
        GatheredSweep& sweep = sweeps[t];
        TraceInfoFields(unpacker, sweep.trace);
        unpacker.Field(sweep.content_digest);
        unpacker.Field(sweep.reduce_scatter_requests);
        const bool has_smallest = unpacker.Read<bool>();
        const auto smallest = unpacker.Read<double>();
        if (has_smallest) sweep.smallest_bucketing_cap_mb = smallest;
        ++traces_received;
        continue;
      }
      const auto pair = unpacker.Read<std::size_t>();
      BUCKETSIM_CHECK(pair < pairs);
      GatheredSweep& sweep = sweeps[pair / per_trace];
      unpacker.Field(sweep.entries[pair % per_trace]);
      PointFields(unpacker, sweep.points[pair % per_trace]);
      ++entries_received;
    }
  }
  BUCKETSIM_CHECK(traces_received == traces.size() && entries_received == pairs);
  return std::optional<std::vector<GatheredSweep>>(std::move(sweeps));
}

}  // namespace bucketsim
