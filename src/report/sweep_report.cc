#include "report/sweep_report.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "engine/cap_search.h"

namespace bucketsim {
namespace {

std::string Name(const SweepPoint& p) {
  if (p.bucket_cap_mb <= 0) return p.policy;
  return fmt::format("{} at cap {:g} MiB", p.policy, p.bucket_cap_mb);
}

std::uint64_t Requests(const SweepPoint& p) { return p.bucketed_requests + p.bypassed_requests; }

// "a", "a and b", "a, b and c"
std::string JoinAnd(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? " and " : ", ";
    out += items[i];
  }
  return out;
}

// "12.00 MiB more" / "3.00 MiB less" / "the same memory"
std::string MemoryDelta(Bytes a, Bytes b, ByteUnit unit) {
  if (a == b) return "the same peak reserved memory";
  return a > b ? fmt::format("{} more peak reserved memory", WithUnit(a - b, unit))
               : fmt::format("{} less peak reserved memory", WithUnit(b - a, unit));
}

// Why `chosen` and not the points that tie with it: the order of sweep_summary.h.
std::string DescribeTies(const std::vector<SweepPoint>& points, std::size_t chosen,
                         const std::vector<std::size_t>& ties) {
  if (ties.empty()) return "";
  constexpr std::size_t kNamed = 3;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < ties.size() && i < kNamed; ++i)
    names.push_back(Name(points[ties[i]]));
  if (ties.size() > kNamed) names.push_back(fmt::format("{} more", ties.size() - kNamed));
  const SweepPoint& c = points[chosen];
  const bool by_simplicity = std::any_of(ties.begin(), ties.end(), [&](std::size_t i) {
    return EffectiveSimplicity(points[i]) != EffectiveSimplicity(c) ||
           PointSetting(points[i]).simplicity != PointSetting(c).simplicity;
  });
  return fmt::format(
      " It ties with {} (the same step time and peak reserved) and is preferred as {}.",
      JoinAnd(names),
      by_simplicity ? "the simpler policy (unbucketed < backward-only < per-group-dedup < "
                      "always-allocated; a cap that buckets nothing counts as unbucketed)"
                    : "the smaller cap");
}

// What a cap does to the trace's reduce requests, when it is not "all of them": `caps` share
// the counts of `p`.
std::string DescribeCoverageOf(const std::vector<double>& caps, const SweepPoint& p) {
  std::vector<std::string> spelled;
  for (double cap : caps) spelled.push_back(fmt::format("{:g}", cap));
  const std::string which =
      fmt::format("{} {} MiB", caps.size() == 1 ? "Cap" : "Caps", JoinAnd(spelled));
  const char* s = caps.size() == 1 ? "s" : "";
  if (p.bucketed_requests == 0) {
    return fmt::format(
        "{} bucket{} nothing: all {} reduce requests are larger than the shard size and bypass "
        "the bucket, so every policy there reduces as unbucketed",
        which, s, Requests(p));
  }
  return fmt::format(
      "{} bucket{} only {} of {} reduce requests ({} are larger than the shard size and bypass "
      "the bucket)",
      which, s, p.bucketed_requests, Requests(p), p.bypassed_requests);
}

std::string DescribeCoverage(const SweepSection& sweep) {
  std::set<double> caps;
  for (std::size_t i : SweepTableRows(sweep)) {
    const SweepPoint& p = sweep.points[i];
    if (p.bucket_cap_mb > 0 && p.bypassed_requests > 0) caps.insert(p.bucket_cap_mb);
  }
  // Runs of caps (ascending) with the same counts make one sentence.
  std::string text;
  std::vector<double> run;
  const SweepPoint* counts = nullptr;
  auto flush = [&] {
    if (run.empty()) return;
    text += (text.empty() ? "" : " ") + DescribeCoverageOf(run, *counts) + ".";
    run.clear();
  };
  for (double cap : caps) {
    const SweepPoint& p =
        *std::find_if(sweep.points.begin(), sweep.points.end(),
                      [cap](const SweepPoint& q) { return q.bucket_cap_mb == cap; });
    if (counts && (p.bucketed_requests != counts->bucketed_requests ||
                   p.bypassed_requests != counts->bypassed_requests)) {
      flush();
    }
    counts = &p;
    run.push_back(cap);
  }
  flush();
  if (text.empty()) return "";
  if (sweep.smallest_bucketing_cap_mb) {
    // Written as the search writes caps, three significant digits rounded up (a threshold
    // rounded up still buckets its request), not as the exact 0.413818359375 beside them.
    text += fmt::format(" The least cap that buckets any request is {:g} MiB.",
                        RoundCapUp(*sweep.smallest_bucketing_cap_mb));
  }
  return text;
}

