#include "engine/budget_check.h"

#include <utility>

#include <fmt/format.h>

#include "core/closest_name.h"

namespace bucketsim {
namespace {

// "mark 'after forward' never occurs in the trace (its marks: 'after fwd', 'after bwd')": the
// marks it does have, so that a misspelt name can be corrected from the message alone.
Status MarkNeverOccurs(const PolicyFigures& run, const std::string& mark) {
  std::vector<std::string> names;
  std::string list;
  for (const auto& [name, bytes] : run.mark_bytes) {
    names.push_back(name);
    list += fmt::format("{}'{}'", list.empty() ? "" : ", ", name);
  }
  return InvalidArgument(
      fmt::format("mark '{}' never occurs in the trace{} ({})", mark, DidYouMean(mark, names),
                  names.empty() ? std::string("it has no marks") : "its marks: " + list));
}

CheckOutcome Outcome(const std::string& policy, CheckKind kind, Figure figure,
                     std::string mark = {}) {
  CheckOutcome outcome;
  outcome.policy = policy;
  outcome.kind = kind;
  outcome.figure = figure;
  outcome.mark = std::move(mark);
  return outcome;
}

CheckOutcome BytesBudget(const std::string& policy, Figure figure, std::string mark, Bytes value,
                         Bytes limit) {
  CheckOutcome outcome = Outcome(policy, CheckKind::kBudget, figure, std::move(mark));
  outcome.value.bytes = value;
  outcome.limit.bytes = limit;
  outcome.verdict = value <= limit ? Verdict::kPass : Verdict::kFail;
  return outcome;
}

CheckOutcome BytesBaseline(const std::string& policy, Figure figure, std::string mark, Bytes value,
                           Bytes baseline, const Tolerance& tolerance) {
  CheckOutcome outcome = Outcome(policy, CheckKind::kBaseline, figure, std::move(mark));
  outcome.value.bytes = value;
  outcome.limit.bytes = baseline;
  outcome.allowed_growth.bytes = tolerance.AllowedGrowth(baseline);
  outcome.tolerance = tolerance.text;
  bool grew_too_much =
      value > baseline && value - baseline > outcome.allowed_growth.bytes;  // no overflow
  outcome.verdict = grew_too_much ? Verdict::kFail : Verdict::kPass;
  return outcome;
}

}  // namespace

std::string FigureName(Figure figure, const std::string& mark) {
  switch (figure) {
    case Figure::kPeakAllocated:
      return "peak allocated";
    case Figure::kPeakReserved:
      return "peak reserved";
    case Figure::kAtMark:
      return fmt::format("allocated at mark '{}'", mark);
    case Figure::kStepTime:
      return "step time";
  }
  return "?";
}

CheckOutcome CheckFitsDevice(const RunResult& run) {
  BUCKETSIM_CHECK(run.device.has_value());
  CheckOutcome outcome = Outcome(run.policy, CheckKind::kFitsDevice, Figure::kPeakReserved);
  outcome.oom = run.oom;
  outcome.device = run.device;
  outcome.value.bytes = run.peak.reserved_bytes + run.device->overhead.total_bytes();
  outcome.limit.bytes = run.device->device_memory_bytes;
  // The allocator's capacity is the device less the overhead, so a run that did not run out
  // of it fits; the comparison says so again, and fails closed should the two ever disagree.
  outcome.verdict =
      !run.oom && outcome.value.bytes <= outcome.limit.bytes ? Verdict::kPass : Verdict::kFail;
  return outcome;
}

Result<std::vector<CheckOutcome>> CheckBudget(const PolicyFigures& run,
                                              const PolicyBudget& budget) {
  std::vector<CheckOutcome> outcomes;
  if (budget.max_peak_allocated_bytes) {
    outcomes.push_back(BytesBudget(run.policy, Figure::kPeakAllocated, {}, run.peak_allocated_bytes,
                                   *budget.max_peak_allocated_bytes));
  }
  if (budget.max_peak_reserved_bytes) {
    outcomes.push_back(BytesBudget(run.policy, Figure::kPeakReserved, {}, run.peak_reserved_bytes,
                                   *budget.max_peak_reserved_bytes));
  }
  for (const auto& [mark, limit] : budget.max_at_mark_bytes) {
    std::optional<Bytes> value = run.AtMark(mark);
    if (!value) return MarkNeverOccurs(run, mark);
    outcomes.push_back(BytesBudget(run.policy, Figure::kAtMark, mark, *value, limit));
  }
  if (budget.max_step_time_us) {
    if (!run.step_time_us) {
      return InvalidArgument("the trace has no iteration events: there is no step time to check");
    }
    CheckOutcome outcome = Outcome(run.policy, CheckKind::kBudget, Figure::kStepTime);
    outcome.value.us = *run.step_time_us;
    outcome.limit.us = *budget.max_step_time_us;
    outcome.verdict = outcome.value.us <= outcome.limit.us ? Verdict::kPass : Verdict::kFail;
    outcomes.push_back(outcome);
  }
  return outcomes;
}

std::vector<CheckOutcome> CheckBaseline(const PolicyFigures& run, const PolicyFigures* baseline,
                                        const Tolerance& tolerance) {
  if (!baseline || baseline->out_of_memory) {
    CheckOutcome skipped = Outcome(run.policy, CheckKind::kBaseline, Figure::kPeakAllocated);
    skipped.verdict = Verdict::kSkipped;
    skipped.skipped_because = !baseline ? "the baseline report has no policy of this name"
                                        : "the baseline's figures stop at an out-of-memory";
    return {skipped};
  }
  std::vector<CheckOutcome> outcomes;
  outcomes.push_back(BytesBaseline(run.policy, Figure::kPeakAllocated, {}, run.peak_allocated_bytes,
                                   baseline->peak_allocated_bytes, tolerance));
  outcomes.push_back(BytesBaseline(run.policy, Figure::kPeakReserved, {}, run.peak_reserved_bytes,
                                   baseline->peak_reserved_bytes, tolerance));
  for (const auto& [mark, value] : run.mark_bytes) {
    if (std::optional<Bytes> before = baseline->AtMark(mark)) {
      outcomes.push_back(
          BytesBaseline(run.policy, Figure::kAtMark, mark, value, *before, tolerance));
    }
  }
  if (run.step_time_us && baseline->step_time_us) {
    CheckOutcome outcome = Outcome(run.policy, CheckKind::kBaseline, Figure::kStepTime);
    outcome.value.us = *run.step_time_us;
    outcome.limit.us = *baseline->step_time_us;
    outcome.allowed_growth.us = tolerance.AllowedGrowth(*baseline->step_time_us);
    outcome.tolerance = tolerance.text;
    bool grew_too_much = outcome.value.us - outcome.limit.us > outcome.allowed_growth.us;
    outcome.verdict = grew_too_much ? Verdict::kFail : Verdict::kPass;
    outcomes.push_back(outcome);
  }
  return outcomes;
}

}  // namespace bucketsim
