// bucketsim check TRACE [--policy P]... [--budget FILE] [--max-...] [--device-memory SIZE]
// [--baseline REPORT.json [--tolerance T]...] [--junit FILE]: a CI gate. One line per check, a
// verdict line, exit 0 when every check passes and 1 when one fails. Anything that keeps the check
// from being decided (bad trace, bad budget or baseline file, bad size, a mark that never occurs, a
// policy with nothing to check) is exit 2: an error never passes.
//
// What the check decides (budgets layered, a baseline's comparability, the outcomes) is
// report/check_gate.h's; this file parses, calls and reports.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>

#include <fmt/format.h>

#include "cli/command.h"
#include "engine/budget_check.h"
#include "io/budget_file.h"
#include "io/trace_reader.h"
#include "report/check_gate.h"
#include "report/check_report.h"
#include "report/json_report.h"
#include "report/junit_writer.h"
#include "report/report_reader.h"

namespace bucketsim {
namespace {

struct CheckFlags {
  ReplayFlags replay;
  std::string max_peak_allocated;
  std::string max_peak_reserved;
  std::vector<std::string> max_at_mark;
  std::optional<double> max_step_time_us;
  std::string budget_path;
  std::string baseline_path;
  std::vector<std::string> tolerances;
  std::string junit_path;
  bool allow_different_trace = false;
};

// The budgets the flags give; they apply to every policy the check replays.
Result<PolicyBudget> FlagBudget(const CheckFlags& flags) {
  PolicyBudget budget;
  if (!flags.max_peak_allocated.empty()) {
    Result<Bytes> limit = ParseBudgetFlag("--max-peak-allocated", flags.max_peak_allocated);
    if (!limit.ok()) return limit.status();
    budget.max_peak_allocated_bytes = *limit;
  }
  if (!flags.max_peak_reserved.empty()) {
    Result<Bytes> limit = ParseBudgetFlag("--max-peak-reserved", flags.max_peak_reserved);
    if (!limit.ok()) return limit.status();
    budget.max_peak_reserved_bytes = *limit;
  }
  for (const std::string& item : flags.max_at_mark) {
    std::size_t eq = item.rfind('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument(fmt::format("--max-at-mark '{}': expected NAME=SIZE", item));
    }
    Result<Bytes> limit = ParseBudgetFlag("--max-at-mark", item.substr(eq + 1));
    if (!limit.ok()) return limit.status();
    budget.SetMark(item.substr(0, eq), *limit);
  }
  if (flags.max_step_time_us) {
    if (!(*flags.max_step_time_us >= 0)) {
      return InvalidArgument("--max-step-time-us: must be a number of microseconds >= 0");
    }
    budget.max_step_time_us = *flags.max_step_time_us;
  }
  return budget;
}

// Everything the check needs before it replays, read and checked up front, so that a bad
// file fails in milliseconds, not after a long replay.
Result<CheckGate> Plan(const CheckFlags& flags) {
  CheckGate plan;
  Result<PolicyBudget> flag_budget = FlagBudget(flags);
  if (!flag_budget.ok()) return flag_budget.status();
  std::optional<BudgetFile> file;
  if (!flags.budget_path.empty()) {
    Result<BudgetFile> read = ReadBudgetFile(flags.budget_path);
    if (!read.ok()) return read.status();
    file = std::move(*read);
  }
  if (!flags.replay.device_memory.empty()) {
    Result<Bytes> capacity = ParseDeviceMemoryFlag(flags.replay.device_memory);
    if (!capacity.ok()) return capacity.status();
    plan.device_memory_bytes = *capacity;
  }
  for (const std::string& text : flags.tolerances) {
    BUCKETSIM_RETURN_IF_ERROR(ParseTolerance(text, plan.tolerance));
  }
  if (!flags.tolerances.empty() && flags.baseline_path.empty()) {
    return InvalidArgument("--tolerance needs --baseline REPORT.json");
  }
  if (!flags.baseline_path.empty()) {
    Result<ReportDocument> read = ReadReportFile(flags.baseline_path, ReportContent::kFigures);
    if (!read.ok()) return read.status();
    plan.baseline = std::move(*read);
    for (std::size_t i = 0; i < plan.baseline->runs.size(); ++i) {
      plan.baseline_figures.push_back(FiguresOf(*plan.baseline, i));
    }
  }
  plan.policies = flags.replay.policies;
  if (plan.policies.empty() && file) {
    for (const auto& [name, budget] : file->policies) plan.policies.push_back(name);
  }
  // A trace emitted for PyTorch's FSDP1 or FSDP2 has one policy that is its run's own: it is
  // the one checked when none is named ("does it fit": check TRACE --device-memory 80GiB).
  if (plan.policies.empty()) {
    if (std::optional<PolicySpec> own = OwnPolicyOf(flags.replay)) {
      plan.policies.push_back(own->name);
    }
  }
  if (plan.policies.empty()) {
    return InvalidArgument(
        file ? fmt::format("{}: names no policy but \"*\": give --policy", flags.budget_path)
             : std::string("no policy: give --policy P (repeatable) or a "
                           "--budget file that names policies"));
  }
  Result<std::vector<PolicyBudget>> budgets =
      LayerBudgets(plan.policies, file ? &*file : nullptr, *flag_budget,
                   plan.baseline.has_value() || plan.device_memory_bytes.has_value());
  if (!budgets.ok()) return budgets.status();
  plan.budgets = std::move(*budgets);
  return plan;
}

std::string UtcTimestamp(std::chrono::system_clock::time_point when) {
  std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", utc.tm_year + 1900, utc.tm_mon + 1,
                     utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec);
}

class CheckRun {
 public:
  CheckRun(const CheckFlags& flags, const CommandContext& context)
      : flags_(flags), context_(context), started_(std::chrono::system_clock::now()) {}

