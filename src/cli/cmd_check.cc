// bucketsim check TRACE --policy P --max-peak-allocated SIZE [--max-at-mark NAME=SIZE]...
// One line per budget; exit 1 when any is broken. Anything that keeps the check from being
// decided (bad trace, bad size, a mark that never occurs) is exit 2: an error never passes.
#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "cli/command.h"
#include "core/size_format.h"
#include "report/console_table.h"
#include "report/json_report.h"

namespace bucketsim {
namespace {

struct CheckFlags {
  ReplayFlags replay;
  std::string max_peak_allocated;
  std::string max_peak_reserved;
  std::vector<std::string> max_at_mark;
};

struct Budget {
  std::string what;
  std::optional<std::string> mark;  // unset: a peak
  bool reserved = false;            // the peak of reserved, not of allocated, memory
  Bytes limit = 0;
};

Result<std::vector<Budget>> ParseBudgets(const CheckFlags& flags) {
  std::vector<Budget> budgets;
  if (!flags.max_peak_allocated.empty()) {
    Result<Bytes> limit = ParseSizeFlag("--max-peak-allocated", flags.max_peak_allocated);
    if (!limit.ok()) return limit.status();
    budgets.push_back({"peak allocated", std::nullopt, false, *limit});
  }
  if (!flags.max_peak_reserved.empty()) {
    Result<Bytes> limit = ParseSizeFlag("--max-peak-reserved", flags.max_peak_reserved);
    if (!limit.ok()) return limit.status();
    budgets.push_back({"peak reserved", std::nullopt, true, *limit});
  }
  for (const std::string& item : flags.max_at_mark) {
    std::size_t eq = item.rfind('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument(fmt::format("--max-at-mark '{}': expected NAME=SIZE", item));
    }
    Result<Bytes> limit = ParseSizeFlag("--max-at-mark", item.substr(eq + 1));
    if (!limit.ok()) return limit.status();
    std::string mark = item.substr(0, eq);
    budgets.push_back({fmt::format("allocated at mark '{}'", mark), mark, false, *limit});
  }
  if (budgets.empty()) {
    return InvalidArgument(
        "no budget given: use --max-peak-allocated, --max-peak-reserved and/or --max-at-mark");
  }
  return budgets;
}

// The figure a budget is about; a mark that never occurs cannot be checked.
Result<Bytes> Measure(const Budget& budget, const RunResult& run) {
  if (!budget.mark) return budget.reserved ? run.peak.reserved_bytes : run.peak.allocated_bytes;
  std::optional<Bytes> most;
  for (const MarkSample& sample : run.marks) {
    if (sample.name == *budget.mark) most = std::max(most.value_or(0), sample.allocated_bytes);
  }
  if (!most) {
    return InvalidArgument(fmt::format("mark '{}' never occurs in the trace", *budget.mark));
  }
  return *most;
}

int RunCheck(const CheckFlags& flags, const CommandContext& context) {
  if (flags.replay.policies.size() != 1) {
    return ReportError(InvalidArgument("check needs exactly one --policy"));
  }
  Result<std::vector<Budget>> budgets = ParseBudgets(flags);
  if (!budgets.ok()) return ReportError(budgets.status());
  Result<ReplayOutcome> outcome = RunReplays(flags.replay, {});
  if (!outcome.ok()) return ReportError(outcome.status());
  const RunResult& run = outcome->runs.front();

  std::vector<std::string> lines;
  bool broken = false;
  // A policy that does not fit the device breaks every budget: its figures stop at the OOM.
  if (run.oom) {
    lines.push_back(fmt::format("FAIL {}: {}", run.policy, DescribeOom(*run.oom)));
    broken = true;
  }
  for (const Budget& budget : run.oom ? std::vector<Budget>{} : *budgets) {
    Result<Bytes> value = Measure(budget, run);
    if (!value.ok()) return ReportError(value.status());
    bool ok = *value <= budget.limit;
    broken = broken || !ok;
    lines.push_back(fmt::format("{} {}: {} {} ({} B) {} budget {} ({} B)", ok ? "PASS" : "FAIL",
                                run.policy, budget.what, FormatBytes(*value), *value,
                                ok ? "within" : "exceeds", FormatBytes(budget.limit),
                                budget.limit));
  }
  if (!flags.replay.json_path.empty()) {
    Result<ReportContext> report_context = ContextFor(context, flags.replay);
    if (!report_context.ok()) return ReportError(report_context.status());
    Status written =
        WriteTextFile(flags.replay.json_path, ReportJsonText(*outcome, *report_context));
    if (!written.ok()) return ReportError(written);
  }
  for (const std::string& line : lines) std::printf("%s\n", line.c_str());
  return broken ? kExitBudgetBroken : kExitOk;
}

}  // namespace

void AddCheckCommand(CLI::App& command, CommandContext& context) {
  auto flags = std::make_shared<CheckFlags>();
  AddTraceArgument(command, flags->replay.trace, /*required=*/true);
  AddReplayFlags(command, flags->replay);
  command.add_option("--max-peak-allocated", flags->max_peak_allocated,
                     "Budget for the peak of allocated memory (SIZE: 40GiB, 512MB, 1.5GiB, ...)");
  command.add_option("--max-peak-reserved", flags->max_peak_reserved,
                     "Budget for the peak of reserved memory (what the caching allocator holds "
                     "from the device; with --allocator exact it equals allocated)");
  command.add_option("--max-at-mark", flags->max_at_mark,
                     "Budget at a named mark, NAME=SIZE; the largest value over all iterations "
                     "counts (repeatable)");
  command.footer(
      "Exit codes: 0 every budget kept, 1 a budget broken (one line per budget says which),\n"
      "2 usage or input error (bad trace, bad size, unknown mark): an error never passes.\n\n"
      "Example:\n"
      "  bucketsim check traces/gpt-24l-h1024-ws8.json --policy backward-only \\\n"
      "      --max-peak-allocated 12GiB --max-at-mark 'after fwd=11GiB'");
  command.callback([flags, &context] { context.exit_code = RunCheck(*flags, context); });
}

}  // namespace bucketsim
