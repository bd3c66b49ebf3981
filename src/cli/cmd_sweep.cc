// bucketsim sweep TRACE --bucket-cap-mb 1,5,25,100 [--policy P]... [--profile F] [--budget SIZE]:
// every (policy, cap) in one pass over the trace; memory against predicted time.
#include <cstdio>

#include <fmt/format.h>

#include "cli/command.h"
#include "report/html_report.h"
#include "report/json_report.h"
#include "report/report_text.h"
#include "report/sweep_report.h"

namespace bucketsim {
namespace {

struct SweepFlags {
  ReplayFlags replay;
  std::vector<std::string> caps_mb;  // each one or more comma-separated MiB
  std::string budget;                // SIZE; empty: no budget question
  std::string format = "table";
  std::string html_path;
};

// Each policy at each cap; a policy that fixes its own cap (unbucketed) is replayed once.
std::vector<PolicySpec> SweepPolicies(const std::vector<PolicySpec>& policies,
                                      const std::vector<double>& caps_mb) {
  std::vector<PolicySpec> expanded;
  for (const PolicySpec& policy : policies) {
    if (policy.cap_mb) {
      expanded.push_back(policy);
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

int RunSweep(const SweepFlags& flags, const CommandContext& context) {
  std::optional<Bytes> budget;
  if (!flags.budget.empty()) {
    Result<Bytes> parsed = ParseSizeFlag("--budget", flags.budget);
    if (!parsed.ok()) return ReportError(parsed.status());
    budget = *parsed;
  }
  Result<std::vector<double>> caps_mb =
      ParseNumberList({"--bucket-cap-mb", "MiB", "1,5,25"}, flags.caps_mb);
  if (!caps_mb.ok()) return ReportError(caps_mb.status());
  Result<std::vector<PolicySpec>> policies = ParsePolicyFlags(flags.replay, DefaultPolicies());
  if (!policies.ok()) return ReportError(policies.status());
  Result<ReportContext> report_context = ContextFor(context, flags.replay);
  if (!report_context.ok()) return ReportError(report_context.status());
  Result<ReplayOutcome> outcome = RunReplays(
      flags.replay, DefaultPolicies(), {SweepPolicies(*policies, *caps_mb), std::nullopt, 1.0});
  if (!outcome.ok()) return ReportError(outcome.status());

  SweepSection sweep{SummarizeSweep(outcome->runs), std::nullopt};
  if (budget) sweep.budget = ChooseUnderBudget(sweep.points, *budget);
  if (flags.format != "json") {
    std::printf("%s: %zu configurations, time profile %s, memory model %s\n\n%s",
                report_context->trace_name.c_str(), sweep.points.size(),
                report_context->time_profile.c_str(), report_context->memory_model.c_str(),
                RenderText(BuildSweepTable(sweep)).c_str());
    // A trace without reduce-scatter requests (an imported snapshot) gives every policy the same
    // events: say why the rows agree and where a policy-replayable trace comes from.
    if (outcome->summary.events_by_kind[static_cast<std::size_t>(EventKind::kReduceScatter)] == 0) {
      std::printf(
          "\nThis trace has no reduce-scatter request (rs event), so the policies cannot differ "
          "on it; record your model's program with tools/record_program.py (README, \"Bring your "
          "own model\").\n");
    }
    std::printf("\n%s\n", std::string(kSweepParetoNote).c_str());
    if (report_context->time_profile == "none") {
      std::printf(
          "No --profile: copies and collectives cost nothing, so step times are compute "
          "alone.\n");
    }
    if (sweep.budget) std::printf("\n%s\n", DescribeBudget(sweep.points, *sweep.budget).c_str());
    // The answer first: the outputs below can take long on a large sweep.
    std::fflush(stdout);
  }
  if (!flags.html_path.empty()) {
    const std::vector<ReportDocument> docs = {
        DocumentFromOutcome(*outcome, *report_context, &sweep)};
    Status written = WriteTextFile(flags.html_path, FormatHtmlReport(docs, PageCharts(docs)));
    if (!written.ok()) return ReportError(written);
  }
  if (!flags.replay.json_path.empty() || flags.format == "json") {
    std::string report = ReportJsonText(*outcome, *report_context, &sweep);
    if (!flags.replay.json_path.empty()) {
      Status written = WriteTextFile(flags.replay.json_path, report);
      if (!written.ok()) return ReportError(written);
    }
    if (flags.format == "json") {
      std::fwrite(report.data(), 1, report.size(), stdout);
      return kExitOk;
    }
  }
  if (!flags.replay.json_path.empty()) {
    std::printf("\nreport: %s\n", flags.replay.json_path.c_str());
  }
  if (!flags.html_path.empty()) std::printf("html report: %s\n", flags.html_path.c_str());
  return kExitOk;
}

}  // namespace

void AddSweepCommand(CLI::App& command, CommandContext& context) {
  auto flags = std::make_shared<SweepFlags>();
  AddTraceArgument(command, flags->replay.trace, /*required=*/true);
  AddReplayFlags(command, flags->replay, /*with_cap=*/false);
  command
      .add_option("--bucket-cap-mb", flags->caps_mb,
                  "Bucket caps in MiB to sweep, comma-separated (<= 0: unbucketed)")
      ->required();
  command.add_option("--budget", flags->budget,
                     "Peak reserved memory budget (SIZE, e.g. 40GiB): name the fastest "
                     "configuration that fits, and what it costs against the runner-up");
  command.add_option("--format", flags->format, "Output on stdout: table or json")
      ->check(CLI::IsMember({"table", "json"}));
  command.add_option("--html", flags->html_path,
                     "Also write the HTML report (the Pareto chart and the sweep table inline, "
                     "self-contained) to FILE");
  command.footer(
      "Every --policy (default: the four of compare) is replayed at every cap, in one pass over\n"
      "the trace; a policy with its own cap (unbucketed) once. Step times come from the sim's\n"
      "time model: give --profile for collectives and copies to cost time.\n\n"
      "Example:\n"
      "  bucketsim sweep traces/gpt-24l-h1024-ws8.json --bucket-cap-mb 1,5,25,100 \\\n"
      "      --policy backward-only --policy always-allocated \\\n"
      "      --profile traces/profiles/h100-8gpu-nvlink.json --budget 3GiB --json out/sweep.json\n"
      "  bucketsim report out/sweep.json -o out/sweep-page   # or --html out/sweep.html");
  command.callback([flags, &context] { context.exit_code = RunSweep(*flags, context); });
}

}  // namespace bucketsim