std::string DescribeSearch(const SweepSection& sweep) {
  if (!sweep.search) return "";
  const CapSearch& s = *sweep.search;
  return fmt::format(
      "Searched bucket_cap_mb from {:g} to {:g} MiB: {} caps in {} pass(es) over the trace (every "
      "cap where a request starts to be bucketed, a geometric grid, then caps between the choice "
      "and its neighbours where the figures change), {} configurations in all; the table lists "
      "the Pareto-optimal, the chosen and the listed ones, the JSON report every one.",
      s.from_mb, s.to_mb, s.caps, s.passes, sweep.points.size());
}

std::string DescribeKnee(const SweepSection& sweep, ByteUnit unit) {
  const KneeAnswer& k = sweep.knee;
  if (!k.knee || !k.fastest) return "";
  const std::vector<SweepPoint>& points = sweep.points;
  const SweepPoint& knee = points[*k.knee];
  const SweepPoint& fastest = points[*k.fastest];
  std::string text;
  if (*k.knee == *k.fastest) {
    text = fmt::format(
        "Knee: {} is the fastest (step {} ms) and has the least peak reserved ({}) of the "
        "configurations within {:g}% of it.",
        Name(knee), Ms(knee.step_time_us), WithUnit(knee.peak_reserved_bytes, unit),
        k.time_tolerance * 100);
  } else {
    text = fmt::format(
        "Knee: {} has the least peak reserved ({}) of the configurations within {:g}% of the "
        "fastest step ({} ms, {}); its step is {} ms, and it saves {} against the fastest.",
        Name(knee), WithUnit(knee.peak_reserved_bytes, unit), k.time_tolerance * 100,
        Ms(fastest.step_time_us), Name(fastest), Ms(knee.step_time_us),
        fastest.peak_reserved_bytes >= knee.peak_reserved_bytes
            ? WithUnit(fastest.peak_reserved_bytes - knee.peak_reserved_bytes, unit)
            : "-" + WithUnit(knee.peak_reserved_bytes - fastest.peak_reserved_bytes, unit));
  }
  return text + DescribeTies(points, *k.knee, k.ties);
}

// The setting to use for the recommended point, in its framework's words.
std::string DescribeSetting(const SweepSection& sweep) {
  std::optional<std::size_t> chosen = Recommended(sweep);
  if (!chosen) return "";
  const SweepPoint& p = sweep.points[*chosen];
  // A cap that buckets nothing is bucket_cap_mb=0 in effect: say so rather than name the cap.
  const bool unbucketed_in_effect =
      p.bucket_cap_mb > 0 && EffectiveSimplicity(p) == Simplicity::kUnbucketed;
  const SettingAdvice setting = RecommendedSetting(sweep);
  std::string text = fmt::format("Setting for {} ({}): {} — {}.", Name(p), setting.framework,
                                 setting.setting, setting.note);
  if (unbucketed_in_effect) {
    text += fmt::format(
        " Cap {:g} MiB buckets none of the {} requests, so this is the same as "
        "bucket_cap_mb=0.",
        p.bucket_cap_mb, Requests(p));
  }
  return text;
}

}  // namespace

std::vector<std::size_t> SweepTableRows(const SweepSection& sweep) {
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < sweep.points.size(); ++i) rows.push_back(i);
  if (!sweep.search) return rows;
  std::set<std::size_t> keep;
  auto add = [&keep](std::optional<std::size_t> i) {
    if (i) keep.insert(*i);
  };
  add(sweep.knee.knee);
  add(sweep.knee.fastest);
  keep.insert(sweep.knee.ties.begin(), sweep.knee.ties.end());
  if (sweep.budget) {
    add(sweep.budget->best);
    add(sweep.budget->runner_up);
    add(sweep.budget->smallest);
    keep.insert(sweep.budget->ties.begin(), sweep.budget->ties.end());
  }
  const std::vector<double>& listed = sweep.search->listed_mb;
  for (std::size_t i : rows) {
    const SweepPoint& p = sweep.points[i];
    if (p.pareto || p.bucket_cap_mb <= 0 ||
        std::find(listed.begin(), listed.end(), p.bucket_cap_mb) != listed.end()) {
      keep.insert(i);
    }
  }
  return {keep.begin(), keep.end()};
}

