// bucketsim compare [TRACE] [--policy P]... : the policies side by side.
#include <cstdio>

#include <fmt/format.h>

#include "cli/command.h"
#include "report/chrome_trace.h"
#include "report/console_table.h"
#include "report/framework_table.h"
#include "report/html_report.h"
#include "report/json_report.h"
#include "report/markdown_report.h"

namespace bucketsim {
namespace {

struct CompareFlags {
  ReplayFlags replay;
  std::string format = "table";
  std::string html_path;
  std::string chrome_trace_path;
  std::string chrome_trace_policy;  // empty: the first policy
  std::string memory_viz_dir;       // empty: none
};

// The index of the policy --chrome-trace-policy names (as --policy wrote it), else the first.
// Rows that differ only in name: every policy with a cap bypassed every request (each is larger
// than the cap), so they replay as unbucketed. Said, as sweep says it, with the way to a cap
// that buckets.
void PrintNoteIfNothingBucketed(const ReplayOutcome& outcome, const std::string& trace,
                                std::size_t width) {
  if (ReduceScatterRequests(outcome.summary) == 0) return;
  bool capped = false;
  for (const RunResult& run : outcome.runs) {
    if (run.counters.bucketed > 0) return;
    capped = capped || run.bucket_cap_mb > 0;
  }
  if (!capped) return;
  std::printf("\n%s",
              WrapText(fmt::format("No policy bucketed a request: at these caps every "
                                   "reduce-scatter is larger than the cap and bypasses the "
                                   "buckets, so every policy replays as unbucketed. `bucketsim "
                                   "sweep {} --bucket-cap-mb auto` finds the caps where requests "
                                   "start to be bucketed.",
                                   trace.empty() ? std::string("TRACE") : trace),
                       width)
                  .c_str());
}

Result<std::size_t> TimelinePolicy(const CompareFlags& flags, const ReplayFlags& replay) {
  Result<std::vector<PolicySpec>> policies = ParsePolicyFlags(replay, DefaultPoliciesOf(replay));
  if (!policies.ok()) return policies.status();
  if (flags.chrome_trace_policy.empty()) return std::size_t{0};
  std::string names;
  for (std::size_t i = 0; i < policies->size(); ++i) {
    if ((*policies)[i].name == flags.chrome_trace_policy) return i;
    names += (i ? ", " : "") + (*policies)[i].name;
  }
  return InvalidArgument(fmt::format("--chrome-trace-policy: '{}' is not one of the policies ({})",
                                     flags.chrome_trace_policy, names));
}

Status WriteChromeTrace(const CompareFlags& flags, const ReplayOutcome& outcome,
                        std::size_t policy) {
  Result<std::string> text = ChromeTraceJson(outcome.runs[policy], outcome.header);
  if (!text.ok()) return text.status();
  return WriteTextFile(flags.chrome_trace_path, *text);
}

int RunCompare(const CompareFlags& flags, const CommandContext& context) {
  ReplayFlags replay = flags.replay;
  if (replay.trace.empty()) replay.trace = DefaultTracePath();
  Result<ReportContext> report_context = ContextFor(context, replay);
  if (!report_context.ok()) return ReportError(report_context.status());
  ReplayExtras extras;
  if (!flags.chrome_trace_path.empty()) {
    Result<std::size_t> policy = TimelinePolicy(flags, replay);
    if (!policy.ok()) return ReportError(policy.status());
    extras.timeline_policy = *policy;
  }
  // Opened before the replay: a directory that cannot be written fails before any work.
  std::vector<std::unique_ptr<MemoryVizSnapshot>> snapshots;
  std::vector<PolicySpec> snapshot_policies;
  if (!flags.memory_viz_dir.empty()) {
    Result<std::vector<PolicySpec>> policies = ParsePolicyFlags(replay, DefaultPoliciesOf(replay));
    if (!policies.ok()) return ReportError(policies.status());
    Result<std::vector<std::unique_ptr<MemoryVizSnapshot>>> opened =
        OpenMemoryViz(flags.memory_viz_dir, replay, *policies);
    if (!opened.ok()) return ReportError(opened.status());
    snapshots = std::move(*opened);
    snapshot_policies = std::move(*policies);
    extras.memory_events = MemoryEventSinks(snapshots);
  }
  Result<ReplayOutcome> outcome = RunReplays(replay, DefaultPoliciesOf(replay), extras);
  if (!outcome.ok()) return ReportError(outcome.status());
  DescribeTrace(replay.trace, outcome->header, *report_context);
  if (flags.format == "table") {
    const std::size_t width = ConsoleWidth(flags.replay.wide);
    std::printf(
        "%s\n%s",
        WrapText(fmt::format("{}: world size {}, {} events, {} iteration(s), memory model {}, "
                             "time profile {}",
                             report_context->trace_name, outcome->header.world_size,
                             outcome->summary.events, outcome->summary.iterations,
                             report_context->memory_model, report_context->time_profile),
                 width)
            .c_str(),
        RenderText(BuildComparisonTable(*outcome), width).c_str());
    PrintDeviceBudget(outcome->runs.front().device);
    // What the two time columns are, once: the step as check's budget counts it.
    std::printf("\n%s", WrapText(fmt::format("step: the median iteration after the first; exposed: "
                                             "communication no compute overlapped, per iteration "
                                             "(the sim's{}).",
                                             report_context->time_profile == "none"
                                                 ? "; no --profile: communication costs nothing"
                                                 : " prediction"),
                                 width)
                            .c_str());
    if (SpansFrameworks(outcome->runs)) {
      std::printf("\nacross frameworks:\n%s",
                  RenderText(BuildFrameworkTable(outcome->runs), width).c_str());
    }
    PrintNoteIfNoReduceScatter(outcome->summary, width);
    PrintNoteIfNothingBucketed(*outcome, replay.trace, width);
    for (const RunResult& run : outcome->runs) {
      if (run.oom) {
        std::printf("\n%s: %s; its figures stop there\n", run.policy.c_str(),
                    DescribeOom(*run.oom).c_str());
      }
    }
    // The answer first: the outputs below can take long on a large trace.
    std::fflush(stdout);
  }

  // The JSON report is streamed, never held whole.
  if (!replay.json_path.empty()) {
    Status written = WriteReportJson(replay.json_path, *outcome, *report_context);
    if (!written.ok()) return ReportError(written);
  }
  if (flags.format == "json") {
    Status written = WriteReportJson("-", *outcome, *report_context);
    if (!written.ok()) return ReportError(written);
  }
  if (flags.format == "markdown" || !flags.html_path.empty()) {
    const std::vector<ReportDocument> docs = {DocumentFromOutcome(*outcome, *report_context)};
    if (!flags.html_path.empty()) {
      Status written = WriteTextFile(flags.html_path, FormatHtmlReport(docs, PageCharts(docs)));
      if (!written.ok()) return ReportError(written);
    }
    // On a terminal there is nowhere to put the charts: `bucketsim report` writes them.
    if (flags.format == "markdown") std::printf("%s", FormatMarkdownReport(docs, {}, "").c_str());
  }
  if (extras.timeline_policy) {
    Status written = WriteChromeTrace(flags, *outcome, *extras.timeline_policy);
    if (!written.ok()) return ReportError(written);
  }
  if (flags.format == "table") {
    if (!replay.json_path.empty()) std::printf("\nreport: %s\n", replay.json_path.c_str());
    if (!flags.html_path.empty()) std::printf("html report: %s\n", flags.html_path.c_str());
    if (extras.timeline_policy) {
      std::printf("chrome trace (%s): %s\n", outcome->runs[*extras.timeline_policy].policy.c_str(),
                  flags.chrome_trace_path.c_str());
    }
  }
  // On stderr when stdout carries a JSON or Markdown document.
  PrintMemoryViz(flags.format == "table" ? stdout : stderr, snapshots, snapshot_policies);
  return kExitOk;
}

}  // namespace

void AddCompareCommand(CLI::App& command, CommandContext& context) {
  auto flags = std::make_shared<CompareFlags>();
  AddTraceArgument(command, flags->replay.trace, /*required=*/false);
  AddReplayFlags(command, flags->replay);
  AddJobsFlag(command, flags->replay.jobs);
  AddWideFlag(command, flags->replay.wide);
  command.add_option("--format", flags->format, "Output on stdout: table, json or markdown")
      ->check(CLI::IsMember({"table", "json", "markdown"}));
  command.add_option("--html", flags->html_path,
                     "Also write the HTML report (charts inline, self-contained) to FILE");
  command.add_option("--chrome-trace", flags->chrome_trace_path,
                     "Write one replay as a Chrome trace-event / Perfetto JSON file (streams as "
                     "tracks, collectives and copies as slices, memory counters)");
  command.add_option("--chrome-trace-policy", flags->chrome_trace_policy,
                     "The policy --chrome-trace shows, as --policy names it (default: the first)");
  command
      .add_option("--memory-viz", flags->memory_viz_dir,
                  "Write each policy's replay as a PyTorch memory snapshot, "
                  "DIR/<policy>.pickle, for pytorch.org/memory_viz and "
                  "torch.cuda._memory_viz (the caching allocator model's events, segments and "
                  "blocks)")
      ->type_name("DIR");
  command.footer(
      "With no TRACE, the shipped default trace is used; with no --policy, always-allocated,\n"
      "backward-only, per-group-dedup and unbucketed are compared.\n\n"
      "Example:\n"
      "  bucketsim compare traces/gpt-24l-h1024-ws8.json --policy backward-only \\\n"
      "      --policy 'lifetime=always,key=members,cap=50' --json reports/latest/compare.json");
  command.callback([flags, &context] { context.exit_code = RunCompare(*flags, context); });
}

}  // namespace bucketsim
