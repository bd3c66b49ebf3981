// The memory/time trade-off of a bucket-size sweep: one point per (policy, cap) replay with its
// peak memory and predicted time, the Pareto-optimal points (no other point is at least as good
// on both peak reserved memory and step time and better on one), and the answer to "what is the
// fastest configuration that fits in this much memory". Plain values from RunResults; the
// `sweep` command and the reporters format them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/run_result.h"

namespace bucketsim {

struct SweepPoint {
  std::string policy;     // as the user named it
  std::string canonical;  // lifetime=...,key=...,cap=...
  double bucket_cap_mb = 0;
  Bytes peak_allocated_bytes = 0;
  Bytes peak_reserved_bytes = 0;
  Micros step_time_us = 0;
  Micros exposed_communication_us = 0;  // per iteration: the mean over the trace's iterations
  bool out_of_memory = false;           // --device-memory was too small: never optimal, never fits
  bool pareto = false;
};

// The points in the order of `runs`, with the Pareto set marked (points that ran out of memory
// are excluded from it). Points with identical figures are all marked.
std::vector<SweepPoint> SummarizeSweep(const std::vector<RunResult>& runs);
// Its two steps, for points gathered from several processes: one run's point (not yet marked),
// and the Pareto set of all of them.
SweepPoint SweepPointOf(const RunResult& run);
void MarkPareto(std::vector<SweepPoint>& points);

// Whether a point fits a peak reserved budget; one that ran out of memory fits none.
bool FitsBudget(const SweepPoint& point, Bytes budget_bytes);

// --budget: the fastest point whose peak reserved fits (ties: less reserved memory, then the
// earlier point), and the next fastest that fits, to say what the choice costs against it.
// When nothing fits, `best` is unset and `smallest` is the point with the least peak reserved.
struct BudgetAnswer {
  Bytes budget_bytes = 0;
  std::optional<std::size_t> best;
  std::optional<std::size_t> runner_up;
  std::optional<std::size_t> smallest;
};
BudgetAnswer ChooseUnderBudget(const std::vector<SweepPoint>& points, Bytes budget_bytes);

// What a report's `sweep` section holds: points[i] is the replay policies[i] of the report.
struct SweepSection {
  std::vector<SweepPoint> points;
  std::optional<BudgetAnswer> budget;
};

}  // namespace bucketsim
