// `bucketsim sweep`'s replays: every policy at every listed cap, and with a search (`auto` or
// A..B, engine/cap_search.h) further rounds of caps around the knee and the budget's choice
// until no new cap is left. In the library, so that what a command asks is one call and the
// benchmark runs what the command runs; how a pass replays the trace (one process, or spread
// over mpirun's ranks) is the caller's.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "engine/cap_search.h"
#include "engine/cap_thresholds.h"
#include "engine/replay_policies.h"
#include "engine/sweep_summary.h"
#include "policy/policy_spec.h"

namespace bucketsim {

// The caps asked: those listed, and the range to search when `search` (A..B, or unset: `auto`,
// from the trace's thresholds).
struct CapChoice {
  std::vector<double> listed_mb;
  bool search = false;
  std::optional<CapRange> range;
};

// The replays of a sweep, listed caps and searched ones, in the order of the policies and then
// by cap.
struct SweepReplays {
  ReplayOutcome outcome;
  std::optional<CapSearch> search;
  std::optional<double> smallest_bucketing_cap_mb;
};

// One pass over the trace: `policies` replayed, and `scan`, when given, told of every event
// (the thresholds of a sweep without a search are collected in its only pass).
using SweepPass =
    std::function<Result<ReplayOutcome>(std::vector<PolicySpec> policies, CapThresholdScan* scan)>;

struct CapSweep {
  std::vector<PolicySpec> policies;
  CapChoice caps;
  double time_tolerance = kDefaultTimeTolerance;  // a fraction: the knee's
  std::optional<Bytes> budget;                    // peak reserved; the budget's choice
  std::string trace_name;                         // for messages
  // The trace read once more, for a search's thresholds before its first pass; none where it
  // cannot be read twice (stdin), which a search refuses.
  std::optional<TraceSource> rescan;
  SweepPass pass;
};

// Each policy at each cap; a policy that fixes its own cap (unbucketed) only when `with_fixed`.
std::vector<PolicySpec> SweepPolicies(const std::vector<PolicySpec>& policies,
                                      const std::vector<double>& caps_mb, bool with_fixed);

Result<SweepReplays> RunCapSweep(const CapSweep& sweep);

}  // namespace bucketsim
