#include "engine/sweep_summary.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace bucketsim {
namespace {

bool SameTime(Micros a, Micros b) { return std::abs(a - b) <= 1e-9 * std::max(a, b); }

// a dominates b: no worse on both axes and better on one.
bool Dominates(const SweepPoint& a, const SweepPoint& b) {
  bool no_worse =
      a.peak_reserved_bytes <= b.peak_reserved_bytes && a.step_time_us <= b.step_time_us;
  bool better = a.peak_reserved_bytes < b.peak_reserved_bytes || a.step_time_us < b.step_time_us;
  return no_worse && better;
}

// After time and memory: simpler in effect, simpler as named, smaller cap, canonical spec; the
// index only separates a configuration listed twice.
bool PreferredAmongEqual(const std::vector<SweepPoint>& points, std::size_t a, std::size_t b) {
  const SweepPoint& x = points[a];
  const SweepPoint& y = points[b];
  auto key = [](const SweepPoint& p) {
    return std::tuple(static_cast<int>(EffectiveSimplicity(p)),
                      static_cast<int>(PointSetting(p).simplicity), p.bucket_cap_mb);
  };
  if (key(x) != key(y)) return key(x) < key(y);
  if (x.canonical != y.canonical) return x.canonical < y.canonical;
  return a < b;
}

// Faster first; at the same time, less memory; then PreferredAmongEqual.
bool FasterFirst(const std::vector<SweepPoint>& points, std::size_t a, std::size_t b) {
  const SweepPoint& x = points[a];
  const SweepPoint& y = points[b];
  if (!SameTime(x.step_time_us, y.step_time_us)) return x.step_time_us < y.step_time_us;
  if (x.peak_reserved_bytes != y.peak_reserved_bytes) {
    return x.peak_reserved_bytes < y.peak_reserved_bytes;
  }
  return PreferredAmongEqual(points, a, b);
}

// Less memory first; at the same memory, faster; then PreferredAmongEqual.
bool SmallerFirst(const std::vector<SweepPoint>& points, std::size_t a, std::size_t b) {
  const SweepPoint& x = points[a];
  const SweepPoint& y = points[b];
  if (x.peak_reserved_bytes != y.peak_reserved_bytes) {
    return x.peak_reserved_bytes < y.peak_reserved_bytes;
  }
  if (!SameTime(x.step_time_us, y.step_time_us)) return x.step_time_us < y.step_time_us;
  return PreferredAmongEqual(points, a, b);
}

std::vector<std::size_t> RanAll(const std::vector<SweepPoint>& points) {
  std::vector<std::size_t> ran;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (!points[i].out_of_memory) ran.push_back(i);
  }
  return ran;
}

}  // namespace

SweepPoint SweepPointOf(const RunResult& run) {
  TimingTotals totals = SumTimings(run.iterations, run.collective_summary.totals());
  SweepPoint point;
  point.policy = run.policy;
  point.canonical = run.canonical;
  Result<PolicySpec> spec = ParsePolicySpec(run.canonical);
  // Only what the canonical spec cannot say again: a trace's own implementation setting.
  if (!spec.ok() || run.setting != FrameworkSetting(*spec, run.bucket_cap_mb)) {
    point.setting = run.setting;
  }
  point.bucket_cap_mb = run.bucket_cap_mb;
  point.peak_allocated_bytes = run.peak.allocated_bytes;
  point.peak_reserved_bytes = run.peak.reserved_bytes;
  point.step_time_us = totals.step_time_us;
  // Per iteration over the same iterations as the step time (TimingTotals::per_iteration).
  point.exposed_communication_us = totals.per_iteration.exposed_communication_us;
  point.bucketed_requests = run.counters.bucketed;
  point.bypassed_requests = run.counters.bypasses;
  point.out_of_memory = run.oom.has_value();
  return point;
}

void MarkPareto(std::vector<SweepPoint>& points) {
  for (SweepPoint& candidate : points) {
    if (candidate.out_of_memory) continue;
    candidate.pareto = std::none_of(points.begin(), points.end(), [&](const SweepPoint& other) {
      return !other.out_of_memory && Dominates(other, candidate);
    });
  }
}

std::vector<SweepPoint> SummarizeSweep(const std::vector<RunResult>& runs) {
  std::vector<SweepPoint> points;
  for (const RunResult& run : runs) points.push_back(SweepPointOf(run));
  MarkPareto(points);
  return points;
}