  int Run() {
    Result<CheckGate> plan = Plan(flags_);
    if (!plan.ok()) return Error(plan.status());
    ReplayFlags replay = flags_.replay;
    replay.policies = plan->policies;
    // The context (it reads the time profile) only where something uses it.
    const bool with_context =
        plan->baseline || !flags_.junit_path.empty() || !replay.json_path.empty();
    if (with_context) {
      Result<ReportContext> report_context = ContextFor(context_, replay);
      if (!report_context.ok()) return Error(report_context.status());
      report_context_ = *report_context;
    }
    if (plan->baseline) {
      if (Status same = SameMemoryModel(*plan->baseline, report_context_.memory_model);
          !same.ok()) {
        return Error(same);
      }
    }
    tolerance_ = plan->tolerance.text;
    Result<ReplayOutcome> outcome = RunReplays(replay, {});
    if (!outcome.ok()) return Error(outcome.status());
    // The trace's digest is the reader's, so a baseline's trace is compared after the replay.
    if (with_context) DescribeTrace(replay.trace, outcome->header, report_context_);
    if (plan->baseline) {
      // A trace from stdin has no header of its own to compare, its digest does.
      const bool from_stdin = flags_.replay.trace == "-";
      const std::vector<std::string> differences = TraceDifferences(
          *plan->baseline, from_stdin ? nullptr : &outcome->header, report_context_.trace_digest);
      if (Status comparable =
              RefuseDifferences(*plan->baseline, differences, flags_.allow_different_trace, notes_);
          !comparable.ok()) {
        return Error(comparable);
      }
      if (Status same =
              RefuseDifferences(*plan->baseline, CapDifferences(*plan->baseline, outcome->runs),
                                flags_.allow_different_trace, notes_);
          !same.ok()) {
        return Error(same);
      }
    }
    Result<std::vector<CheckOutcome>> decided = DecideChecks(*plan, outcome->runs);
    if (!decided.ok()) return Error(decided.status());
    outcomes_ = std::move(*decided);
    if (!replay.json_path.empty()) {
      Status written = WriteReportJson(replay.json_path, *outcome, report_context_);
      if (!written.ok()) return Error(written);
    }
    // Written before the verdict is printed: a report that cannot be written is an error, and
    // the verdict line must not say PASS before it.
    if (Status written = WriteJUnit(std::nullopt); !written.ok()) {
      junit_writable_ = false;
      return Error(written);
    }
    for (const std::string& note : notes_) std::printf("%s\n", note.c_str());
    for (const CheckOutcome& checked : outcomes_) std::printf("%s\n", CheckLine(checked).c_str());
    std::printf("%s\n", VerdictLine(outcomes_).c_str());
    return Tally(outcomes_).failed > 0 ? kExitBudgetBroken : kExitOk;
  }

 private:
  int Error(const Status& status) {
    int code = ReportError(status);
    std::printf("verdict: ERROR (the check could not be decided: see the error above)\n");
    if (!junit_writable_) return code;
    if (Status written = WriteJUnit(status); !written.ok()) ReportError(written);
    return code;
  }

