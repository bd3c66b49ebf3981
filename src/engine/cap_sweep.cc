#include "engine/cap_sweep.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace bucketsim {

// Each policy at each cap; a policy that fixes its own cap (unbucketed) only when `with_fixed`.
std::vector<PolicySpec> SweepPolicies(const std::vector<PolicySpec>& policies,
                                      const std::vector<double>& caps_mb, bool with_fixed) {
  std::vector<PolicySpec> expanded;
  for (const PolicySpec& policy : policies) {
    if (policy.cap_mb) {
      if (with_fixed) expanded.push_back(policy);
      continue;
    }
    for (double cap : caps_mb) {
      PolicySpec at_cap = policy;
      at_cap.cap_mb = cap;
      expanded.push_back(at_cap);
    }
  }
  return expanded;
}

namespace {

// The points of the runs so far, with the choices a refinement round looks around.
std::vector<std::size_t> Chosen(const std::vector<RunResult>& runs, double tolerance,
                                std::optional<Bytes> budget, std::vector<SweepPoint>& points) {
  points = SummarizeSweep(runs);
  std::vector<std::size_t> chosen;
  KneeAnswer knee = FindKnee(points, tolerance);
  if (knee.knee) chosen.push_back(*knee.knee);
  if (budget) {
    BudgetAnswer answer = ChooseUnderBudget(points, *budget);
    if (answer.best) chosen.push_back(*answer.best);
  }
  return chosen;
}

}  // namespace

Result<SweepReplays> RunCapSweep(const CapSweep& run) {
  const std::vector<PolicySpec>& policies = run.policies;
  const CapChoice& caps = run.caps;
  SweepReplays sweep;
  // A search needs the thresholds before its first pass: one more read of the trace. Without
  // one, they are collected during the (only) pass.
  std::optional<CapThresholds> thresholds;
  CapThresholdScan scan;
  if (caps.search) {
    if (!run.rescan) {
      return InvalidArgument(
          "--bucket-cap-mb auto or A..B replays the trace several times: give a trace file, not "
          "'-'");
    }
    Result<CapThresholds> scanned = ScanCapThresholds(*run.rescan);
    if (!scanned.ok()) return scanned.status();
    thresholds = std::move(*scanned);
  }
  std::vector<double> round_caps = caps.listed_mb;
  std::optional<CapRange> range = caps.range;
  if (caps.search && !range) {
    range = AutoCapRange(*thresholds);
    if (!range) {
      return InvalidArgument(fmt::format(
          "--bucket-cap-mb auto: {} has no reduce-scatter request, so no cap buckets anything",
          run.trace_name));
    }
  }
  if (range) {
    for (double cap : InitialSearchCaps(*thresholds, *range)) round_caps.push_back(cap);
  }
  std::set<double> tried;
  for (int pass = 1;; ++pass) {
    std::vector<double> fresh;
    for (double cap : round_caps) {
      if (tried.insert(cap).second) fresh.push_back(cap);
    }
    std::vector<PolicySpec> expanded = SweepPolicies(policies, fresh, /*with_fixed=*/pass == 1);
    if (expanded.empty() && pass > 1) break;
    Result<ReplayOutcome> outcome = run.pass(std::move(expanded), thresholds ? nullptr : &scan);
    if (!outcome.ok()) return outcome.status();
    if (pass == 1) {
      sweep.outcome = std::move(*outcome);
      if (!thresholds) thresholds = scan.Take();
      sweep.smallest_bucketing_cap_mb = thresholds->SmallestBucketingCapMb();
    } else {
      for (RunResult& run : outcome->runs) sweep.outcome.runs.push_back(std::move(run));
    }
    if (!range) break;
    sweep.search = CapSearch{range->from_mb, range->to_mb, pass, tried.size(), caps.listed_mb};
    if (pass == kCapSearchMaxRounds) break;
    std::vector<SweepPoint> points;
    std::vector<std::size_t> chosen =
        Chosen(sweep.outcome.runs, run.time_tolerance, run.budget, points);
    round_caps = RefineSearchCaps(points, chosen, tried, *range);
    if (round_caps.empty()) break;
  }
  // The order of the policies, then the cap: the listed and the searched caps interleave.
  auto policy_rank = [&policies](const RunResult& run) {
    auto at = std::find_if(policies.begin(), policies.end(),
                           [&run](const PolicySpec& p) { return p.name == run.policy; });
    return at - policies.begin();
  };
  std::stable_sort(sweep.outcome.runs.begin(), sweep.outcome.runs.end(),
                   [&](const RunResult& a, const RunResult& b) {
                     return std::pair(policy_rank(a), a.bucket_cap_mb) <
                            std::pair(policy_rank(b), b.bucket_cap_mb);
                   });
  return sweep;
}

}  // namespace bucketsim