namespace {

// The advice of `point`'s canonical spec at `cap_mb`, quoting the trace's own setting where
// the point carries one.
SettingAdvice AdviceOf(const SweepPoint& point, double cap_mb) {
  Result<PolicySpec> spec = ParsePolicySpec(point.canonical);
  PolicySpec resolved = spec.ok() ? *spec : PolicySpec{};
  resolved.setting = point.setting;
  return SettingFor(resolved, cap_mb);
}

}  // namespace

SettingAdvice PointSetting(const SweepPoint& point) { return AdviceOf(point, point.bucket_cap_mb); }

Simplicity EffectiveSimplicity(const SweepPoint& point) {
  SettingAdvice setting = PointSetting(point);
  // fairscale's cap decides what is bucketed (the shard size): at a cap that buckets nothing
  // every request takes the bypass path, exactly as with bucket_cap_mb=0.
  if (point.bucketed_requests == 0 && setting.strategy == Strategy::kFairscale) {
    return Simplicity::kUnbucketed;
  }
  return setting.simplicity;
}

bool SameFigures(const SweepPoint& a, const SweepPoint& b) {
  return a.peak_reserved_bytes == b.peak_reserved_bytes && SameTime(a.step_time_us, b.step_time_us);
}

std::vector<std::size_t> TiesOf(const std::vector<SweepPoint>& points, std::size_t i) {
  std::vector<std::size_t> ties;
  for (std::size_t j : RanAll(points)) {
    if (j != i && SameFigures(points[i], points[j])) ties.push_back(j);
  }
  std::sort(ties.begin(), ties.end(),
            [&](std::size_t a, std::size_t b) { return FasterFirst(points, a, b); });
  return ties;
}

bool FitsBudget(const SweepPoint& point, Bytes budget_bytes) {
  return !point.out_of_memory && point.peak_reserved_bytes <= budget_bytes;
}

BudgetAnswer ChooseUnderBudget(const std::vector<SweepPoint>& points, Bytes budget_bytes) {
  BudgetAnswer answer;
  answer.budget_bytes = budget_bytes;
  std::vector<std::size_t> ran = RanAll(points);
  if (ran.empty()) return answer;
  answer.smallest = *std::min_element(ran.begin(), ran.end(), [&](std::size_t a, std::size_t b) {
    return SmallerFirst(points, a, b);
  });
  std::vector<std::size_t> fitting;
  std::copy_if(ran.begin(), ran.end(), std::back_inserter(fitting),
               [&](std::size_t i) { return FitsBudget(points[i], budget_bytes); });
  std::sort(fitting.begin(), fitting.end(),
            [&](std::size_t a, std::size_t b) { return FasterFirst(points, a, b); });
  if (fitting.empty()) return answer;
  answer.best = fitting[0];
  answer.ties = TiesOf(points, fitting[0]);
  for (std::size_t i : fitting) {
    if (!SameFigures(points[i], points[fitting[0]])) {
      answer.runner_up = i;
      break;
    }
  }
  return answer;
}

KneeAnswer FindKnee(const std::vector<SweepPoint>& points, double time_tolerance) {
  KneeAnswer answer;
  answer.time_tolerance = time_tolerance;
  std::vector<std::size_t> ran = RanAll(points);
  if (ran.empty()) return answer;
  answer.fastest = *std::min_element(ran.begin(), ran.end(), [&](std::size_t a, std::size_t b) {
    return FasterFirst(points, a, b);
  });
  const Micros limit_us = points[*answer.fastest].step_time_us * (1 + time_tolerance);
  std::vector<std::size_t> within;
  std::copy_if(ran.begin(), ran.end(), std::back_inserter(within), [&](std::size_t i) {
    return points[i].step_time_us <= limit_us || SameTime(points[i].step_time_us, limit_us);
  });
  answer.knee = *std::min_element(within.begin(), within.end(), [&](std::size_t a, std::size_t b) {
    return SmallerFirst(points, a, b);
  });
  answer.ties = TiesOf(points, *answer.knee);
  return answer;
}

std::optional<std::size_t> Recommended(const SweepSection& sweep) {
  if (sweep.budget) return sweep.budget->best;
  return sweep.knee.knee;
}

SettingAdvice RecommendedSetting(const SweepSection& sweep) {
  std::optional<std::size_t> chosen = Recommended(sweep);
  BUCKETSIM_CHECK(chosen.has_value());
  const SweepPoint& p = sweep.points[*chosen];
  const bool unbucketed_in_effect = EffectiveSimplicity(p) == Simplicity::kUnbucketed;
  return AdviceOf(p, unbucketed_in_effect ? 0 : p.bucket_cap_mb);
}

}  // namespace bucketsim
