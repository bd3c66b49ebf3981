// bucketsim sweep TRACE... --bucket-cap-mb 1,5,25,100|auto|A..B [--policy P]... [--profile F]
//     [--budget SIZE] [--time-tolerance PCT]:
// every (policy, cap) in one pass over the trace per round; memory against predicted time, the
// knee, the fastest configuration within a budget and the setting to use. Several traces are
// each swept with the same flags, as each alone would be, into one report.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "backend/host/mpi_world.h"
#include "cli/command.h"
#include "cli/sweep_ranks.h"
#include "engine/cap_sweep.h"
#include "io/trace_reader.h"
#include "report/html_report.h"
#include "report/json_report.h"
#include "report/report_text.h"
#include "report/sweep_report.h"

namespace bucketsim {
namespace {

struct SweepFlags {
  std::vector<std::string> traces;  // in the order given; each in turn is replay.trace
  ReplayFlags replay;
  std::vector<std::string> caps;  // numbers in MiB, `auto` or one range A..B
  double time_tolerance_pct = kDefaultTimeTolerance * 100;
  std::string budget;  // SIZE; empty: no budget question
  std::string format = "table";
  std::string html_path;
};

// --bucket-cap-mb: the caps listed, and the range to search when `auto` or A..B is given.
using CapFlag = CapChoice;

const NumberFlagSpec kCapFlag{"--bucket-cap-mb", "MiB", "1,5,25"};

Result<double> ParseCapNumber(std::string_view text) { return ParseNumberFlag(kCapFlag, text); }

Result<CapFlag> ParseCapFlag(const std::vector<std::string>& values) {
  Result<std::vector<std::string>> items = SplitListEntries(kCapFlag.flag, values);
  if (!items.ok()) return items.status();
  CapFlag flag;
  for (const std::string& item : *items) {
    const std::size_t dots = item.find("..");
    if (item == "auto" || dots != std::string::npos) {
      if (flag.search) {
        return InvalidArgument("--bucket-cap-mb: give one of 'auto' or a range A..B, not two");
      }
      flag.search = true;
      if (item == "auto") continue;
      Result<double> from = ParseCapNumber(std::string_view(item).substr(0, dots));
      if (!from.ok()) return from.status();
      Result<double> to = ParseCapNumber(std::string_view(item).substr(dots + 2));
      if (!to.ok()) return to.status();
      if (!(*from > 0 && *from <= *to)) {
        return InvalidArgument(
            fmt::format("--bucket-cap-mb: range '{}' must be A..B with 0 < A <= B (MiB)", item));
      }
      flag.range = CapRange{*from, *to};
      continue;
    }
    Result<double> cap = ParseCapNumber(item);
    if (!cap.ok()) return cap.status();
    flag.listed_mb.push_back(*cap);
  }
  return flag;
}

// The sweep of one trace in this process (RunCapSweep), its passes read from the file.
Result<SweepReplays> ReplaySweep(const ReplayFlags& replay, double time_tolerance_pct,
                                 const std::vector<PolicySpec>& policies, const CapFlag& caps,
                                 std::optional<Bytes> budget) {
  CapSweep sweep;
  sweep.policies = policies;
  sweep.caps = caps;
  sweep.time_tolerance = time_tolerance_pct / 100;
  sweep.budget = budget;
  sweep.trace_name = replay.trace;
  if (replay.trace != "-") {
    sweep.rescan = [path = replay.trace](TraceHeader& header, EventSink& sink) {
      return ReadTrace(path, header, sink);
    };
  }
  sweep.pass = [&replay](std::vector<PolicySpec> expanded, CapThresholdScan* scan) {
    return ReplaySweepPass(replay, std::move(expanded), scan);
  };
  return RunCapSweep(sweep);
}

// The table and the advice on stdout: the answer, printed before the slow optional outputs.
void PrintSweep(const ReportContext& report_context, std::uint64_t reduce_scatter_requests,
                const SweepSection& sweep, const std::optional<DeviceBudget>& device,
                std::size_t width) {
  std::printf("%s\n%s",
              WrapText(fmt::format("{}: {} configuration{}, time profile {}, memory model {}",
                                   report_context.trace_name, sweep.points.size(),
                                   sweep.points.size() == 1 ? "" : "s", report_context.time_profile,
                                   report_context.memory_model),
                       width)
                  .c_str(),
              RenderText(BuildSweepTable(sweep), width).c_str());
  PrintDeviceBudget(device);
  PrintNoteIfNoReduceScatter(reduce_scatter_requests, width);
  std::printf("\n%s", WrapText(kSweepParetoNote, width).c_str());
  if (report_context.time_profile == "none") {
    std::printf("%s", WrapText(kNoProfileNote, width).c_str());
  }
  for (const std::string& paragraph : SweepAdvice(sweep)) {
    std::printf("\n%s", WrapText(paragraph, width).c_str());
  }
  std::fflush(stdout);
}

void PrintOutputPaths(const SweepFlags& flags) {
  if (!flags.replay.json_path.empty()) {
    std::printf("\nreport: %s\n", flags.replay.json_path.c_str());
  }
  if (!flags.html_path.empty()) std::printf("html report: %s\n", flags.html_path.c_str());
}

// One trace's sweep, done: what its part of the table, the report and the page is made of.
// `outcome` holds the replays of one process; under mpirun it stays empty and `entries` holds
// the report entries the ranks replayed (RunJsonFragment).
struct TraceSweep {
  ReportContext context;
  ReportTraceInfo trace;
  std::uint64_t reduce_scatter_requests = 0;
  ReplayOutcome outcome;
  std::vector<std::string> entries;
  SweepSection sweep;
  std::optional<DeviceBudget> device;  // --device-memory: every configuration's device
};

// The choices drawn from the points (the Pareto set marked): the knee and the budget's answer.
void Decide(SweepSection& sweep, double time_tolerance_pct, std::optional<Bytes> budget) {
  sweep.knee = FindKnee(sweep.points, time_tolerance_pct / 100);
  if (budget) sweep.budget = ChooseUnderBudget(sweep.points, *budget);
}

// Each trace once: the same file twice (by any path) would be the same section twice.
Status CheckDistinctTraces(const std::vector<std::string>& traces) {
  for (std::size_t j = 1; j < traces.size(); ++j) {
    for (std::size_t i = 0; i < j; ++i) {
      std::error_code error;
      const bool same = traces[i] == traces[j] ||
                        (traces[i] != "-" && traces[j] != "-" &&
                         std::filesystem::equivalent(traces[i], traces[j], error) && !error);
      if (same) {
        return InvalidArgument(
            fmt::format("trace {} ('{}') is trace {} ('{}') again: give each trace once", j + 1,
                        traces[j], i + 1, traces[i]));
      }
    }
  }
  return Status::Ok();
}

// Several traces: each one's section as `sweep TRACE` prints it alone, under a heading that
// names it, then with a budget what fits it on every trace.
void PrintSweeps(const std::vector<std::string>& traces, const std::vector<TraceSweep>& sweeps,
                 std::size_t width) {
  if (sweeps.size() == 1) {
    const TraceSweep& only = sweeps.front();
    return PrintSweep(only.context, only.reduce_scatter_requests, only.sweep, only.device, width);
  }
  std::vector<const SweepSection*> sections;
  for (std::size_t i = 0; i < sweeps.size(); ++i) {
    std::printf("%s== trace %zu of %zu: %s ==\n\n", i == 0 ? "" : "\n", i + 1, sweeps.size(),
                traces[i].c_str());
    PrintSweep(sweeps[i].context, sweeps[i].reduce_scatter_requests, sweeps[i].sweep,
               sweeps[i].device, width);
    sections.push_back(&sweeps[i].sweep);
  }
  const std::string across = DescribeBudgetAcrossTraces(traces, sections);
  if (!across.empty()) std::printf("\n%s", WrapText(across, width).c_str());
  std::fflush(stdout);
}

// The table (or the JSON) on stdout, then the report and the page asked for.
int WriteOutputs(const SweepFlags& flags, const std::vector<TraceSweep>& sweeps) {
  std::vector<TraceReportParts> reports;
  for (const TraceSweep& s : sweeps) {
    const bool gathered = !s.entries.empty();
    reports.push_back({&s.trace, gathered ? nullptr : &s.outcome.runs,
                       gathered ? &s.entries : nullptr, &s.context, &s.sweep});
  }
  if (flags.format == "json") {
    Status written = WriteSweepReportJson("-", reports);
    if (!written.ok()) return ReportError(written);
  } else {
    PrintSweeps(flags.traces, sweeps, ConsoleWidth(flags.replay.wide));
  }
  if (!flags.replay.json_path.empty()) {
    Status written = WriteSweepReportJson(flags.replay.json_path, reports);
    if (!written.ok()) return ReportError(written);
  }
  if (!flags.html_path.empty()) {
    std::vector<ReportDocument> docs;
    for (const TraceSweep& s : sweeps) {
      docs.push_back(DocumentFromOutcome(s.outcome, s.context, &s.sweep));
    }
    Status written = WriteTextFile(flags.html_path, FormatHtmlReport(docs, PageCharts(docs)));
    if (!written.ok()) return ReportError(written);
  }
  if (flags.format != "json") PrintOutputPaths(flags);
  return kExitOk;
}

// Under mpirun: the listed configurations of every trace spread over the ranks, one report on
// rank 0 equal to a single process's (cli/sweep_ranks.h). A cap search decides each round from
// the last one's figures, so it runs in one process.
int RunOnRanks(const SweepFlags& flags, std::vector<TraceSweep>& sweeps,
               const std::vector<PolicySpec>& configurations, std::optional<Bytes> budget) {
  if (!flags.html_path.empty()) {
    return ReportError(InvalidArgument(
        "--html is not written under mpirun: write --json, then 'bucketsim report FILE'"));
  }
  Result<std::unique_ptr<MpiWorld>> world = MpiWorld::Init();
  if (!world.ok()) return ReportError(world.status());
  Result<std::optional<std::vector<GatheredSweep>>> gathered =
      ReplayOverRanks(**world, flags.replay, flags.traces, configurations);
  if (!gathered.ok()) return (*world)->rank() == 0 ? ReportError(gathered.status()) : kExitError;
  if (!*gathered) return kExitOk;  // not rank 0: rank 0 reports
  for (std::size_t t = 0; t < sweeps.size(); ++t) {
    GatheredSweep& all = (**gathered)[t];
    TraceSweep& s = sweeps[t];
    s.trace = std::move(all.trace);
    s.reduce_scatter_requests = all.reduce_scatter_requests;
    s.entries = std::move(all.entries);
    DescribeTrace(flags.traces[t], all.content_digest, s.context);
    if (flags.traces[t] != "-") {
      Result<TraceHeader> header = ReadTraceHeader(flags.traces[t]);
      if (!header.ok()) return ReportError(header.status());
      Result<std::optional<DeviceBudget>> device =
          DeviceBudgetOfFlags(ForTrace(flags.replay, flags.traces[t]), *header);
      if (!device.ok()) return ReportError(device.status());
      s.device = *device;
    }
    s.sweep.points = std::move(all.points);
    MarkPareto(s.sweep.points);
    Decide(s.sweep, flags.time_tolerance_pct, budget);
    s.sweep.smallest_bucketing_cap_mb = all.smallest_bucketing_cap_mb;
  }
  return WriteOutputs(flags, sweeps);
}

// The policies a trace is swept under without --policy: a trace of PyTorch's FSDP1 or FSDP2
// under its own implementation's policy alone (fairscale's bucket settings are no setting of
// PyTorch's, so the advice never names one), any other trace under the default four.
std::vector<PolicySpec> SweepDefaultsOf(const ReplayFlags& replay) {
  if (std::optional<PolicySpec> own = OwnPolicyOf(replay)) return {std::move(*own)};
  return DefaultPolicies();
}

int RunSweep(const SweepFlags& flags, const CommandContext& context) {
  std::optional<Bytes> budget;
  if (!flags.budget.empty()) {
    Result<Bytes> parsed = ParseBudgetFlag("--budget", flags.budget);
    if (!parsed.ok()) return ReportError(parsed.status());
    budget = *parsed;
  }
  Result<CapFlag> caps = ParseCapFlag(flags.caps);
  if (!caps.ok()) return ReportError(caps.status());
  // Without --policy each trace is swept under its own defaults (SweepDefaultsOf); these, the
  // first trace's, are what mpirun's ranks share.
  Result<std::vector<PolicySpec>> policies = ParsePolicyFlags(
      flags.replay,
      SweepDefaultsOf(flags.traces.empty() ? flags.replay
                                           : ForTrace(flags.replay, flags.traces.front())));
  if (!policies.ok()) return ReportError(policies.status());
  Status distinct = CheckDistinctTraces(flags.traces);
  if (!distinct.ok()) return ReportError(distinct);
  // Every trace's context, and with several their headers, before any replay: a later trace
  // that is missing or has a bad header is named at once, not after the sweeps before it.
  std::vector<TraceSweep> sweeps(flags.traces.size());
  for (std::size_t t = 0; t < flags.traces.size(); ++t) {
    const std::string& trace = flags.traces[t];
    Result<ReportContext> report_context = ContextFor(context, ForTrace(flags.replay, trace));
    if (!report_context.ok()) return ReportError(report_context.status());
    sweeps[t].context = std::move(*report_context);
    if (flags.traces.size() > 1 && trace != "-") {
      Result<TraceHeader> header = ReadTraceHeader(trace);
      if (!header.ok()) return ReportError(header.status());
    }
  }
  if (LaunchedByMpirun()) {
    if (caps->search) {
      return ReportError(InvalidArgument(
          "--bucket-cap-mb auto or A..B is not spread over mpirun's ranks (each round depends on "
          "the last): run the search in one process, or list the caps"));
    }
    // The caps ascending, each once: the order a single process reports them in.
    std::vector<double> caps_mb = caps->listed_mb;
    std::sort(caps_mb.begin(), caps_mb.end());
    caps_mb.erase(std::unique(caps_mb.begin(), caps_mb.end()), caps_mb.end());
    return RunOnRanks(flags, sweeps, SweepPolicies(*policies, caps_mb, /*with_fixed=*/true),
                      budget);
  }
  for (std::size_t t = 0; t < flags.traces.size(); ++t) {
    const ReplayFlags replay = ForTrace(flags.replay, flags.traces[t]);
    Result<std::vector<PolicySpec>> trace_policies =
        ParsePolicyFlags(replay, SweepDefaultsOf(replay));
    if (!trace_policies.ok()) return ReportError(trace_policies.status());
    Result<SweepReplays> replays =
        ReplaySweep(replay, flags.time_tolerance_pct, *trace_policies, *caps, budget);
    if (!replays.ok()) return ReportError(replays.status());
    TraceSweep& s = sweeps[t];
    s.outcome = std::move(replays->outcome);
    s.trace = TraceInfoOf(s.outcome.header, s.outcome.summary);
    s.reduce_scatter_requests = ReduceScatterRequests(s.outcome.summary);
    DescribeTrace(replay.trace, s.outcome.header, s.context);
    s.device = s.outcome.runs.front().device;
    s.sweep.points = SummarizeSweep(s.outcome.runs);
    Decide(s.sweep, flags.time_tolerance_pct, budget);
    s.sweep.search = replays->search;
    s.sweep.smallest_bucketing_cap_mb = replays->smallest_bucketing_cap_mb;
  }
  return WriteOutputs(flags, sweeps);
}

}  // namespace

void AddSweepCommand(CLI::App& command, CommandContext& context) {
  auto flags = std::make_shared<SweepFlags>();
  command
      .add_option("traces", flags->traces,
                  "Trace files (JSON, traces/README.md; - for stdin); several are each swept "
                  "with the same flags, into one report")
      ->required();
  AddReplayFlags(command, flags->replay, /*with_cap=*/false);
  AddJobsFlag(command, flags->replay.jobs);
  AddWideFlag(command, flags->replay.wide);
  command
      .add_option("--bucket-cap-mb", flags->caps,
                  "Bucket caps in MiB to sweep, comma-separated (<= 0: unbucketed); 'auto' "
                  "searches the caps from the least that buckets any request to one bucket per "
                  "backward, A..B searches that range (MiB), beside any caps listed")
      ->required()
      // One value per --bucket-cap-mb (lists are comma-separated), as per --policy: the words
      // after it are traces, however many, never taken for caps.
      ->allow_extra_args(false);
  command
      .add_option("--time-tolerance", flags->time_tolerance_pct,
                  "The knee: the least peak reserved among configurations whose step time is "
                  "within PCT percent of the fastest")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command.add_option("--budget", flags->budget,
                     "Peak reserved memory budget (SIZE, e.g. 40GiB), the caching allocator's own "
                     "figure without the CUDA context and NCCL buffers (--device-memory takes "
                     "those off a device's capacity): name the fastest configuration that fits, "
                     "and what it costs against the runner-up");
  command.add_option("--format", flags->format, "Output on stdout: table or json")
      ->check(CLI::IsMember({"table", "json"}));
  command.add_option("--html", flags->html_path,
                     "Also write the HTML report (the Pareto chart and the sweep table inline, "
                     "self-contained) to FILE");
  command.footer(
      "Every --policy (default: the four of compare) is replayed at every cap, in one pass over\n"
      "the trace; a policy with its own cap (unbucketed) once. Step times come from the sim's\n"
      "time model: give --profile for collectives and copies to cost time. 'auto' or A..B adds\n"
      "a search: the caps where a request starts to be bucketed, a geometric grid, then caps\n"
      "around the choice, one pass over the trace per round. Ties are broken by less peak\n"
      "reserved, then the simpler policy (unbucketed < backward-only < per-group-dedup <\n"
      "always-allocated), never by the order given. --jobs N replays on N threads; under\n"
      "'mpirun -np R' listed configurations are spread over the R ranks and rank 0 writes the\n"
      "report a single process writes.\n\n"
      "Several traces: each is swept with the same flags as it would be alone (a search per\n"
      "trace), one after the other; the table prints a section per trace as 'sweep TRACE' does,\n"
      "then with --budget the configurations that fit it on every trace. --json/--format json\n"
      "write {\"schema_version\": 1, \"sweeps\": [each trace's report, in order]}; --html\n"
      "writes one page with a section per trace. Each trace once; a missing or bad one is an\n"
      "error (exit 2) and no report is written. Under mpirun the (trace, configuration) pairs\n"
      "are spread over the ranks.\n\n"
      "Example:\n"
      "  bucketsim sweep traces/gpt-24l-h1024-ws8.json --bucket-cap-mb 1,5,25,100 \\\n"
      "      --policy backward-only --policy always-allocated \\\n"
      "      --profile traces/profiles/h100-8gpu-nvlink.json --budget 3GiB --json out/sweep.json\n"
      "  bucketsim sweep traces/gpt-24l-h1024-ws8.json --bucket-cap-mb auto \\\n"
      "      --profile traces/profiles/h100-8gpu-nvlink.json --budget 2.5GiB\n"
      "  bucketsim report out/sweep.json -o out/sweep-page   # or --html out/sweep.html\n"
      "  bucketsim sweep traces/tiny-ws2.json traces/gpt-4l-h256-ws4.json \\\n"
      "      --bucket-cap-mb 0.25,4 --budget 190MiB --json out/sweeps.json  # one per trace");
  command.callback([flags, &context] { context.exit_code = RunSweep(*flags, context); });
}

}  // namespace bucketsim