Table BuildSweepTable(const SweepSection& sweep, ByteUnit unit) {
  Table table;
  table.headers = {"policy",
                   "cap (MiB)",
                   "bucketed (requests)",
                   fmt::format("peak alloc ({})", unit.name),
                   fmt::format("peak reserved ({})", unit.name),
                   "step time (ms)",
                   "exposed comm (ms)",
                   "pareto"};
  table.right_aligned = {false, true, true, true, true, true, true, false};
  table.key_columns = 2;  // a row is a policy at a cap
  if (sweep.budget) {
    table.headers.push_back(fmt::format("fits {}", WithUnit(sweep.budget->budget_bytes, unit)));
    table.right_aligned.push_back(false);
  }
  table.headers.push_back("chosen");
  table.right_aligned.push_back(false);
  auto contains = [](const std::vector<std::size_t>& v, std::size_t i) {
    return std::find(v.begin(), v.end(), i) != v.end();
  };
  for (std::size_t i : SweepTableRows(sweep)) {
    const SweepPoint& p = sweep.points[i];
    std::vector<std::string> row = {p.policy,
                                    fmt::format("{:g}", p.bucket_cap_mb),
                                    fmt::format("{}/{}", p.bucketed_requests, Requests(p)),
                                    InUnit(p.peak_allocated_bytes, unit),
                                    InUnit(p.peak_reserved_bytes, unit),
                                    p.out_of_memory ? "OOM" : Ms(p.step_time_us),
                                    p.out_of_memory ? "OOM" : Ms(p.exposed_communication_us),
                                    p.pareto ? "*" : ""};
    std::vector<std::string> chosen;
    if (sweep.knee.knee == i) chosen.push_back("knee");
    if (contains(sweep.knee.ties, i)) chosen.push_back("ties knee");
    if (sweep.budget) {
      row.emplace_back(FitsBudget(p, sweep.budget->budget_bytes) ? "yes" : "no");
      if (sweep.budget->best == i) chosen.push_back("budget");
      if (contains(sweep.budget->ties, i)) chosen.push_back("ties budget");
    }
    std::string chosen_text;
    for (const std::string& c : chosen) chosen_text += (chosen_text.empty() ? "" : ", ") + c;
    row.push_back(std::move(chosen_text));
    table.rows.push_back(std::move(row));
  }
  return table;
}

Table BuildParetoSweepTable(const SweepSection& sweep, ByteUnit unit) {
  Table table = BuildSweepTable(sweep, unit);
  // Row r is the point SweepTableRows()[r]: after a cap search the table lists only some of the
  // points, so rows do not follow points.
  const std::vector<std::size_t> points = SweepTableRows(sweep);
  std::vector<std::vector<std::string>> rows;
  for (std::size_t r = 0; r < points.size(); ++r) {
    if (sweep.points[points[r]].pareto) rows.push_back(std::move(table.rows[r]));
  }
  table.rows = std::move(rows);
  return table;
}

std::vector<std::string> SweepAdvice(const SweepSection& sweep, ByteUnit unit) {
  std::vector<std::string> paragraphs = SweepFindings(sweep, unit);
  for (std::string& paragraph : SweepRecommendation(sweep, unit)) {
    paragraphs.push_back(std::move(paragraph));
  }
  return paragraphs;
}

std::vector<std::string> SweepFindings(const SweepSection& sweep, ByteUnit unit) {
  std::vector<std::string> paragraphs = {DescribeSearch(sweep), DescribeCoverage(sweep)};
  // With a budget the budget's answer is the recommendation; the knee is a finding beside it.
  if (sweep.budget) paragraphs.push_back(DescribeKnee(sweep, unit));
  std::erase_if(paragraphs, [](const std::string& p) { return p.empty(); });
  return paragraphs;
}

std::vector<std::string> SweepRecommendation(const SweepSection& sweep, ByteUnit unit) {
  std::vector<std::string> paragraphs;
  if (sweep.budget) {
    paragraphs.push_back(DescribeBudget(sweep.points, *sweep.budget, unit) +
                         (sweep.budget->best
                              ? DescribeTies(sweep.points, *sweep.budget->best, sweep.budget->ties)
                              : ""));
  } else {
    paragraphs.push_back(DescribeKnee(sweep, unit));
  }
  paragraphs.push_back(DescribeSetting(sweep));
  std::erase_if(paragraphs, [](const std::string& p) { return p.empty(); });
  return paragraphs;
}

std::string RecommendationHeadline(const SweepSection& sweep, ByteUnit unit) {
  const std::optional<std::size_t> chosen = Recommended(sweep);
  if (!chosen) return "";
  const std::string name = Name(sweep.points[*chosen]);
  if (sweep.budget) {
    return fmt::format("Recommended: {}, the fastest configuration that fits the budget of {}.",
                       name, WithUnit(sweep.budget->budget_bytes, unit));
  }
  return fmt::format(
      "Recommended: {}, the least peak reserved memory within {:g}% of the fastest step.", name,
      sweep.knee.time_tolerance * 100);
}

