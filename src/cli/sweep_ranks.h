// `bucketsim sweep` under mpirun: the configurations spread over the ranks (configuration i on
// rank i % ranks), each rank reading the trace once for its share (rank 0 collecting the cap
// thresholds in the same pass), and rank 0 gathering every
// entry of the report, in order, so that it writes what a single process writes, byte for byte.
// What travels is each configuration's report entry as JSON text (RunJsonFragment) and its sweep
// point; MPI stays in the host backend's MpiWorld.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "engine/cap_thresholds.h"
#include "engine/sweep_summary.h"

namespace bucketsim {

class MpiWorld;

// Whether this process was started by mpirun (Open MPI's or a PMI launcher's environment).
bool LaunchedByMpirun();

// One pass of a sweep over the trace, replaying `policies`; with `scan`, the trace's reduce
// requests are collected in the same pass, behind the replay's checker.
Result<ReplayOutcome> ReplaySweepPass(const ReplayFlags& flags, std::vector<PolicySpec> policies,
                                      CapThresholdScan* scan);

struct GatheredSweep {
  TraceHeader header;  // rank 0's, as read (with its digest)
  TraceSummary summary;
  CapThresholds thresholds;          // rank 0's scan
  std::vector<std::string> entries;  // the report's policies[], one per configuration
  std::vector<SweepPoint> points;    // the same order; the Pareto set not yet marked
};

// Replays this rank's share of `configurations`; rank 0 gets every rank's entries, the others
// nothing. An error on any rank is the error of every rank.
Result<std::optional<GatheredSweep>> ReplayOverRanks(MpiWorld& world, const ReplayFlags& flags,
                                                     const std::vector<PolicySpec>& configurations);

}  // namespace bucketsim
