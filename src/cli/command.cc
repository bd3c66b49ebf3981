#include "cli/command.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "backend/host/mpi_world.h"
#include "backend/sim/sim_backend.h"
#include "core/size_format.h"
#include "io/time_profile_io.h"
#include "io/trace_reader.h"

namespace bucketsim {

void AddTraceArgument(CLI::App& command, std::string& trace, bool required) {
  auto* option = command.add_option("trace", trace, "Trace file (trace format v1; - for stdin)");
  if (required) option->required();
}

void AddReplayFlags(CLI::App& command, ReplayFlags& flags, bool with_cap) {
  command.add_option("--policy", flags.policies,
                     "Bucket policy: " + PolicyNamesHelp() + " (repeatable)");
  if (with_cap) {
    command
        .add_option("--bucket-cap-mb", flags.bucket_cap_mb,
                    "Bucket cap in MiB for policies that do not fix their own "
                    "(default: the trace's bucket_cap_mb; <= 0 disables bucketing)")
        ->check(FiniteNumber());
  }
  command.add_option("--profile", flags.profile_path,
                     "Time profile (JSON, traces/profiles/) for the sim backend's time model: "
                     "collective alpha-beta and copy bandwidth. Without it copies and "
                     "collectives take no time");
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
                     "Device capacity (SIZE, e.g. 80GiB): the caching allocator frees its cache "
                     "and retries when a segment does not fit, then fails with an OOM");
  command.add_flag("--full-log", flags.full_log,
                   "Write every collective in the JSON report (`collectives`), not only the "
                   "summary per iteration and phase; memory and report then grow with the trace");
}

void AddJobsFlag(CLI::App& command, unsigned& jobs) {
  jobs = 0;
  command.add_option("--jobs,-j", jobs,
                     "Policies replayed in parallel, on this many threads (default 0: one per "
                     "core); the results are the same for any N");
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

CLI::Validator FiniteNumber() {
  return CLI::Validator(
      [](const std::string& text) {
        double value = std::strtod(text.c_str(), nullptr);
        return std::isfinite(value) ? std::string() : std::string("must be a finite number");
      },
      "FINITE");
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
    Result<TimeProfile> read = ReadTimeProfile(flags.profile_path);
    if (!read.ok()) return read.status();
    profile = std::make_shared<const TimeProfile>(std::move(*read));
  }
  request.make_backend = [profile, scale = extras.compute_scale] {
    return std::make_unique<SimBackend>(profile, scale);
  };
  MemoryModelOptions memory{flags.allocator, flags.alloc_conf, std::nullopt};
  if (!flags.device_memory.empty()) {
    Result<Bytes> capacity = ParseSizeFlag("--device-memory", flags.device_memory);
    if (!capacity.ok()) return capacity.status();
    memory.device_memory = *capacity;
  }
  Result<MemoryModelFactory> factory = MakeMemoryModelFactory(memory);
  if (!factory.ok()) return factory.status();
  request.make_memory_model = *factory;
  return request;
}

Result<ReplayOutcome> RunReplays(const ReplayFlags& flags,
                                 const std::vector<PolicySpec>& default_policies,
                                 ReplayExtras extras) {
  Result<ReplayRequest> request = MakeReplayRequest(flags, default_policies, std::move(extras));
  if (!request.ok()) return request.status();
  const std::string& path = flags.trace;
  return ReplayPolicies(
      [&path](TraceHeader& header, EventSink& sink) { return ReadTrace(path, header, sink); },
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
    Result<TimeProfile> profile = ReadTimeProfile(flags.profile_path);
    if (!profile.ok()) return profile.status();
    report.time_profile = profile->name;
  }
  BUCKETSIM_RETURN_IF_ERROR(DescribeTrace(flags.trace, report));
  return report;
}

Result<Bytes> ParseSizeFlag(std::string_view flag, std::string_view text) {
  Result<Bytes> size = ParseSize(text);
  if (!size.ok())
    return Status(size.status().code(), fmt::format("{}: {}", flag, size.status().message()));
  return size;
}

std::function<void(const std::string&)> AbortEveryRank(MpiWorld& world) {
  return [&world](const std::string& message) {
    std::fprintf(stderr, "bucketsim: rank %d: error: %s; aborting every rank\n", world.rank(),
                 message.c_str());
    std::fflush(stderr);
    world.Abort(kExitError);
  };
}

void AddTimeoutFlag(CLI::App& command, double& timeout_s) {
  command
      .add_option("--timeout", timeout_s,
                  "Seconds one operation may run before every rank is aborted (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

int ReportError(const Status& status) {
  std::fprintf(stderr, "bucketsim: error: %s\n", status.message().c_str());
  return kExitError;
}

std::string DefaultTracePath() {
  // BUCKETSIM_DEFAULT_TRACE in the environment wins, for installed copies of the binary.
  if (const char* env = std::getenv("BUCKETSIM_DEFAULT_TRACE"); env && *env) return env;
  return BUCKETSIM_DEFAULT_TRACE;
}

}  // namespace bucketsim
