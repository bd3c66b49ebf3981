#include "cli/command.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "backend/host/mpi_world.h"
#include "backend/sim/sim_backend.h"
#include "cli/progress_reporter.h"
#include "core/comma_list.h"
#include "core/gpu_catalog.h"
#include "core/size_format.h"
#include "io/time_profile_io.h"
#include "io/trace_reader.h"
#include "memory/device_capacity.h"
#include "report/console_table.h"

namespace bucketsim {

void AddTraceArgument(CLI::App& command, std::string& trace, bool required) {
  auto* option =
      command.add_option("trace", trace, "Trace file (JSON, traces/README.md; - for stdin)");
  if (required) option->required();
}

void AddProgressFlags(CLI::App& command, ProgressFlags& flags) {
  command.add_flag("--progress", flags.progress,
                   "Report progress on stderr even when it is not a terminal (a CI log)");
  command.add_flag("--quiet", flags.quiet, "No progress on stderr, even on a terminal");
}

namespace {

// Hands every event on and feeds the progress line the count (the reader feeds it bytes).
class ProgressSink final : public EventSink {
 public:
  ProgressSink(EventSink& next, ProgressReporter& reporter, std::uint64_t total_bytes)
      : next_(next), reporter_(reporter), total_bytes_(total_bytes) {}
  Status OnHeader(const TraceHeader& header) override { return next_.OnHeader(header); }
  Status OnEvent(const Event& event) override {
    if ((++events_ & 0xfff) == 0) reporter_.Update(bytes_, total_bytes_, events_);
    return next_.OnEvent(event);
  }
  Status OnEnd() override { return next_.OnEnd(); }
  void Read(std::uint64_t bytes) {
    bytes_ = bytes;
    reporter_.Update(bytes_, total_bytes_, events_);
  }

