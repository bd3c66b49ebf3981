// The memory/time trade-off of a bucket-size sweep: one point per (policy, cap) replay with its
// peak memory, predicted time and how many reduce requests its cap buckets, the Pareto-optimal
// points (no other point is at least as good on both peak reserved memory and step time and
// better on one), and the advice a user acts on: the knee (the least peak reserved within a
// tolerance of the fastest step), the fastest configuration that fits a budget, and the points
// that tie with either. Plain values from RunResults; the `sweep` command and the reporters
// format them.
//
// Order of preference, never the order the configurations were listed in: faster; at the same
// step time less peak reserved; then the simpler policy (engine/setting_advice.h, where a
// cap that buckets nothing counts as unbucketed, which is what it is in effect); then the
// smaller cap; then the canonical spec.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/run_result.h"
#include "engine/setting_advice.h"

namespace bucketsim {

struct SweepPoint {
  std::string policy;     // as the user named it
  std::string canonical;  // lifetime=...,key=...,cap=...
  // The run's framework setting where the trace says it (RunResult::setting: a trace emitted
  // for FSDP1 or FSDP2 replayed under that implementation's policy); empty: from `canonical`.
  std::string setting;
  double bucket_cap_mb = 0;
  Bytes peak_allocated_bytes = 0;
  Bytes peak_reserved_bytes = 0;
  Micros step_time_us = 0;
  Micros exposed_communication_us = 0;  // per iteration: the mean over the trace's iterations
  std::uint64_t bucketed_requests = 0;  // reduce requests of the trace that went through a bucket
  std::uint64_t bypassed_requests = 0;  // larger than the shard size: reduced on their own
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

// The framework setting of a point: its canonical spec at its cap. A point whose canonical spec
// does not parse (a policy this build does not know) is mapped as backward-only.
SettingAdvice PointSetting(const SweepPoint& point);
// The point's simplicity as the tie order uses it: unbucketed when its cap buckets nothing.
Simplicity EffectiveSimplicity(const SweepPoint& point);

// Equal figures: the same peak reserved and the same step time (to 1e-9 relative, the noise of
// summing the same spans in another order).
bool SameFigures(const SweepPoint& a, const SweepPoint& b);
// The other points (not out of memory) with the figures of points[i], in preference order.
std::vector<std::size_t> TiesOf(const std::vector<SweepPoint>& points, std::size_t i);

// Whether a point fits a peak reserved budget; one that ran out of memory fits none.
bool FitsBudget(const SweepPoint& point, Bytes budget_bytes);

// --budget: the fastest point whose peak reserved fits (in the order of preference above), the
// points that tie with it, and the next one that does not tie, to say what the choice costs.
// When nothing fits, `best` is unset and `smallest` is the point with the least peak reserved.
struct BudgetAnswer {
  Bytes budget_bytes = 0;
  std::optional<std::size_t> best;
  std::optional<std::size_t> runner_up;
  std::optional<std::size_t> smallest;
  std::vector<std::size_t> ties;  // same figures as best
};
BudgetAnswer ChooseUnderBudget(const std::vector<SweepPoint>& points, Bytes budget_bytes);

// The default of `sweep --time-tolerance`: 1% of the fastest step.
inline constexpr double kDefaultTimeTolerance = 0.01;

// The knee: among points whose step time is within `time_tolerance` (a fraction) of the fastest,
// the one with the least peak reserved (then the order of preference).
struct KneeAnswer {
  double time_tolerance = kDefaultTimeTolerance;
  std::optional<std::size_t> fastest;
  std::optional<std::size_t> knee;
  std::vector<std::size_t> ties;  // same figures as the knee
};
KneeAnswer FindKnee(const std::vector<SweepPoint>& points, double time_tolerance);

// `--bucket-cap-mb auto` or `A..B`: the caps were searched, not only listed.
struct CapSearch {
  double from_mb = 0;  // the range searched
  double to_mb = 0;
  int passes = 0;                 // passes over the trace (one per round)
  std::size_t caps = 0;           // distinct caps replayed
  std::vector<double> listed_mb;  // the caps --bucket-cap-mb also listed: always in the table
};

// What a report's `sweep` section holds: points[i] is the replay policies[i] of the report.
struct SweepSection {
  std::vector<SweepPoint> points;
  KneeAnswer knee;
  std::optional<BudgetAnswer> budget;
  std::optional<CapSearch> search;
  // From the trace's requests (engine/cap_thresholds.h): the least cap that buckets anything.
  std::optional<double> smallest_bucketing_cap_mb;
};

// The recommendation: the budget's choice with a budget, else the knee.
std::optional<std::size_t> Recommended(const SweepSection& sweep);
// The setting to use for the recommended point (Recommended(sweep) must be set). A cap that
// buckets none of the requests is bucket_cap_mb=0 in effect, and is given as that.
SettingAdvice RecommendedSetting(const SweepSection& sweep);

}  // namespace bucketsim
