// `bucketsim sweep` under mpirun: every (trace, configuration) pair spread over the ranks. The
// pairs are listed trace by trace, every configuration of a trace in order, and split into
// ranks-many runs of consecutive pairs (of equal length but for the last ones): pair i replays on
// rank i / ceil(pairs / ranks). A rank reads each trace once at most, for all its pairs of it in
// one pass, and the traces it has no pair of not at all; the rank with a trace's first pair also
// collects its cap thresholds in that pass and sends what the report says of the trace. Rank 0
// gathers every entry of every report, in order, so that it writes what a single process writes,
// byte for byte. What travels is each pair's report entry as JSON text (RunJsonFragment) and its
// sweep point; MPI stays in the host backend's MpiWorld.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "engine/cap_thresholds.h"
#include "engine/sweep_summary.h"
#include "report/report_document.h"

namespace bucketsim {

class MpiWorld;

// `flags` for one of the traces of `sweep TRACE...`.
ReplayFlags ForTrace(const ReplayFlags& flags, const std::string& trace);

// Whether this process was started by mpirun (Open MPI's or a PMI launcher's environment).
bool LaunchedByMpirun();

// One pass of a sweep over the trace, replaying `policies`; with `scan`, the trace's reduce
// requests are collected in the same pass, behind the replay's checker.
Result<ReplayOutcome> ReplaySweepPass(const ReplayFlags& flags, std::vector<PolicySpec> policies,
                                      CapThresholdScan* scan);

// One trace's sweep, gathered on rank 0.
struct GatheredSweep {
  ReportTraceInfo trace;                            // the report's `trace` object
  std::string content_digest;                       // TraceHeader::content_digest, for the context
  std::uint64_t reduce_scatter_requests = 0;        // the trace's rs events
  std::optional<double> smallest_bucketing_cap_mb;  // CapThresholds::SmallestBucketingCapMb
  std::vector<std::string> entries;  // the report's policies[], one per configuration
  std::vector<SweepPoint> points;    // the same order; the Pareto set not yet marked
};

// Replays this rank's share of every trace at every one of `configurations` (`flags.trace` is
// replaced by each of `traces`); rank 0 gets one GatheredSweep per trace, in order, the others
// nothing. An error on any rank is the error of every rank: that of the earliest trace with one
// (where a single process stops), from the lowest rank there.
Result<std::optional<std::vector<GatheredSweep>>> ReplayOverRanks(
    MpiWorld& world, const ReplayFlags& flags, const std::vector<std::string>& traces,
    const std::vector<PolicySpec>& configurations);

}  // namespace bucketsim
