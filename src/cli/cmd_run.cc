// bucketsim run TRACE --backend host|cuda|sim [--policy P]... : the replay executed for real.
// Launched with mpirun, one process per rank; every rank reads and checks its trace first and
// the ranks agree on the outcome, so a bad trace on one rank ends every rank with that rank's
// message before any collective starts. Policies run one after another. Rank 0 prints and
// writes the report; --all-ranks makes every rank write its own.
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/host/host_backend.h"
#include "backend/host/mpi_world.h"
#include "cli/command.h"
#include "engine/trace_checker.h"
#include "io/atomic_file.h"
#include "io/trace_reader.h"
#include "report/chrome_trace.h"
#include "report/console_table.h"
#include "report/json_report.h"

namespace bucketsim {
namespace {

struct RunFlags {
  ReplayFlags replay;
  std::string backend = "host";
  std::string materialize = "policy";
  bool no_verify = false;
  bool all_ranks = false;
  double compute_scale = 1.0;
  double timeout_s = 300;
  std::string chrome_trace_path;
  std::string memory_viz_dir;  // empty: none
};

// A trace read and checked once, replayed from memory for each policy.
struct LoadedTrace {
  TraceHeader header;
  std::vector<Event> events;
};

class EventCollector final : public EventSink {
 public:
  explicit EventCollector(LoadedTrace& trace) : trace_(trace) {}
  Status OnHeader(const TraceHeader& /*header*/) override { return Status::Ok(); }
  Status OnEvent(const Event& event) override {
    trace_.events.push_back(event);
    return Status::Ok();
  }
  Status OnEnd() override { return Status::Ok(); }