  Status WriteJUnit(const std::optional<Status>& error) {
    if (flags_.junit_path.empty()) return Status::Ok();
    JUnitSuite suite;
    std::string trace_name =
        report_context_.trace_name.empty() ? flags_.replay.trace : report_context_.trace_name;
    suite.name = "bucketsim check " + trace_name;
    suite.hostname = report_context_.host;
    suite.timestamp = UtcTimestamp(started_);
    suite.time_s =
        std::chrono::duration<double>(std::chrono::system_clock::now() - started_).count();
    suite.properties = {{"trace", flags_.replay.trace},
                        {"trace_digest", report_context_.trace_digest},
                        {"memory_model", flags_.replay.allocator},
                        {"bucketsim_version", report_context_.tool_version}};
    if (!flags_.budget_path.empty()) suite.properties.emplace_back("budget", flags_.budget_path);
    if (!flags_.baseline_path.empty()) {
      suite.properties.emplace_back("baseline", flags_.baseline_path);
      suite.properties.emplace_back("tolerance", tolerance_.empty() ? "0" : tolerance_);
    }
    suite.outcomes = outcomes_;
    suite.error = error;
    return WriteTextFile(flags_.junit_path, JUnitXmlText(suite));
  }

  const CheckFlags& flags_;
  const CommandContext& context_;
  std::chrono::system_clock::time_point started_;
  ReportContext report_context_;
  std::string tolerance_;
  bool junit_writable_ = true;
  std::vector<std::string> notes_;
  std::vector<CheckOutcome> outcomes_;
};

}  // namespace

void AddCheckCommand(CLI::App& command, CommandContext& context) {
  auto flags = std::make_shared<CheckFlags>();
  AddTraceArgument(command, flags->replay.trace, /*required=*/true);
  AddReplayFlags(command, flags->replay);
  AddJobsFlag(command, flags->replay.jobs);
  command.add_option(
      "--budget", flags->budget_path,
      "Budget file (JSON, schema_version 1: per policy and \"*\"; see docs/ci-gates.md); "
      "without --policy, the policies it names are checked");
  command.add_option("--max-peak-allocated", flags->max_peak_allocated,
                     "Budget for the peak of allocated memory (SIZE: 40GiB, 512MB, 1.5GiB, ...)");
  command.add_option("--max-peak-reserved", flags->max_peak_reserved,
                     "Budget for the peak of reserved memory (what the caching allocator holds "
                     "from the device, without the CUDA context and NCCL buffers that "
                     "--device-memory counts; with --allocator exact it equals allocated)");
  command.add_option("--max-at-mark", flags->max_at_mark,
                     "Budget at a named mark, NAME=SIZE; the largest value over all iterations "
                     "counts (repeatable)");
  command
      .add_option("--max-step-time-us", flags->max_step_time_us,
                  "Budget for the step time in microseconds (the report's "
                  "timing.step_time_us: the median iteration after the first)")
      ->check(NumberFlag({"--max-step-time-us", "microseconds", "1500", NumberKind::kNonNegative}));
  command.add_option("--baseline", flags->baseline_path,
                     "A committed JSON report (compare --json): fail when a peak, a mark or "
                     "the step time grew beyond --tolerance");
  command.add_option("--tolerance", flags->tolerances,
                     "Growth over the baseline that still passes: N% and/or +SIZE (bytes; the "
                     "larger allowance wins). Default: no growth");
  command.add_flag("--allow-different-trace", flags->allow_different_trace,
                   "Compare with a --baseline of another trace (world size, rank, bucket cap or "
                   "digest differ) instead of refusing it; each difference is a NOTE line");
  command.add_option("--junit", flags->junit_path, "Also write the verdicts as JUnit XML to FILE");
  command.footer(
      "Budgets: the budget file's \"*\", then the policy's own entry, then the flags; a later\n"
      "one replaces an earlier one's budget of the same kind.\n"
      "Exit codes: 0 every check passed, 1 a check failed (a budget broken, growth beyond the\n"
      "tolerance, out of --device-memory), 2 usage or input error (bad trace, bad budget or\n"
      "baseline file, bad size, unknown mark): an error never passes.\n\n"
      "Examples:\n"
      "  bucketsim check traces/gpt-24l-h1024-ws8.json --policy backward-only \\\n"
      "      --max-peak-allocated 2GiB --max-at-mark 'after fwd=1.5GiB'\n"
      "  bucketsim check traces/gpt-24l-h1024-ws8.json --policy backward-only \\\n"
      "      --device-memory 24GiB  # does it fit a 24 GiB device (CUDA context and NCCL too)?\n"
      "  bucketsim check traces/gpt-24l-h1024-ws8.json --budget reports/budget-example.json \\\n"
      "      --baseline reports/baseline-gpt-24l-h1024-ws8.json --tolerance 2% --junit check.xml");
  command.callback([flags, &context] { context.exit_code = CheckRun(*flags, context).Run(); });
}

}  // namespace bucketsim
