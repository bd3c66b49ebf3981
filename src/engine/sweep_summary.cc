#include "engine/sweep_summary.h"

#include <algorithm>

namespace bucketsim {
namespace {

// a dominates b: no worse on both axes and better on one.
bool Dominates(const SweepPoint& a, const SweepPoint& b) {
  bool no_worse =
      a.peak_reserved_bytes <= b.peak_reserved_bytes && a.step_time_us <= b.step_time_us;
  bool better = a.peak_reserved_bytes < b.peak_reserved_bytes || a.step_time_us < b.step_time_us;
  return no_worse && better;
}

// Faster first; at equal time, less memory first; then the earlier point.
bool Preferred(const std::vector<SweepPoint>& points, std::size_t a, std::size_t b) {
  const SweepPoint& x = points[a];
  const SweepPoint& y = points[b];
  if (x.step_time_us != y.step_time_us) return x.step_time_us < y.step_time_us;
  if (x.peak_reserved_bytes != y.peak_reserved_bytes) {
    return x.peak_reserved_bytes < y.peak_reserved_bytes;
  }
  return a < b;
}

}  // namespace

std::vector<SweepPoint> SummarizeSweep(const std::vector<RunResult>& runs) {
  std::vector<SweepPoint> points;
  for (const RunResult& run : runs) {
    TimingTotals totals = SumTimings(run.iterations, run.collectives);
    SweepPoint point;
    point.policy = run.policy;
    point.canonical = run.canonical;
    point.bucket_cap_mb = run.bucket_cap_mb;
    point.peak_allocated_bytes = run.peak.allocated_bytes;
    point.peak_reserved_bytes = run.peak.reserved_bytes;
    point.step_time_us = totals.step_time_us;
    // Per iteration over the same iterations as the step time (TimingTotals::per_iteration).
    point.exposed_communication_us = totals.per_iteration.exposed_communication_us;
    point.out_of_memory = run.oom.has_value();
    points.push_back(std::move(point));
  }
  for (SweepPoint& candidate : points) {
    if (candidate.out_of_memory) continue;
    candidate.pareto = std::none_of(points.begin(), points.end(), [&](const SweepPoint& other) {
      return !other.out_of_memory && Dominates(other, candidate);
    });
  }
  return points;
}

bool FitsBudget(const SweepPoint& point, Bytes budget_bytes) {
  return !point.out_of_memory && point.peak_reserved_bytes <= budget_bytes;
}

BudgetAnswer ChooseUnderBudget(const std::vector<SweepPoint>& points, Bytes budget_bytes) {
  BudgetAnswer answer;
  answer.budget_bytes = budget_bytes;
  std::vector<std::size_t> fitting;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (points[i].out_of_memory) continue;
    if (!answer.smallest ||
        points[i].peak_reserved_bytes < points[*answer.smallest].peak_reserved_bytes) {
      answer.smallest = i;
    }
    if (FitsBudget(points[i], budget_bytes)) fitting.push_back(i);
  }
  std::sort(fitting.begin(), fitting.end(),
            [&](std::size_t a, std::size_t b) { return Preferred(points, a, b); });
  if (!fitting.empty()) answer.best = fitting[0];
  if (fitting.size() > 1) answer.runner_up = fitting[1];
  return answer;
}

}  // namespace bucketsim
