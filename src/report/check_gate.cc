#include "report/check_gate.h"

#include <fmt/format.h>

namespace bucketsim {

const PolicyFigures* CheckGate::BaselineOf(std::string_view policy) const {
  for (const PolicyFigures& figures : baseline_figures) {
    if (figures.policy == policy) return &figures;
  }
  return nullptr;
}

Result<std::vector<PolicyBudget>> LayerBudgets(const std::vector<std::string>& policies,
                                               const BudgetFile* file, const PolicyBudget& flags,
                                               bool other_checks) {
  std::vector<PolicyBudget> budgets;
  for (const std::string& policy : policies) {
    PolicyBudget budget = file ? file->For(policy) : PolicyBudget{};
    budget.OverrideWith(flags);
    if (budget.empty() && !other_checks) {
      return InvalidArgument(fmt::format(
          "nothing to check for policy '{}': give a budget (--budget FILE, --max-peak-allocated, "
          "--max-peak-reserved, --max-at-mark, --max-step-time-us), --device-memory SIZE or "
          "--baseline REPORT.json",
          policy));
    }
    budgets.push_back(std::move(budget));
  }
  return budgets;
}

Status SameMemoryModel(const ReportDocument& baseline, std::string_view memory_model) {
  if (baseline.context.memory_model == memory_model) return Status::Ok();
  return InvalidArgument(
      fmt::format("{}: the baseline was replayed with memory model '{}', this check with '{}' "
                  "(--allocator, --alloc-conf): their figures are not comparable",
                  baseline.source, baseline.context.memory_model, memory_model));
}

std::vector<std::string> TraceDifferences(const ReportDocument& baseline, const TraceHeader* header,
                                          std::string_view digest) {
  std::vector<std::string> differences;
  const auto differ = [&](std::string_view what, auto baseline_value, auto this_value) {
    if (baseline_value != this_value) {
      differences.push_back(fmt::format("{} {} (this trace {})", what, baseline_value, this_value));
    }
  };
  if (header != nullptr) {
    differ("world size", baseline.trace.world_size, header->world_size);
    differ("rank", baseline.trace.rank, header->rank);
    differ("bucket_cap_mb", baseline.trace.bucket_cap_mb, header->bucket_cap_mb);
  }
  if (baseline.context.trace_digest != digest) {
    differences.push_back(
        fmt::format("trace digest {} (this trace {})", baseline.context.trace_digest, digest));
  }
  return differences;
}

std::vector<std::string> CapDifferences(const ReportDocument& baseline,
                                        const std::vector<RunResult>& runs) {
  std::vector<std::string> differences;
  for (const RunResult& run : runs) {
    for (const RunResult& earlier : baseline.runs) {
      if (earlier.policy == run.policy && earlier.bucket_cap_mb != run.bucket_cap_mb) {
        differences.push_back(fmt::format("{}'s bucket cap {} MiB (this check {} MiB)", run.policy,
                                          earlier.bucket_cap_mb, run.bucket_cap_mb));
      }
    }
  }
  return differences;
}

Status RefuseDifferences(const ReportDocument& baseline,
                         const std::vector<std::string>& differences, bool allowed,
                         std::vector<std::string>& notes) {
  if (differences.empty()) return Status::Ok();
  std::string list;
  for (const std::string& d : differences) list += (list.empty() ? "" : "; ") + d;
  if (allowed) {
    notes.push_back(fmt::format("NOTE: the baseline {} differs (--allow-different-trace): {}",
                                baseline.source, list));
    return Status::Ok();
  }
  return InvalidArgument(fmt::format(
      "{}: the baseline is not comparable with this check: it has {}; regenerate it, or give "
      "--allow-different-trace to compare anyway",
      baseline.source, list));
}

Result<std::vector<CheckOutcome>> DecideChecks(const CheckGate& gate,
                                               const std::vector<RunResult>& runs) {
  BUCKETSIM_CHECK(runs.size() == gate.budgets.size());
  std::vector<CheckOutcome> outcomes;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunResult& run = runs[i];
    // Without --device-memory nothing can run out, and there is nothing to check.
    if (gate.device_memory_bytes) outcomes.push_back(CheckFitsDevice(run));
    // A policy that does not fit the device fails: its figures stop at the OOM.
    if (run.oom) continue;
    const PolicyFigures figures = FiguresOf(run);
    Result<std::vector<CheckOutcome>> budget = CheckBudget(figures, gate.budgets[i]);
    if (!budget.ok()) return budget.status();
    outcomes.insert(outcomes.end(), budget->begin(), budget->end());
    if (gate.baseline) {
      std::vector<CheckOutcome> growth =
          CheckBaseline(figures, gate.BaselineOf(run.policy), gate.tolerance);
      outcomes.insert(outcomes.end(), growth.begin(), growth.end());
    }
  }
  // A policy whose only check was skipped (no baseline for it, no budget) was not checked.
  for (const RunResult& run : runs) {
    bool decided = false;
    for (const CheckOutcome& checked : outcomes) {
      decided |= checked.policy == run.policy && checked.verdict != Verdict::kSkipped;
    }
    if (!decided) {
      return InvalidArgument(fmt::format(
          "nothing was checked for policy '{}': the baseline has no figures for it and no "
          "budget was given",
          run.policy));
    }
  }
  return outcomes;
}

}  // namespace bucketsim