 private:
  LoadedTrace& trace_;
};

Status LoadTrace(const std::string& path, LoadedTrace& trace) {
  EventCollector collector(trace);
  TraceChecker checker(&collector);
  return ReadTrace(path, trace.header, checker);
}

// "{rank}" in a path becomes the rank: one trace (or report) per rank.
std::string ForRank(std::string path, int rank) {
  for (std::size_t at = path.find("{rank}"); at != std::string::npos; at = path.find("{rank}")) {
    path.replace(at, 6, std::to_string(rank));
  }
  return path;
}

// Where rank `rank` writes its report with --all-ranks: the path's {rank}, else ".rankR"
// before the extension.
std::string ReportPathForRank(const std::string& path, int rank) {
  if (path.find("{rank}") != std::string::npos) return ForRank(path, rank);
  std::size_t dot = path.rfind('.');
  std::size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
    return fmt::format("{}.rank{}", path, rank);
  }
  return fmt::format("{}.rank{}{}", path.substr(0, dot), rank, path.substr(dot));
}

// A real backend made once here, so that a build or a machine without it fails before the ranks
// agree, with the reason ("--backend NAME: ..."); each policy then gets its own.
Result<std::function<std::unique_ptr<Backend>()>> FactoryOf(
    const std::string& flag, std::function<Result<std::unique_ptr<Backend>>()> make,
    const std::function<void(const std::string&)>& on_fatal) {
  Result<std::unique_ptr<Backend>> probe = make();
  if (!probe.ok()) {
    return Status(probe.status().code(),
                  fmt::format("--backend {}: {}", flag, probe.status().message()));
  }
  auto first = std::make_shared<std::unique_ptr<Backend>>(std::move(*probe));
  return std::function<std::unique_ptr<Backend>()>([make, on_fatal, first] {
    if (*first) return std::move(*first);
    Result<std::unique_ptr<Backend>> backend = make();
    if (!backend.ok()) on_fatal(backend.status().ToString());  // worked a moment ago
    BUCKETSIM_CHECK(backend.ok());  // on_fatal ends the job; this is for a missing on_fatal
    return std::move(*backend);
  });
}

// The flags both real backends take, into their options (the same fields in each).
template <typename Options>
Options CommonOptions(const RunFlags& flags, std::function<void(const std::string&)> on_fatal) {
  Options options;
  options.materialize_all = flags.materialize == "all";
  options.verify = !flags.no_verify;
  options.compute_scale = flags.compute_scale;
  options.timeout_s = flags.timeout_s;
  options.on_fatal = std::move(on_fatal);
  return options;
}

// The real backend of --backend host|cuda; the sim is the request's own (MakeReplayRequest).
Result<std::function<std::unique_ptr<Backend>()>> BackendFactory(const RunFlags& flags,
                                                                 MpiWorld& world) {
  // A failure other ranks may be waiting on: say which rank and why, then end the whole job.
  auto on_fatal = AbortEveryRank(world);
  if (flags.backend == "cuda") {
    const auto options = CommonOptions<CudaBackendOptions>(flags, on_fatal);
    return FactoryOf(
        "cuda", [&world, options] { return MakeCudaBackend(world, options); }, on_fatal);
  }
  auto options = CommonOptions<HostBackendOptions>(flags, on_fatal);
  options.peers = world.peers();
  return FactoryOf(
      "host", [&world, options] { return MakeHostBackend(world, options); }, on_fatal);
}

// Prints the error once per job (rank 0, or every rank with --all-ranks) and returns 2.
int FailAll(const Status& status, const MpiWorld& world, bool all_ranks) {
  if (world.rank() == 0 || all_ranks) return ReportError(status);
  return kExitError;
}

int RunOnWorld(const RunFlags& flags, const CommandContext& context, MpiWorld& world) {
  ReplayFlags replay = flags.replay;
  replay.trace = ForRank(replay.trace, world.rank());

  // Every rank loads its trace; the ranks agree before anything is executed.
  LoadedTrace trace;
  Status loaded = LoadTrace(replay.trace, trace);
  ReplayExtras extras;
  extras.compute_scale = flags.compute_scale;
  Result<ReplayRequest> request = MakeReplayRequest(replay, DefaultPolicies(), extras);
  if (loaded.ok() && !request.ok()) loaded = request.status();
  Result<ReportContext> report_context = ContextFor(context, replay);
  if (loaded.ok() && !report_context.ok()) loaded = report_context.status();
  // --memory-viz: rank 0's replays, or every rank's with --all-ranks (DIR/<policy>.rankR.pickle).
  std::vector<std::unique_ptr<MemoryVizSnapshot>> snapshots;
  if (loaded.ok() && !flags.memory_viz_dir.empty() && (world.rank() == 0 || flags.all_ranks)) {
    std::optional<int> rank;
    if (flags.all_ranks && world.size() > 1) rank = world.rank();
    Result<std::vector<std::unique_ptr<MemoryVizSnapshot>>> opened =
        OpenMemoryViz(flags.memory_viz_dir, replay, request->policies, rank);
    if (opened.ok()) {
      snapshots = std::move(*opened);
    } else {
      loaded = opened.status();
    }
  }
  // The request's own backend is the sim (priced by --profile, compute scaled as run scales it):
  // with --backend sim it runs the replays; with a real backend and --profile it predicts them
  // beside the measurement.
  std::function<std::unique_ptr<Backend>()> sim;
  if (request.ok()) sim = request->make_backend;
  const bool predict = flags.backend != "sim" && !replay.profile_path.empty();
  Result<std::function<std::unique_ptr<Backend>()>> factory =
      flags.backend == "sim" ? Result<std::function<std::unique_ptr<Backend>()>>(sim)
                             : BackendFactory(flags, world);
  if (loaded.ok() && !factory.ok()) loaded = factory.status();
  Status agreed = world.Agree(loaded);
  if (!agreed.ok()) return FailAll(agreed, world, flags.all_ranks);
  report_context->backend = flags.backend;
  DescribeTrace(replay.trace, trace.header, *report_context);

  ReplayOutcome outcome;
  auto source = [&trace](TraceHeader& header, EventSink& sink) {
    header = trace.header;
    BUCKETSIM_RETURN_IF_ERROR(sink.OnHeader(header));
    for (const Event& event : trace.events) BUCKETSIM_RETURN_IF_ERROR(sink.OnEvent(event));
    return sink.OnEnd();
  };
  for (std::size_t i = 0; i < request->policies.size(); ++i) {
    ReplayRequest one = *request;
    one.policies = {request->policies[i]};
    if (!snapshots.empty()) one.memory_events = {snapshots[i].get()};
    // --chrome-trace shows the first policy's replay, as compare's does by default.
    if (!flags.chrome_trace_path.empty() && outcome.runs.empty()) one.timeline_policy = 0;
    one.make_backend = *factory;
    Result<ReplayOutcome> replayed = ReplayPolicies(source, one);
    agreed = world.Agree(replayed.status());
    if (!agreed.ok()) return FailAll(agreed, world, flags.all_ranks);
    if (outcome.runs.empty()) {
      outcome.header = std::move(replayed->header);
      outcome.summary = replayed->summary;
    }
    outcome.runs.push_back(std::move(replayed->runs.front()));
  }
  if (predict) {
    ReplayRequest prediction = *request;
    prediction.make_backend = sim;
    prediction.timeline_policy.reset();
    Result<ReplayOutcome> predicted = ReplayPolicies(source, prediction);
    agreed = world.Agree(predicted.status());
    if (!agreed.ok()) return FailAll(agreed, world, flags.all_ranks);
    for (std::size_t i = 0; i < outcome.runs.size(); ++i) {
      outcome.runs[i].prediction =
          TimePrediction{report_context->time_profile, std::move(predicted->runs[i].iterations)};
    }
  }

  if (!replay.json_path.empty() && (world.rank() == 0 || flags.all_ranks)) {
    std::string path =
        flags.all_ranks ? ReportPathForRank(replay.json_path, world.rank()) : replay.json_path;
    Status written = WriteTextFile(path, ReportJsonText(outcome, *report_context));
    if (!written.ok()) return ReportError(written);
  }
  if (!flags.chrome_trace_path.empty() && world.rank() == 0) {
    Result<std::string> text = ChromeTraceJson(outcome.runs.front(), outcome.header);
    Status written = text.ok() ? WriteTextFile(flags.chrome_trace_path, *text) : text.status();
    if (!written.ok()) return ReportError(written);
  }
  if (world.rank() == 0) {
    const std::size_t width = ConsoleWidth(flags.replay.wide);
    std::printf(
        "%s: world size %d on %d rank(s), %llu events, backend %s, memory model %s\n\n%s\n%s",
        report_context->trace_name.c_str(), outcome.header.world_size, world.size(),
        static_cast<unsigned long long>(outcome.summary.events), flags.backend.c_str(),
        report_context->memory_model.c_str(),
        RenderText(BuildComparisonTable(outcome), width).c_str(),
        RenderText(BuildTimingTable(outcome), width).c_str());
    if (predict) {
      std::printf("\npredicted by the sim with profile %s:\n%s",
                  report_context->time_profile.c_str(),
                  RenderText(BuildPredictionTable(PredictionRows(outcome.runs)), width).c_str());
    }
    // Emulation is a property of the job (one rank for a larger world): say it once.
    if (outcome.runs.front().execution.emulated) {
      std::printf("\nemulated: %s\n", outcome.runs.front().execution.emulation_note.c_str());
    }
    if (!replay.json_path.empty()) std::printf("\nreport: %s\n", replay.json_path.c_str());
  }
  if (flags.all_ranks || world.rank() == 0) PrintMemoryViz(stdout, snapshots, request->policies);

  // A wrong reduced value on any rank fails the run on every rank.
  Status verified = Status::Ok();
  for (const RunResult& run : outcome.runs) {
    if (run.execution.verify_failures > 0 && verified.ok()) {
      verified =
          Status(StatusCode::kBudgetExceeded,
                 fmt::format("{}: {} collective(s) reduced wrong values; first: {}", run.policy,
                             run.execution.verify_failures, run.execution.first_mismatch));
    }
  }
  agreed = world.Agree(verified);
  if (!agreed.ok()) {
    if (world.rank() == 0 || flags.all_ranks) {
      std::fprintf(stderr, "bucketsim: verification FAILED: %s\n", agreed.message().c_str());
    }
    return kExitBudgetBroken;
  }
  return kExitOk;
}

int RunRun(const RunFlags& flags, const CommandContext& context) {
  Result<std::unique_ptr<MpiWorld>> world = MpiWorld::Init();
  if (!world.ok()) return ReportError(world.status());
  // When the launcher ends the job (Ctrl-C to mpirun, a lost rank), each rank says which it was.
  SetInterruptLabel(fmt::format("rank {}", (*world)->rank()));
  // A rank that dies or hangs is named by the survivors themselves, within --timeout, whatever
  // the launcher notices (peer_watch.h). From here to the end: loading, every replay, the
  // report; the world stops the watch before MPI is finalised.
  if (flags.backend != "sim") {
    // Printed, then the grace, so that every survivor says it before one aborts.
    Status watching = (*world)->WatchPeers(
        flags.timeout_s, AbortEveryRank(**world, MpiWorld::LostPeerGrace(flags.timeout_s)));
    if (!watching.ok()) return ReportError(watching);
  }
  return RunOnWorld(flags, context, **world);
}

}  // namespace

