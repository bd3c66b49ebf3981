// bucketsim tune MODEL.json [gen program flags] --vary FLAG=V1,V2,... [--vary ...]
// [--device-memory SIZE] [--budget SIZE] [--policy P] [replay flags]: the model program emitted
// (as `gen program` would with the same flags) and replayed in every combination of the varied
// flags' values, on up to --jobs threads; one row per configuration, and the answer to what
// people tune for: the largest batch size that fits (when batch-size is varied), else the
// fastest configuration that fits, with the exact `gen program` command. Exit 0, or 1 when a
// device or budget was given and nothing fits; 2 on bad input.
#include <algorithm>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/command.h"
#include "cli/program_flags.h"
#include "core/size_format.h"
#include "engine/tune_grid.h"
#include "gen/compute_rates.h"
#include "gen/model_program.h"
#include "gen/preset_param.h"
#include "gen/program_checkpoint.h"
#include "gen/tune_runner.h"
#include "io/atomic_file.h"
#include "io/model_program_file.h"
#include "memory/device_capacity.h"
#include "policy/policy_spec.h"
#include "report/tune_report.h"

namespace bucketsim {
namespace {

struct TuneFlags {
  std::string model;
  GenOptions options;
  ProgramWhatIfs what_ifs;
  std::vector<std::string> vary;
  ReplayFlags replay;
  std::string budget;
  std::string format = "table";
  std::string html_path;
};

// The flags of gen program (without dashes): the FSDP options and the what-ifs.
std::vector<std::string> GenProgramFlags() {
  GenOptions scratch;
  std::vector<std::string> names;
  for (const PresetParam& param : GenOptionParams(scratch)) names.push_back(param.name);
  names.insert(names.end(), kWhatIfFlags.begin(), kWhatIfFlags.end());
  return names;
}

bool IsGenProgramFlag(const std::string& flag) {
  const std::vector<std::string> names = GenProgramFlags();
  return std::find(names.begin(), names.end(), flag) != names.end();
}

// The flags of the command line every configuration shares, as given ("--world-size 64").
std::vector<std::string> FixedFlags(const CLI::App& command) {
  std::vector<std::string> fixed;
  for (const std::string& name : GenProgramFlags()) {
    const CLI::Option* option = command.get_option_no_throw("--" + name);
    if (option == nullptr || option->count() == 0) continue;
    const std::vector<std::string>& results = option->results();
    const std::string value = results.empty() ? std::string() : results.back();
    fixed.push_back(value.empty() ? "--" + name : fmt::format("--{} {}", name, value));
  }
  return fixed;
}

// The axes of --vary: each flag one the program's commands take, not also given fixed, varied
// once, every value one it accepts.
Result<std::vector<TuneAxis>> Axes(const TuneFlags& flags, const CLI::App& command) {
  std::vector<TuneAxis> axes;
  for (const std::string& spec : flags.vary) {
    Result<TuneAxis> axis = ParseTuneAxis(spec);
    if (!axis.ok()) return axis.status();
    const CLI::Option* option = command.get_option_no_throw("--" + axis->flag);
    const bool policy = axis->flag == kPolicyFlag;
    if (option == nullptr || (!policy && !IsGenProgramFlag(axis->flag))) {
      return InvalidArgument(
          fmt::format("--vary {}: not a flag of gen program (the FSDP options, {}) nor policy",
                      axis->flag, fmt::join(kWhatIfFlags, ", ")));
    }
    if (option->count() > 0) {
      return InvalidArgument(
          fmt::format("--vary {}: --{} is also given; vary it or fix it", axis->flag, axis->flag));
    }
    if (axis->flag == "gpu" || axis->flag == "gpu-efficiency") {
      // One GPU's estimate prices every replay of the grid, and its capacity is the device.
      return InvalidArgument(fmt::format(
          "--vary {}: tune prices one GPU (its rates, collectives and capacity) per run; give "
          "--{} and run tune once for each",
          axis->flag, axis->flag));
    }
    for (const TuneAxis& other : axes) {
      if (other.flag == axis->flag) {
        return InvalidArgument(fmt::format("--vary {}: varied twice", axis->flag));
      }
    }
    for (const std::string& value : axis->values) {
      GenOptions options = flags.options;
      ProgramWhatIfs what_ifs;
      const Status set = policy ? ParsePolicySpec(value).status()
                                : SetVaried(options, what_ifs, axis->flag, value);
      if (!set.ok()) return InvalidArgument(fmt::format("--vary {}: {}", spec, set.message()));
    }
    axes.push_back(std::move(*axis));
  }
  return axes;
}

// --vary checkpoint-save=auto: the greedy policies (GreedySavePolicies) over the regions the
// fixed --checkpoint places, full checkpointing (none) first; said on stderr with the order.
Status ExpandAutoSave(TuneAxis& axis, const ModelProgram& program, const ProgramWhatIfs& what_ifs) {
  if (axis.flag != "checkpoint-save") return Status::Ok();
  const auto at = std::find(axis.values.begin(), axis.values.end(), "auto");
  if (at == axis.values.end()) return Status::Ok();
  if (what_ifs.checkpoint == "recorded" || what_ifs.checkpoint == "none" ||
      what_ifs.checkpoint_impl != "no-reentrant") {
    return InvalidArgument(
        "--vary checkpoint-save=auto searches the policies of the regions a fixed --checkpoint "
        "CLASS places, non-reentrant: give --checkpoint CLASS --checkpoint-impl no-reentrant");
  }
  Result<CheckpointChoice> choice = ParseCheckpointChoice(what_ifs.checkpoint);
  if (!choice.ok()) return InvalidArgument("--checkpoint " + choice.status().message());
  choice->reentrant = false;
  choice->every = what_ifs.checkpoint_every;
  Result<std::vector<SaveCandidate>> candidates = SaveCandidates(program, *choice);
  if (!candidates.ok()) {
    return InvalidArgument(fmt::format("--vary checkpoint-save=auto: --checkpoint {}: {}",
                                       what_ifs.checkpoint, candidates.status().message()));
  }
  constexpr std::size_t kMostPolicies = 16;
  std::vector<std::string> found = GreedySavePolicies(*candidates, kMostPolicies);
  found.insert(found.begin(), "none");
  std::vector<std::string> values(axis.values.begin(), at);
  for (const std::string& policy : found) {
    if (std::find(axis.values.begin(), axis.values.end(), policy) == axis.values.end()) {
      values.push_back(policy);
    }
  }
  values.insert(values.end(), std::next(at), axis.values.end());
  axis.values = std::move(values);
  std::vector<std::string> order;
  for (const SaveCandidate& c : *candidates) {
    if (c.bytes > 0 && c.flops > 0) {
      order.push_back(
          fmt::format("{} (x{}: {}, {:.3g} FLOP)", c.op, c.runs, FormatBytes(c.bytes), c.flops));
    }
  }
  fmt::print(
      stderr,
      "tune: checkpoint-save=auto: {} polic(ies): full checkpointing, then ops added in "
      "the order of recompute FLOPs avoided per byte cached (every other call first); "
      "the ops that hold memory and cost FLOPs: {}\n",
      found.size(),
      order.empty() ? std::string("none holds memory") : fmt::format("{}", fmt::join(order, ", ")));
  return Status::Ok();
}

// The chosen configuration's save policy, as Python for create_selective_checkpoint_contexts.
void PrintChosenSavePolicy(const TunePoint& chosen, const TuneFlags& flags) {
  std::string save = flags.what_ifs.checkpoint_save;
  for (const auto& [flag, value] : chosen.settings) {
    if (flag == "checkpoint-save") save = value;
  }
  if (save == "none") return;
  Result<SavePolicy> policy = ParseSavePolicy(save);
  if (!policy.ok()) return;
  std::cout << "\nIts selective checkpointing as a policy for torch.utils.checkpoint:\n\n"
            << SavePolicyPython(*policy);
}

int RunTune(const TuneFlags& flags, const CLI::App& command, CommandContext& context) {
  Result<std::vector<TuneAxis>> axes = Axes(flags, command);
  if (!axes.ok()) return ReportError(axes.status());
  std::optional<Bytes> budget;
  if (!flags.budget.empty()) {
    Result<Bytes> parsed = ParseBudgetFlag("--budget", flags.budget);
    if (!parsed.ok()) return ReportError(parsed.status());
    budget = *parsed;
  }
  if (flags.replay.policies.size() > 1) {
    return ReportError(InvalidArgument(
        "--policy: tune replays every configuration under one policy (sweep compares several)"));
  }
  Result<ModelProgram> program = ReadProgramFile(flags.model);
  if (!program.ok()) return ReportError(program.status());
  GenOptions options = flags.options;
  if (Status applied = ApplyProgramSettings(*program, command, options); !applied.ok()) {
    return ReportError(applied);
  }
  // --gpu: the GPU's estimate prices collectives and copies, and its capacity is the device,
  // unless --profile or --device-memory say otherwise.
  ReplayFlags replay_flags = flags.replay;
  if (!options.gpu.empty()) {
    if (replay_flags.profile_path.empty()) {
      replay_flags.profile_path = options.gpu;
      replay_flags.profile_efficiency = options.gpu_efficiency;
    }
    if (replay_flags.device_memory.empty() && NamedDeviceCapacity(options.gpu)) {
      replay_flags.device_memory = options.gpu;
    }
  }
  // The one policy --policy names; none: each configuration's implementation's own.
  Result<ReplayRequest> replay_request = MakeReplayRequest(replay_flags, DefaultPolicies());
  if (!replay_request.ok()) return ReportError(replay_request.status());
  if (flags.replay.policies.empty()) replay_request->policies.clear();

  for (TuneAxis& axis : *axes) {
    if (Status expanded = ExpandAutoSave(axis, *program, flags.what_ifs); !expanded.ok()) {
      return ReportError(expanded);
    }
  }

  TuneReport report;
  report.program = flags.model;
  report.fixed = FixedFlags(command);
  report.axes = std::move(*axes);
  report.budget_bytes = budget;
  report.time_estimate = EstimateText(options);
  TuneRun run{&*program, options, flags.what_ifs, std::move(*replay_request), flags.replay.jobs};
  Result<std::vector<TunePoint>> points = RunTuneGrid(run, TuneGrid(report.axes));
  if (!points.ok()) return ReportError(points.status());
  report.points = std::move(*points);
  MarkTunePareto(report.points);
  std::vector<std::string> policies;
  for (const TunePoint& point : report.points) {
    if (std::find(policies.begin(), policies.end(), point.figures.policy) == policies.end()) {
      policies.push_back(point.figures.policy);
    }
  }
  report.policy = fmt::format("{}", fmt::join(policies, ", "));
  report.advice = AdviseTune(report.points, budget);

  // No trace file: the alloc_conf is the flag's or PyTorch's default (a program carries none).
  ReplayFlags replay = replay_flags;
  replay.trace = "-";
  Result<ReportContext> report_context = ContextFor(context, replay);
  if (!report_context.ok()) return ReportError(report_context.status());
  report.time_profile = report_context->time_profile;
  const std::string json = TuneJson(report, *report_context);
  if (!flags.replay.json_path.empty()) {
    if (Status written = WriteFileAtomically(flags.replay.json_path, json); !written.ok()) {
      return ReportError(written);
    }
  }
  if (!flags.html_path.empty()) {
    Status written = WriteFileAtomically(flags.html_path, TuneHtml(report, *report_context));
    if (!written.ok()) return ReportError(written);
  }
  if (flags.format == "json") {
    std::cout << json;
  } else {
    std::cout << TuneText(report, ConsoleWidth(flags.replay.wide));
    if (report.advice.chosen) PrintChosenSavePolicy(report.points[*report.advice.chosen], flags);
  }
  const bool limited = budget || !replay_flags.device_memory.empty();
  return limited && !report.advice.chosen ? kExitBudgetBroken : kExitOk;
}

}  // namespace

void AddTuneCommand(CLI::App& command, CommandContext& context) {
  auto flags = std::make_shared<TuneFlags>();
  command.add_option("MODEL", flags->model, "The model program (JSON)")->required();
  for (const PresetParam& param : GenOptionParams(flags->options)) AddParamFlag(command, param);
  AddWhatIfFlags(command, flags->what_ifs);
  command
      .add_option("--vary", flags->vary,
                  "FLAG=V1,V2,...: a flag of gen program, or policy, and the values to try "
                  "(repeatable: every combination); checkpoint's class sets join classes with "
                  "'+' (Block+MLP)")
      ->allow_extra_args(false);
  // The cap is the trace's: gen's own --bucket-cap-mb (GenOptionParams) sets it.
  AddReplayFlags(command, flags->replay, /*with_cap=*/false);
  AddJobsFlag(command, flags->replay.jobs);
  AddWideFlag(command, flags->replay.wide);
  command.add_option("--budget", flags->budget,
                     "Peak reserved memory budget (SIZE), besides or instead of --device-memory: "
                     "what fits is within it");
  command.add_option("--format", flags->format, "Output on stdout: table or json")
      ->check(CLI::IsMember({"table", "json"}));
  command.add_option("--html", flags->html_path, "Also write the HTML page to FILE");
  command.footer(
      "Every combination of the --vary values is emitted as `gen program` would with the same "
      "flags and replayed under the implementation's own policy (--policy for another); "
      "with batch-size varied the advice is the largest batch size that fits, else the "
      "fastest configuration that fits.\n\nExample:\n"
      "  bucketsim tune gpt-7b-batch.json --world-size 64 --fsdp-impl fsdp2 --param-dtype bf16 "
      "\\\n      --activation-dtype param-dtype --vary batch-size=2,4,8,12,16 "
      "--vary checkpoint=none,Block \\\n      --vary optimizer-impl=foreach,for-loop "
      "--device-memory 80GiB");
  command.callback(
      [flags, &command, &context] { context.exit_code = RunTune(*flags, command, context); });
}

}  // namespace bucketsim
