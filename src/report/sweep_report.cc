#include "report/sweep_report.h"

#include <fmt/format.h>

namespace bucketsim {
namespace {

std::string Name(const SweepPoint& p) {
  return fmt::format("{} at cap {:g} MiB", p.policy, p.bucket_cap_mb);
}

// "12.00 MiB more" / "3.00 MiB less" / "the same memory"
std::string MemoryDelta(Bytes a, Bytes b) {
  if (a == b) return "the same peak reserved memory";
  return a > b ? fmt::format("{} MiB more peak reserved memory", Mib(a - b))
               : fmt::format("{} MiB less peak reserved memory", Mib(b - a));
}

}  // namespace

Table BuildSweepTable(const SweepSection& sweep) {
  Table table;
  table.headers = {"policy",
                   "cap (MiB)",
                   "peak alloc (MiB)",
                   "peak reserved (MiB)",
                   "step time (ms)",
                   "exposed comm (ms)",
                   "pareto"};
  table.right_aligned = {false, true, true, true, true, true, false};
  if (sweep.budget) {
    table.headers.push_back(fmt::format("fits {} MiB", Mib(sweep.budget->budget_bytes)));
    table.right_aligned.push_back(false);
  }
  for (const SweepPoint& p : sweep.points) {
    std::vector<std::string> row = {p.policy,
                                    fmt::format("{:g}", p.bucket_cap_mb),
                                    Mib(p.peak_allocated_bytes),
                                    Mib(p.peak_reserved_bytes),
                                    p.out_of_memory ? "OOM" : Ms(p.step_time_us),
                                    p.out_of_memory ? "OOM" : Ms(p.exposed_communication_us),
                                    p.pareto ? "*" : ""};
    if (sweep.budget) {
      row.emplace_back(FitsBudget(p, sweep.budget->budget_bytes) ? "yes" : "no");
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

std::string DescribeBudget(const std::vector<SweepPoint>& points, const BudgetAnswer& answer) {
  if (!answer.best) {
    if (!answer.smallest)
      return fmt::format("budget {} MiB: no configuration ran to the end",
                         Mib(answer.budget_bytes));
    const SweepPoint& s = points[*answer.smallest];
    return fmt::format(
        "budget {} MiB: nothing fits; the smallest is {} with {} MiB peak reserved ({} MiB over)",
        Mib(answer.budget_bytes), Name(s), Mib(s.peak_reserved_bytes),
        Mib(s.peak_reserved_bytes - answer.budget_bytes));
  }
  const SweepPoint& best = points[*answer.best];
  std::string text = fmt::format(
      "budget {} MiB: fastest that fits is {}: step {} ms, peak reserved {} MiB ({} MiB to spare)",
      Mib(answer.budget_bytes), Name(best), Ms(best.step_time_us), Mib(best.peak_reserved_bytes),
      Mib(answer.budget_bytes - best.peak_reserved_bytes));
  if (!answer.runner_up) return text + "; it is the only configuration that fits";
  const SweepPoint& next = points[*answer.runner_up];
  if (next.step_time_us == best.step_time_us &&
      next.peak_reserved_bytes == best.peak_reserved_bytes) {
    return text + fmt::format("; it ties with the runner-up {} (same step time and peak reserved)",
                              Name(next));
  }
  return text +
         fmt::format("; against the runner-up {} (step {} ms) it is {} ms faster and uses {}",
                     Name(next), Ms(next.step_time_us), Ms(next.step_time_us - best.step_time_us),
                     MemoryDelta(best.peak_reserved_bytes, next.peak_reserved_bytes));
}

}  // namespace bucketsim
