// A CI gate's decisions (`bucketsim check`), in the library so that the command only parses,
// calls and reports: which budgets hold each policy, whether a baseline report was replayed the
// same way as this check, and the outcomes of one replay's runs against all of it.
//
// Budgets combine: "*" of the budget file, then the policy's own entry in it, then the flags;
// each later one replaces the earlier ones' budgets of the same kind (peak allocated, peak
// reserved, each mark by name, step time) and keeps the rest.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/trace_header.h"
#include "engine/budget.h"
#include "engine/budget_check.h"
#include "engine/run_result.h"
#include "io/budget_file.h"
#include "report/report_document.h"

namespace bucketsim {

// What a check holds its runs to, decided before the replay.
struct CheckGate {
  std::vector<std::string> policies;
  std::vector<PolicyBudget> budgets;  // by policy
  std::optional<ReportDocument> baseline;
  std::vector<PolicyFigures> baseline_figures;  // of baseline->runs, in order
  Tolerance tolerance;
  // --device-memory: a check of its own, that every policy runs without running out of it
  // once the memory outside the caching allocator is taken (RunResult::device).
  std::optional<Bytes> device_memory_bytes;

  // The baseline's figures of the policy `policy` (as the user named it), or null.
  const PolicyFigures* BaselineOf(std::string_view policy) const;
};

// Each policy's budgets: `file`'s (null: none) layered under `flags`. A policy held to nothing
// (no budget, and `other_checks` false: no baseline, no device) is an error that says what to
// give.
Result<std::vector<PolicyBudget>> LayerBudgets(const std::vector<std::string>& policies,
                                               const BudgetFile* file, const PolicyBudget& flags,
                                               bool other_checks);

// A baseline is comparable when it replayed the same trace the same way: another memory model
// counts other bytes (never comparable: an error, before the replay), another world size, rank,
// cap or trace another workload. Each difference as "world size 8 (this trace 4)": the header's
// (null: the trace came from stdin, whose header is not compared), the digest's.
Status SameMemoryModel(const ReportDocument& baseline, std::string_view memory_model);
std::vector<std::string> TraceDifferences(const ReportDocument& baseline, const TraceHeader* header,
                                          std::string_view digest);
// After the replay: each policy's cap (--bucket-cap-mb, or its own) against the baseline's.
std::vector<std::string> CapDifferences(const ReportDocument& baseline,
                                        const std::vector<RunResult>& runs);
// The differences as the check says them: none, Ok; `allowed` (--allow-different-trace), a
// NOTE line added to `notes`; else an error that says how to compare anyway.
Status RefuseDifferences(const ReportDocument& baseline,
                         const std::vector<std::string>& differences, bool allowed,
                         std::vector<std::string>& notes);

// Every outcome of `runs` (the replay of gate.policies, in order): the device check where
// there is a device, then, where the run did not run out of it, each budget and each baseline
// figure. A policy none of whose checks was decided (no baseline figures for it, no budget)
// is an error.
Result<std::vector<CheckOutcome>> DecideChecks(const CheckGate& gate,
                                               const std::vector<RunResult>& runs);

}  // namespace bucketsim