std::string DescribeBudget(const std::vector<SweepPoint>& points, const BudgetAnswer& answer,
                           ByteUnit unit) {
  if (!answer.best) {
    if (!answer.smallest)
      return fmt::format("budget {}: no configuration ran to the end.",
                         WithUnit(answer.budget_bytes, unit));
    const SweepPoint& s = points[*answer.smallest];
    return fmt::format(
        "budget {}: nothing fits; the smallest is {} with {} peak reserved ({} over).",
        WithUnit(answer.budget_bytes, unit), Name(s), WithUnit(s.peak_reserved_bytes, unit),
        WithUnit(s.peak_reserved_bytes - answer.budget_bytes, unit));
  }
  const SweepPoint& best = points[*answer.best];
  std::string text =
      fmt::format("budget {}: fastest that fits is {}: step {} ms, peak reserved {} ({} to spare)",
                  WithUnit(answer.budget_bytes, unit), Name(best), Ms(best.step_time_us),
                  WithUnit(best.peak_reserved_bytes, unit),
                  WithUnit(answer.budget_bytes - best.peak_reserved_bytes, unit));
  if (!answer.runner_up) {
    return text + (answer.ties.empty() ? "; it is the only configuration that fits."
                                       : "; nothing else that fits differs from it.");
  }
  const SweepPoint& next = points[*answer.runner_up];
  return text +
         fmt::format("; against the runner-up {} (step {} ms) it is {} ms faster and uses {}.",
                     Name(next), Ms(next.step_time_us), Ms(next.step_time_us - best.step_time_us),
                     MemoryDelta(best.peak_reserved_bytes, next.peak_reserved_bytes, unit));
}

namespace {

// The same configuration in two sweeps: the policy as named, at the same cap.
bool SameConfiguration(const SweepPoint& a, const SweepPoint& b) {
  return a.policy == b.policy && a.bucket_cap_mb == b.bucket_cap_mb;
}

bool FitsIn(const SweepSection& sweep, const SweepPoint& p, Bytes budget_bytes) {
  return std::any_of(sweep.points.begin(), sweep.points.end(), [&](const SweepPoint& q) {
    return SameConfiguration(p, q) && FitsBudget(q, budget_bytes);
  });
}

}  // namespace

std::string DescribeBudgetAcrossTraces(const std::vector<std::string>& traces,
                                       const std::vector<const SweepSection*>& sweeps,
                                       ByteUnit unit) {
  if (sweeps.size() < 2 || !sweeps.front()->budget) return "";
  const Bytes budget = sweeps.front()->budget->budget_bytes;
  std::vector<std::string> fit;
  for (const SweepPoint& p : sweeps.front()->points) {
    if (std::all_of(sweeps.begin(), sweeps.end(),
                    [&](const SweepSection* s) { return FitsIn(*s, p, budget); })) {
      fit.push_back(Name(p));
    }
  }
  const std::string head =
      fmt::format("Across the {} traces, budget {}:", sweeps.size(), WithUnit(budget, unit));
  if (fit.empty()) return head + " no configuration fits on every trace.";
  constexpr std::size_t kNamed = 6;
  const std::size_t fitting = fit.size();
  if (fitting > kNamed) {
    fit.resize(kNamed);
    fit.push_back(fmt::format("{} more", fitting - kNamed));
  }
  std::string text = fmt::format(
      "{} {} fit{} on every trace ({})", head,
      fitting == 1 ? std::string("1 configuration") : fmt::format("{} configurations", fitting),
      fitting == 1 ? "s" : "", JoinAnd(fit));
  // Each trace's fastest that fits (one fits on every trace, so each has one).
  std::vector<const SweepPoint*> best;
  for (const SweepSection* s : sweeps) best.push_back(&s->points[*s->budget->best]);
  if (std::all_of(best.begin(), best.end(),
                  [&](const SweepPoint* b) { return SameConfiguration(*b, *best.front()); })) {
    return text + fmt::format("; the fastest that fits is {} on every trace.", Name(*best.front()));
  }
  std::vector<std::string> each;
  for (std::size_t i = 0; i < sweeps.size(); ++i) {
    each.push_back(fmt::format("{} for {}", Name(*best[i]), traces[i]));
  }
  return text +
         fmt::format("; the fastest that fits is not the same on every trace: {}.", JoinAnd(each));
}

}  // namespace bucketsim