 private:
  EventSink& next_;
  ProgressReporter& reporter_;
  std::uint64_t total_bytes_;
  std::uint64_t bytes_ = 0;
  std::uint64_t events_ = 0;
};

}  // namespace

Status ReadTraceWithProgress(const std::string& path, TraceHeader& header, EventSink& sink,
                             const ProgressFlags& flags, std::string_view what,
                             std::string detail) {
  ProgressReporter reporter(ProgressModeOf(flags.progress, flags.quiet),
                            fmt::format("{} {}", what, path == "-" ? "<stdin>" : path),
                            std::move(detail));
  if (!reporter.enabled()) return ReadTrace(path, header, sink);
  std::error_code error;
  std::uint64_t total = path == "-" ? 0 : std::filesystem::file_size(path, error);
  if (error) total = 0;
  ProgressSink counted(sink, reporter, total);
  return ReadTrace(path, header, counted, [&counted](std::uint64_t bytes) { counted.Read(bytes); });
}

void AddReplayFlags(CLI::App& command, ReplayFlags& flags, bool with_cap) {
  AddProgressFlags(command, flags.progress);
  // One value per --policy (repeat the flag for more): a word after it is the trace, so
  // `compare --policy backward-only TRACE` reads TRACE rather than taking it for a policy.
  command
      .add_option("--policy", flags.policies,
                  "Bucket policy: " + PolicyNamesHelp() + " (repeatable)")
      ->allow_extra_args(false);
  if (with_cap) {
    command
        .add_option("--bucket-cap-mb", flags.bucket_cap_mb,
                    "Bucket cap in MiB for policies that do not fix their own "
                    "(default: the trace's bucket_cap_mb; <= 0 disables bucketing)")
        ->check(NumberFlag({"--bucket-cap-mb", "MiB", "25"}));
  }
  command.add_option("--profile", flags.profile_path,
                     "Time profile (JSON, traces/profiles/) for the sim backend's time model: "
                     "collective alpha-beta and copy bandwidth; or a GPU's name (" +
                         GpuNameList() +
                         "): an estimate from its published rates (docs/time-model.md). Without "
                         "it copies and collectives take no time");
  command.add_option("--json", flags.json_path, "Also write the JSON report to FILE");
  command
      .add_option("--allocator", flags.allocator,
                  "Memory model: caching (PyTorch's CUDA caching allocator: reserved memory, "
                  "fragmentation) or exact (requests rounded to 512 B, a lower bound)")
      ->check(CLI::IsMember({"caching", "exact"}))
      ->capture_default_str();
  command.add_option("--alloc-conf", flags.alloc_conf,
                     "Caching allocator settings in PYTORCH_CUDA_ALLOC_CONF syntax, e.g. "
                     "'expandable_segments:True,max_split_size_mb:128' (default: the trace's "
                     "alloc_conf, recorded by an imported snapshot; '' for PyTorch's defaults)");
  command.add_option("--device-memory", flags.device_memory,
                     DeviceMemoryHelp("the caching allocator gets it less the CUDA context and "
                                      "NCCL buffers (--device-overhead), frees its cache and "
                                      "retries when a segment does not fit, then fails with an "
                                      "OOM"));
  command.add_option("--device-overhead", flags.device_overhead,
                     "Device memory outside the caching allocator (SIZE, e.g. 1.5GiB, or 0), "
                     "replacing the estimate of the CUDA context and NCCL's buffers "
                     "(docs/memory-model.md); measure it as cudaMemGetInfo's total - free less "
                     "memory_reserved()");
  command.add_flag("--full-log", flags.full_log,
                   "Write every collective in the JSON report (`collectives`), not only the "
                   "summary per iteration and phase; memory and report then grow with the trace");
}

void AddJobsFlag(CLI::App& command, unsigned& jobs) {
  jobs = 0;
  command.add_option("--jobs,-j", jobs,
                     "Threads (default 0: one per core): with 2 or more, the trace is read and "
                     "checked on one while the policies replay in parallel on up to N others; "
                     "the results are the same for any N");
}

void AddWideFlag(CLI::App& command, bool& wide) {
  command.add_flag("--wide", wide,
                   "Console tables at full width (default: split into blocks of columns that "
                   "fit the terminal, each repeating the policy; $COLUMNS sets the width)");
}

std::size_t ConsoleWidth(bool wide) {
  if (wide) return 0;
  if (const char* columns = std::getenv("COLUMNS"); columns != nullptr && *columns != '\0') {
    char* end = nullptr;
    const unsigned long value = std::strtoul(columns, &end, 10);
    if (*end == '\0' && value > 0) return value;
  }
  winsize size{};
  if (::isatty(STDOUT_FILENO) && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 &&
      size.ws_col > 0) {
    return size.ws_col;
  }
  return 0;
}

Result<std::vector<PolicySpec>> ParsePolicyFlags(const ReplayFlags& flags,
                                                 const std::vector<PolicySpec>& default_policies) {
  std::vector<PolicySpec> policies;
  for (const std::string& name : flags.policies) {
    Result<PolicySpec> spec = ParsePolicySpec(name);
    if (!spec.ok()) return spec.status();
    policies.push_back(*spec);
  }
  if (policies.empty()) policies = default_policies;
  return policies;
}

Result<double> ParseNumberFlag(const NumberFlagSpec& spec, std::string_view text) {
  // "MiB as a plain number", "seconds as a plain number >= 0", "a whole number above 0".
  std::string_view bound = spec.kind == NumberKind::kPositiveInteger ? " above 0"
                           : spec.kind == NumberKind::kNonNegative   ? " >= 0"
                                                                     : "";
  std::string what =
      spec.unit.empty()
          ? fmt::format("a {} number{}",
                        spec.kind == NumberKind::kPositiveInteger ? "whole" : "finite", bound)
          : fmt::format("{} as a plain number{}", spec.unit, bound);
  auto refuse = [&] {
    std::string refused = text.empty() ? std::string("an empty value") : fmt::format("'{}'", text);
    return InvalidArgument(
        fmt::format("{}: takes {} (e.g. {}), not {}", spec.flag, what, spec.example, refused));
  };
  std::string owned(text);
  char* end = nullptr;
  double value = owned.empty() ? 0 : std::strtod(owned.c_str(), &end);
  if (owned.empty() || end != owned.c_str() + owned.size() || !std::isfinite(value)) {
    return refuse();
  }
  if (spec.kind == NumberKind::kNonNegative && value < 0) return refuse();
  if (spec.kind == NumberKind::kPositiveInteger && (value < 1 || value != std::floor(value))) {
    return refuse();
  }
  return value;
}

CLI::Validator NumberFlag(NumberFlagSpec spec) {
  return CLI::Validator(
      [spec](const std::string& text) {
        Result<double> value = ParseNumberFlag(spec, text);
        if (value.ok()) return std::string();
        // CLI11 prefixes the flag's name: drop ours.
        std::string message = value.status().message();
        return message.substr(spec.flag.size() + 2);
      },
      spec.unit.empty() ? "NUMBER" : spec.unit);
}

Result<std::vector<std::string>> SplitListEntries(std::string_view flag,
                                                  const std::vector<std::string>& values) {
  std::vector<std::string> entries;
  for (const std::string& value : values) {
    for (std::string_view entry : SplitCommaList(value)) {
      if (entry.empty()) {
        return InvalidArgument(
            fmt::format("{}: '{}' has an empty entry (write numbers separated by single commas, "
                        "e.g. 1,5,25)",
                        flag, value));
      }
      entries.emplace_back(entry);
    }
  }
  return entries;
}

Result<MemoryModelOptions> MemoryOptionsOf(const ReplayFlags& flags) {
  MemoryModelOptions memory{flags.allocator, flags.alloc_conf, std::nullopt, std::nullopt};
  if (!flags.device_memory.empty()) {
    Result<Bytes> capacity = ParseDeviceMemoryFlag(flags.device_memory);
    if (!capacity.ok()) return capacity.status();
    memory.device_memory = *capacity;
  }
  if (!flags.device_overhead.empty()) {
    Result<Bytes> overhead = ParseSizeFlag("--device-overhead", flags.device_overhead);
    if (!overhead.ok()) return overhead.status();
    memory.device_overhead = *overhead;
  }
  return memory;
}

Result<std::optional<DeviceBudget>> DeviceBudgetOfFlags(const ReplayFlags& flags,
                                                        const TraceHeader& header) {
  Result<MemoryModelOptions> memory = MemoryOptionsOf(flags);
  if (!memory.ok()) return memory.status();
  return DeviceBudgetOf(*memory, header);
}

void PrintDeviceBudget(const std::optional<DeviceBudget>& device) {
  if (device) std::printf("\n%s\n", DeviceBudgetLine(*device).c_str());
}

Result<ReplayRequest> MakeReplayRequest(const ReplayFlags& flags,
                                        const std::vector<PolicySpec>& default_policies,
                                        ReplayExtras extras) {
  ReplayRequest request;
  request.bucket_cap_mb = flags.bucket_cap_mb;
  request.timeline_policy = extras.timeline_policy;
  request.jobs = flags.jobs;
  request.options.keep_collective_log = flags.full_log;
  if (extras.policies) {
    request.policies = std::move(*extras.policies);
  } else {
    Result<std::vector<PolicySpec>> parsed = ParsePolicyFlags(flags, default_policies);
    if (!parsed.ok()) return parsed.status();
    request.policies = std::move(*parsed);
  }
  std::shared_ptr<const TimeProfile> profile;
  if (!flags.profile_path.empty()) {
    Result<TimeProfile> read = LoadTimeProfile(flags.profile_path, flags.profile_efficiency);
    if (!read.ok()) return read.status();
    profile = std::make_shared<const TimeProfile>(std::move(*read));
  }
  request.make_backend = [profile, scale = extras.compute_scale] {
    return std::make_unique<SimBackend>(profile, scale);
  };
  Result<MemoryModelOptions> memory = MemoryOptionsOf(flags);
  if (!memory.ok()) return memory.status();
  Result<MemoryModelFactory> factory = MakeMemoryModelFactory(*memory);
  if (!factory.ok()) return factory.status();
  request.make_memory_model = *factory;
  request.memory_events = std::move(extras.memory_events);
  request.device_budget = [options = *memory](const TraceHeader& header) {
    return DeviceBudgetOf(options, header);
  };
  return request;
}

std::vector<PolicySpec> DefaultPoliciesOf(const ReplayFlags& flags) {
  // A trace on stdin cannot be read twice: its header is not known before the replay starts.
  if (flags.trace.empty() || flags.trace == "-") return DefaultPolicies();
  Result<TraceHeader> header = ReadTraceHeader(flags.trace);
  // An unreadable trace is reported by the replay's own read, with the event index.
  if (!header.ok()) return DefaultPolicies();
  return DefaultPoliciesFor(header->fsdp_impl);
}

std::optional<PolicySpec> OwnPolicyOf(const ReplayFlags& flags) {
  std::vector<PolicySpec> specs = DefaultPoliciesOf(flags);
  if (specs.front().strategy == Strategy::kFairscale) return std::nullopt;
  return std::move(specs.front());
}

Result<ReplayOutcome> RunReplays(const ReplayFlags& flags,
                                 const std::vector<PolicySpec>& default_policies,
                                 ReplayExtras extras) {
  Result<ReplayRequest> request = MakeReplayRequest(flags, default_policies, std::move(extras));
  if (!request.ok()) return request.status();
  const std::size_t policies = request->policies.size();
  std::string detail =
      policies == 1 ? std::string("1 policy") : fmt::format("{} policies", policies);
  return ReplayPolicies(
      [&flags, &detail](TraceHeader& header, EventSink& sink) {
        return ReadTraceWithProgress(flags.trace, header, sink, flags.progress, "replaying",
                                     detail);
      },
      *request);
}

Result<ReportContext> ContextFor(const CommandContext& context, const ReplayFlags& flags) {
  ReportContext report = MakeReportContext(context.argv);
  report.memory_model = flags.allocator;
  // The caching model's settings, when they are not PyTorch's defaults, and where they came
  // from: a report (and a baseline's comparability) must say what was modelled.
  if (flags.allocator == "caching") {
    if (flags.alloc_conf && !flags.alloc_conf->empty()) {
      report.memory_model += ", alloc_conf " + *flags.alloc_conf;
    } else if (!flags.alloc_conf && flags.trace != "-") {
      Result<TraceHeader> header = ReadTraceHeader(flags.trace);
      if (!header.ok()) return header.status();
      if (!header->alloc_conf.empty()) {
        report.memory_model += ", alloc_conf " + header->alloc_conf + " (the trace's)";
      }
    }
  }
  if (!flags.profile_path.empty()) {
    Result<TimeProfile> profile = LoadTimeProfile(flags.profile_path, flags.profile_efficiency);
    if (!profile.ok()) return profile.status();
    report.time_profile = profile->name;
  }
  return report;
}

Result<Bytes> ParseSizeFlag(std::string_view flag, std::string_view text) {
  Result<Bytes> size = ParseSize(text);
  if (!size.ok())
    return Status(size.status().code(), fmt::format("{}: {}", flag, size.status().message()));
  return size;
}

Result<Bytes> ParseDeviceMemoryFlag(std::string_view text) {
  if (std::optional<Bytes> named = NamedDeviceCapacity(text)) return *named;
  if (const GpuSpec* gpu = FindGpu(text)) {
    return InvalidArgument(fmt::format(
        "--device-memory {}: no totalGlobalMem of the {} is on record (only its published "
        "rates, for --gpu); give its capacity as a SIZE",
        text, gpu->description));
  }
  Result<Bytes> size = ParseSize(text);
  if (size.ok()) return size;
  return Status(size.status().code(), fmt::format("--device-memory: {}; or a device's name: {}",
                                                  size.status().message(), NamedDeviceList()));
}

std::string DeviceMemoryHelp(std::string_view what) {
  return fmt::format(
      "Device capacity: a SIZE (e.g. 80GiB) or a GPU's name, meaning the bytes torch reports as "
      "its total_memory ({}; docs/commands.md lists their bytes); {}",
      NamedDeviceList(), what);
}

Result<Bytes> ParseBudgetFlag(std::string_view flag, std::string_view text) {
  Result<Bytes> size = ParseSizeFlag(flag, text);
  const bool plain_number =
      !text.empty() && text.find_first_not_of("0123456789.") == std::string_view::npos;
  if (size.ok() && plain_number && *size < kMiB) {
    std::fprintf(stderr,
                 "bucketsim: warning: %.*s %.*s is %llu bytes (a SIZE without a unit is bytes); "
                 "did you mean %.*sGiB?\n",
                 static_cast<int>(flag.size()), flag.data(), static_cast<int>(text.size()),
                 text.data(), static_cast<unsigned long long>(*size), static_cast<int>(text.size()),
                 text.data());
  }
  return size;
}

std::function<void(const std::string&)> AbortEveryRank(MpiWorld& world,
                                                       std::chrono::milliseconds grace) {
  return [&world, grace](const std::string& message) {
    std::fprintf(stderr, "bucketsim: rank %d: error: %s; aborting every rank\n", world.rank(),
                 message.c_str());
    std::fflush(stderr);
    std::this_thread::sleep_for(grace);
    world.Abort(kExitError);
  };
}

void AddTimeoutFlag(CLI::App& command, double& timeout_s) {
  command
      .add_option("--timeout", timeout_s,
                  "Seconds one operation may run before every rank is aborted (0: never)")
      ->check(NumberFlag({"--timeout", "seconds", "300", NumberKind::kNonNegative}))
      ->capture_default_str();
}

std::uint64_t ReduceScatterRequests(const TraceSummary& summary) {
  return summary.events_by_kind[static_cast<std::size_t>(EventKind::kReduceScatter)];
}

void PrintNoteIfNoReduceScatter(const TraceSummary& summary, std::size_t width) {
  PrintNoteIfNoReduceScatter(ReduceScatterRequests(summary), width);
}

void PrintNoteIfNoReduceScatter(std::uint64_t reduce_scatter_requests, std::size_t width) {
  if (reduce_scatter_requests != 0) return;
  std::printf("\n%s",
              WrapText("This trace has no reduce-scatter request (rs event), so the policies "
                       "cannot differ on it; record your model's program with "
                       "tools/record_program.py (docs/your-model.md, \"Bring your own model\").",
                       width)
                  .c_str());
}

Result<std::vector<std::unique_ptr<MemoryVizSnapshot>>> OpenMemoryViz(
    const std::string& dir, const ReplayFlags& flags, const std::vector<PolicySpec>& policies,
    std::optional<int> rank) {
  if (flags.allocator != "caching") {
    return InvalidArgument(
        "--memory-viz writes what the caching allocator model did (segments, blocks, "
        "addresses): use it with --allocator caching, not exact");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return IoError(fmt::format("--memory-viz: cannot create the directory '{}': {}", dir,
                               ec ? ec.message() : "a file of that name is in the way"));
  }
  std::vector<std::unique_ptr<MemoryVizSnapshot>> snapshots;
  std::vector<std::string> stems;
  for (const PolicySpec& spec : policies) {
    const std::string base = MemoryVizFileStem(spec.name);
    std::string stem = base;
    for (int n = 2; std::find(stems.begin(), stems.end(), stem) != stems.end(); ++n) {
      stem = fmt::format("{}-{}", base, n);
    }
    stems.push_back(stem);
    MemoryVizOptions options;
    options.path = (std::filesystem::path(dir) /
                    (rank ? fmt::format("{}.rank{}.pickle", stem, *rank) : stem + ".pickle"))
                       .string();
    options.trace_name = flags.trace == "-" ? "<stdin>" : flags.trace;
    options.alloc_conf = flags.alloc_conf;
    Result<std::unique_ptr<MemoryVizSnapshot>> snapshot = MemoryVizSnapshot::Create(options);
    if (!snapshot.ok()) {
      return IoError(fmt::format("--memory-viz: {}", snapshot.status().message()));
    }
    snapshots.push_back(std::move(*snapshot));
  }
  return snapshots;
}

std::vector<MemoryEventSink*> MemoryEventSinks(
    const std::vector<std::unique_ptr<MemoryVizSnapshot>>& snapshots) {
  std::vector<MemoryEventSink*> sinks;
  for (const auto& snapshot : snapshots) sinks.push_back(snapshot.get());
  return sinks;
}

void PrintMemoryViz(std::FILE* out,
                    const std::vector<std::unique_ptr<MemoryVizSnapshot>>& snapshots,
                    const std::vector<PolicySpec>& policies) {
  for (std::size_t i = 0; i < snapshots.size(); ++i) {
    const MemoryVizSnapshot& snapshot = *snapshots[i];
    if (!snapshot.committed()) continue;
    std::fprintf(out, "memory snapshot (%s): %s (%llu trace entries, %s)\n",
                 policies[i].name.c_str(), snapshot.path().c_str(),
                 static_cast<unsigned long long>(snapshot.trace_entries()),
                 FormatBytes(snapshot.file_bytes()).c_str());
  }
  if (!snapshots.empty()) {
    std::fprintf(out,
                 "  open one: python3 -m torch.cuda._memory_viz trace_plot FILE -o page.html, or "
                 "drop it on https://pytorch.org/memory_viz\n");
  }
}

int ReportError(const Status& status) {
  std::fprintf(stderr, "bucketsim: error: %s\n", status.message().c_str());
  return kExitError;
}

std::string DefaultTracePath() {
  // BUCKETSIM_DEFAULT_TRACE in the environment wins.
  if (const char* env = std::getenv("BUCKETSIM_DEFAULT_TRACE"); env && *env) return env;
  // Relative to the binary, never through the source tree it was built in: installed,
  // PREFIX/bin/bucketsim and PREFIX/share/bucketsim/traces; in the build tree, the binary at
  // the top and the same share/bucketsim/traces below it (CMakeLists.txt, "Installed layout").
  std::error_code error;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  const std::filesystem::path trace =
      std::filesystem::path("share") / "bucketsim" / "traces" / BUCKETSIM_DEFAULT_TRACE_NAME;
  std::filesystem::path installed = exe.parent_path().parent_path() / trace;
  if (error) return trace.string();
  for (const std::filesystem::path& candidate : {installed, exe.parent_path() / trace}) {
    if (std::filesystem::exists(candidate, error)) return candidate.string();
  }
  return installed.string();  // the error names where the default trace should have been
}

}  // namespace bucketsim
