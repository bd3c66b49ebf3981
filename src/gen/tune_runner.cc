#include "gen/tune_runner.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "gen/fsdp_emitter.h"

namespace bucketsim {
namespace {

// One configuration emitted and replayed: its point (settings left to the caller), or why it
// could not be.
Result<TunePoint> RunConfiguration(const TuneRun& run, const TuneSettings& settings) {
  GenOptions options = run.options;
  ProgramWhatIfs what_ifs = run.what_ifs;
  ReplayRequest request = run.replay;
  request.jobs = 1;
  for (const auto& [flag, value] : settings) {
    if (flag == kPolicyFlag) {
      Result<PolicySpec> spec = ParsePolicySpec(value);
      if (!spec.ok()) return spec.status();
      request.policies = {*spec};
      continue;
    }
    BUCKETSIM_RETURN_IF_ERROR(SetVaried(options, what_ifs, flag, value));
  }
  BUCKETSIM_RETURN_IF_ERROR(ValidateGenOptions(options));
  ModelProgram program = *run.program;
  Result<WhatIfChanges> changed = ApplyWhatIfs(program, options, what_ifs);
  if (!changed.ok()) return changed.status();
  if (request.policies.empty()) {
    request.policies = {DefaultPoliciesFor(options.fsdp_impl).front()};
  }
  // The generator is the source: the trace is never written, and the replay keeps no more of
  // it than of a file.
  const TraceSource source = [&](TraceHeader&, EventSink& sink) {
    return EmitFsdpTrace(program, options, sink);
  };
  Result<ReplayOutcome> outcome = ReplayPolicies(source, request);
  if (!outcome.ok()) return outcome.status();
  const RunResult& result = outcome->runs.front();
  return TunePoint{settings, SweepPointOf(result), result.device};
}

}  // namespace

Status SetVaried(GenOptions& options, ProgramWhatIfs& what_ifs, const std::string& flag,
                 const std::string& value) {
  if (IsSizeFlag(flag)) {
    const std::optional<std::uint64_t> size = ParseBatchSize(value);
    const bool batch = flag == kBatchSizeFlag;
    if (!size) {
      return InvalidArgument(
          fmt::format("'{}' is not a {}", value, batch ? "batch size" : "sequence length"));
    }
    (batch ? what_ifs.batch_size : what_ifs.seq_len) = *size;
  } else if (flag == "checkpoint" || flag == "wrap") {
    std::string& classes = flag == "wrap" ? what_ifs.wrap : what_ifs.checkpoint;
    classes = value;
    std::replace(classes.begin(), classes.end(), '+', ',');
  } else if (flag == "checkpoint-impl") {
    Result<bool> reentrant = ParseCheckpointReentrant(value);
    if (!reentrant.ok()) return reentrant.status();
    what_ifs.checkpoint_impl = value;
  } else if (flag == "checkpoint-save") {
    // auto: the command's search, expanded into policies before the grid runs (cmd_tune.cc).
    if (value != "none" && value != "auto") {
      Result<SavePolicy> policy = ParseSavePolicy(value);
      if (!policy.ok()) return policy.status();
    }
    what_ifs.checkpoint_save = value;
  } else if (flag == "checkpoint-every") {
    const std::optional<std::uint64_t> every = ParseBatchSize(value);
    if (!every)
      return InvalidArgument(fmt::format("'{}' is not a positive number of calls", value));
    what_ifs.checkpoint_every = *every;
  } else if (flag == "checkpoint-early-stop") {
    if (value != "true" && value != "false") {
      return InvalidArgument(fmt::format("'{}': expected true or false", value));
    }
    what_ifs.checkpoint_early_stop = value;
  } else if (flag == "activation-dtype") {
    if (value != "recorded" && value != "param-dtype") {
      return InvalidArgument(fmt::format("'{}': expected recorded or param-dtype", value));
    }
    what_ifs.activation_dtype = value;
  } else {
    return SetGenOption(options, flag, value);
  }
  return Status::Ok();
}

Result<std::vector<TunePoint>> RunTuneGrid(const TuneRun& run,
                                           const std::vector<TuneSettings>& grid) {
  std::vector<std::optional<Result<TunePoint>>> results(grid.size());
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i = next++; i < grid.size(); i = next++) {
      results[i] = RunConfiguration(run, grid[i]);
    }
  };
  unsigned threads = run.threads == 0 ? std::thread::hardware_concurrency() : run.threads;
  threads = static_cast<unsigned>(std::clamp<std::size_t>(threads, 1, grid.size()));
  std::vector<std::thread> workers;
  for (unsigned t = 1; t < threads; ++t) workers.emplace_back(work);
  work();
  for (std::thread& worker : workers) worker.join();
  std::vector<TunePoint> points;
  for (std::size_t i = 0; i < grid.size(); ++i) {
    if (!results[i]->ok()) {
      std::string where;
      for (const auto& [flag, value] : grid[i]) {
        where += fmt::format("{}{}={}", where.empty() ? "" : ", ", flag, value);
      }
      return Status(
          results[i]->status().code(),
          fmt::format("{}{}", where.empty() ? "" : where + ": ", results[i]->status().message()));
    }
    points.push_back(std::move(**results[i]));
  }
  return points;
}

}  // namespace bucketsim