void AddRunCommand(CLI::App& command, CommandContext& context) {
  auto flags = std::make_shared<RunFlags>();
  AddTraceArgument(command, flags->replay.trace, /*required=*/true);
  AddReplayFlags(command, flags->replay);
  AddWideFlag(command, flags->replay.wide);
  command.add_option("--backend", flags->backend, "Where to execute: host (MPI), cuda (NCCL), sim")
      ->check(CLI::IsMember({"host", "cuda", "sim"}))
      ->capture_default_str();
  command
      .add_option("--materialize", flags->materialize,
                  "policy: real buffers for what the policy creates; all: trace allocations too")
      ->check(CLI::IsMember({"policy", "all"}))
      ->capture_default_str();
  command.add_flag("--no-verify", flags->no_verify,
                   "Do not check the reduced values (timing runs)");
  command.add_flag("--all-ranks", flags->all_ranks,
                   "Every rank writes its own --json report ({rank} in the path, else .rankR)");
  command
      .add_option("--compute-scale", flags->compute_scale,
                  "Run compute spans for dur_us times this (0: skip them)")
      ->check(NumberFlag({"--compute-scale", "", "1.5", NumberKind::kNonNegative}))
      ->capture_default_str();
  AddTimeoutFlag(command, flags->timeout_s);
  command.add_option("--chrome-trace", flags->chrome_trace_path,
                     "Write the first policy's replay on rank 0 as a Chrome trace-event / "
                     "Perfetto JSON file (streams as tracks, compute, collectives and copies as "
                     "slices, as measured)");
  command
      .add_option("--memory-viz", flags->memory_viz_dir,
                  "Write each policy's replay on rank 0 (every rank with --all-ranks: "
                  "DIR/<policy>.rankR.pickle) as a PyTorch memory snapshot, "
                  "DIR/<policy>.pickle, for pytorch.org/memory_viz")
      ->type_name("DIR");
  command.footer(
      "TRACE may contain {rank}: each rank reads its own trace. With --backend host|cuda,\n"
      "--profile P also replays each policy on the sim priced by P and shows the prediction\n"
      "beside the measurement (report: timing.prediction). Exit codes: 0 ok, 1 a reduced\n"
      "value was wrong, 2 error (on every rank, naming the rank that failed).\n"
      "--timeout T also bounds silence: a rank lost (killed, stopped, hung) is named by every\n"
      "other rank ('lost contact with rank K') and the job ends (exit 2) within T s of its\n"
      "last heartbeat.\n\n"
      "Example:\n"
      "  mpirun -np 2 bucketsim run traces/tiny-ws2.json --backend host \\\n"
      "      --policy backward-only --json reports/latest/run.json");
  command.callback([flags, &context] { context.exit_code = RunRun(*flags, context); });
}

}  // namespace bucketsim
