// bucketsim gen PRESET [options] -o FILE: a trace from a model preset (--emit-program FILE: its
// model program); gen program MODEL.json [FSDP options] -o FILE: a trace from a model program
// (traces/README.md, "Model programs"), through the same emitter; gen --list: the presets,
// their parameters, defaults and meanings. Subcommands and flags are made from the presets'
// parameter tables (gen/preset.h), the same entries --list prints.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/command.h"
#include "core/size_format.h"
#include "gen/fsdp_program.h"
#include "gen/preset.h"
#include "gen/program_batch.h"
#include "gen/program_checkpoint.h"
#include "gen/program_precision.h"
#include "io/program_file.h"
#include "io/trace_writer.h"

namespace bucketsim {
namespace {

// Emits `model` under `options` as a trace to `output` ("-": stdout).
int WriteTrace(const FsdpModel& model, const GenOptions& options, const std::string& output) {
  Status status;
  if (output == "-") {
    TraceWriter writer(std::cout, "stdout");
    status = EmitFsdpTrace(model, options, writer);
  } else {
    Result<std::unique_ptr<TraceWriter>> writer = TraceWriter::Open(output);
    if (!writer.ok()) return ReportError(writer.status());
    status = EmitFsdpTrace(model, options, **writer);
  }
  if (!status.ok()) return ReportError(status);
  if (output != "-") std::fprintf(stderr, "wrote %s\n", output.c_str());
  return kExitOk;
}

// With --emit-program the preset's program is written, and the trace only when -o is given.
int RunPreset(const Preset& preset, const std::string& output, bool output_given,
              const std::string& program_path) {
  Result<FsdpModel> program = preset.Program();
  if (!program.ok()) return ReportError(program.status());
  if (!program_path.empty()) {
    // The emitter's own checks first, so a program that could not be emitted is not written.
    Status valid = ValidateGenOptions(preset.options());
    if (valid.ok()) valid = ValidateProgram(*program);
    if (!valid.ok()) return ReportError(valid);
    Status written = WriteProgramFile(*program, program_path);
    if (!written.ok()) return ReportError(written);
    if (program_path != "-") std::fprintf(stderr, "wrote %s\n", program_path.c_str());
    if (!output_given) return kExitOk;
  }
  return WriteTrace(*program, preset.options(), output);
}

// Sets each of `flags` the command line did not give; returns " --flag value" for each set.
Result<std::string> ApplyRecordedFlags(
    const std::vector<std::pair<std::string, std::string>>& flags, const CLI::App& command,
    GenOptions& options, std::string_view what) {
  std::string applied;
  for (const auto& [flag, value] : flags) {
    if (command.count("--" + flag) > 0) continue;
    if (Status set = SetGenOption(options, flag, value); !set.ok()) {
      return InvalidArgument(
          fmt::format("the program's {}: --{} {}: {}", what, flag, value, set.message()));
    }
    applied += fmt::format(" --{} {}", flag, value);
  }
  return applied;
}

// A recorded model that was already wrapped (the program's "fsdp" key) is emitted as it was
// wrapped: each of its settings sets the flag that says it, unless the command line gave that
// flag, or named another implementation with --fsdp-impl. Then the optimizer it was recorded
// with (the "optimizer" key), flag by flag the same way, unless --optimizer names another.
Status ApplyProgramSettings(const FsdpModel& program, const CLI::App& command,
                            GenOptions& options) {
  if (program.fsdp) {
    Result<ProgramFsdpFlags> recorded = FsdpFlagsOf(*program.fsdp);
    if (!recorded.ok()) return recorded.status();
    const std::string& impl = recorded->flags.front().second;
    if (command.count("--fsdp-impl") == 0 || FsdpImplName(options.fsdp_impl) == impl) {
      Result<std::string> applied =
          ApplyRecordedFlags(recorded->flags, command, options, "fsdp settings");
      if (!applied.ok()) return applied.status();
      std::fprintf(stderr, "gen: the model was wrapped with %s:%s\n", impl.c_str(),
                   applied->c_str());
      for (const std::string& note : recorded->notes) {
        std::fprintf(stderr, "gen: note: %s\n", note.c_str());
      }
    }
  }
  if (program.optimizer) {
    const std::vector<std::pair<std::string, std::string>> flags =
        OptimizerFlagsOf(*program.optimizer);
    // Another optimizer on the command line: the recorded implementation and weight decay were
    // that optimizer's, not this one's.
    if (!flags.empty() && command.count("--optimizer") > 0 &&
        OptimizerName(options.optimizer) != flags.front().second) {
      std::fprintf(stderr, "gen: note: the program's optimizer (%s) is not used: --optimizer %s\n",
                   flags.front().second.c_str(),
                   std::string(OptimizerName(options.optimizer)).c_str());
      return Status::Ok();
    }
    Result<std::string> applied = ApplyRecordedFlags(flags, command, options, "optimizer");
    if (!applied.ok()) return applied.status();
    if (!applied->empty()) {
      std::fprintf(stderr, "gen: the model's optimizer was recorded as:%s\n", applied->c_str());
    }
  }
  return Status::Ok();
}

// --batch-size: 0 emits the program at the size it was recorded at; N scales it (ScaleBatch).
Status ApplyBatchSize(FsdpModel& program, std::uint64_t size) {
  if (size == 0) return Status::Ok();
  Result<BatchSummary> scaled = ScaleBatch(program, size);
  if (!scaled.ok()) {
    return InvalidArgument(fmt::format("--batch-size {}: {}", size, scaled.status().message()));
  }
  std::fprintf(stderr, "gen: batch size %llu -> %llu: the program's tensors %s -> %s\n",
               static_cast<unsigned long long>(scaled->from),
               static_cast<unsigned long long>(scaled->to),
               FormatBytes(scaled->bytes_before).c_str(), FormatBytes(scaled->bytes_after).c_str());
  return Status::Ok();
}

// --checkpoint: `recorded` emits the program's own checkpointing; none, all or CLASS,... put
// regions where it says (CheckpointModules) and say what changed.
Status ApplyCheckpoint(FsdpModel& program, const std::string& checkpoint) {
  if (checkpoint == "recorded") return Status::Ok();
  Result<CheckpointChoice> choice = ParseCheckpointChoice(checkpoint);
  if (!choice.ok()) return InvalidArgument("--checkpoint " + choice.status().message());
  Result<CheckpointSummary> placed = CheckpointModules(program, *choice);
  if (!placed.ok())
    return InvalidArgument(
        fmt::format("--checkpoint {}: {}", checkpoint, placed.status().message()));
  const std::string removed =
      placed->removed == 0
          ? std::string()
          : fmt::format("; the program's own {} region(s) taken out", placed->removed);
  if (choice->kind == CheckpointChoice::Kind::kNone) {
    std::fprintf(stderr, "gen: checkpointing: none%s\n", removed.c_str());
  } else {
    std::fprintf(stderr, "gen: checkpointing: %zu call(s) of %s, keeping %s%s\n", placed->regions,
                 fmt::format("{}", fmt::join(placed->classes, ", ")).c_str(),
                 FormatBytes(placed->kept_bytes).c_str(), removed.c_str());
  }
  return Status::Ok();
}

// --activation-dtype: `recorded` emits the activations in the dtypes the program has (a note
// says when a mixed-precision run would compute in another), `param-dtype` casts fp32 ones to
// the compute dtype (CastActivations).
Status ApplyActivationDType(FsdpModel& program, const GenOptions& options,
                            const std::string& activation_dtype, const std::string& model_path) {
  const bool mixed = options.compute_dtype != DType::kFloat32 && !program.autocast;
  if (activation_dtype == "recorded") {
    if (mixed && CountFp32Activations(program) > 0) {
      std::fprintf(stderr,
                   "gen: note: %s's activations are fp32, as recorded, but a run with "
                   "--param-dtype %s computes in %s: --activation-dtype param-dtype puts them "
                   "in it\n",
                   model_path.c_str(), std::string(DTypeName(options.compute_dtype)).c_str(),
                   std::string(DTypeName(options.compute_dtype)).c_str());
    }
    return Status::Ok();
  }
  if (!mixed && !program.autocast) return Status::Ok();  // --param-dtype fp32: nothing to cast
  Result<CastSummary> cast = CastActivations(program, options.compute_dtype);
  if (!cast.ok())
    return InvalidArgument("--activation-dtype param-dtype: " + cast.status().message());
  std::fprintf(stderr, "gen: activations cast to %s: %zu fp32 tensor(s), %s -> %s\n",
               std::string(DTypeName(options.compute_dtype)).c_str(), cast->tensors,
               FormatBytes(cast->bytes_before).c_str(), FormatBytes(cast->bytes_after).c_str());
  return Status::Ok();
}

int RunProgram(const std::string& model_path, const CLI::App& command, GenOptions& options,
               std::uint64_t batch_size, const std::string& checkpoint,
               const std::string& activation_dtype, const std::string& output) {
  Result<FsdpModel> program = ReadProgramFile(model_path);
  if (!program.ok()) return ReportError(program.status());
  if (Status applied = ApplyProgramSettings(*program, command, options); !applied.ok()) {
    return ReportError(applied);
  }
  if (Status scaled = ApplyBatchSize(*program, batch_size); !scaled.ok()) {
    return ReportError(scaled);
  }
  if (Status placed = ApplyCheckpoint(*program, checkpoint); !placed.ok()) {
    return ReportError(placed);
  }
  if (Status cast = ApplyActivationDType(*program, options, activation_dtype, model_path);
      !cast.ok()) {
    return ReportError(cast);
  }
  return WriteTrace(*program, options, output);
}

// A parameter's parse error is a usage error: CLI11 prints it with the flag and exits 2.
void AddParamFlag(CLI::App& command, const PresetParam& param) {
  const std::string flag = "--" + param.name;
  const std::string help = fmt::format("{} (default {})", param.meaning, param.get());
  auto set = param.set;
  if (param.kind == ParamKind::kBool) {
    // --flag alone is "true"; --flag=false (or 0, no, off) sets false. CLI11 names the flag
    // in front of a validation error thrown from each().
    auto text = std::make_shared<std::string>();
    command.add_flag(flag, *text, help)->each([set, text](const std::string& value) {
      Status status = set(value);
      if (!status.ok()) throw CLI::ValidationError(status.message());
    });
  } else {
    command
        .add_option_function<std::string>(
            flag,
            [set, flag](const std::string& value) {
              Status status = set(value);
              if (!status.ok()) throw CLI::ValidationError(flag, status.message());
            },
            help)
        ->type_name(param.ValueHint());
  }
}

void AddPreset(CLI::App& gen, CommandContext& context, std::shared_ptr<Preset> preset) {
  CLI::App* command =
      gen.add_subcommand(std::string(preset->name()), std::string(preset->summary()));
  for (const PresetParam& param : preset->Params()) AddParamFlag(*command, param);
  auto output = std::make_shared<std::string>("-");
  CLI::Option* output_option =
      command->add_option("-o,--output", *output, "Output file (- for stdout)")
          ->capture_default_str();
  auto program = std::make_shared<std::string>();
  command->add_option("--emit-program", *program,
                      "Write the model program (traces/README.md, 'Model programs') to this file; "
                      "the trace is then written only if -o is given too");
  command->footer(
      fmt::format("Example:\n  {}\n'bucketsim gen --list' lists every preset.", preset->example()));
  command->callback([preset, output, output_option, program, &context] {
    context.exit_code = RunPreset(*preset, *output, output_option->count() > 0, *program);
  });
}

// gen program MODEL.json: the common FSDP options of every preset, no model options.
void AddProgramCommand(CLI::App& gen, CommandContext& context) {
  CLI::App* command = gen.add_subcommand(
      "program",
      "A trace from a model program (a preset's --emit-program, tools/record_program.py)");
  auto options = std::make_shared<GenOptions>();
  auto model = std::make_shared<std::string>();
  command->add_option("MODEL", *model, "The model program (JSON)")->required();
  for (const PresetParam& param : GenOptionParams(*options)) AddParamFlag(*command, param);
  auto batch_size = std::make_shared<std::uint64_t>(0);
  command
      ->add_option("--batch-size", *batch_size,
                   "The batch size to emit the model at (0: as recorded), from a program "
                   "recorded at several (tools/record_program.py --batch-sizes)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  auto checkpoint = std::make_shared<std::string>("recorded");
  command
      ->add_option("--checkpoint", *checkpoint,
                   "Activation checkpointing: recorded (the program's own regions), none, all "
                   "(every module FSDP wraps but the root), or CLASS[,CLASS...]: every call of "
                   "these module classes checkpointed as torch.utils.checkpoint does (reentrant), "
                   "from the module calls tools/record_program.py records")
      ->type_name("recorded|none|all|CLASS,...")
      ->capture_default_str();
  auto activation_dtype = std::make_shared<std::string>("recorded");
  command
      ->add_option("--activation-dtype", *activation_dtype,
                   "recorded: the activations' dtypes as in the program; param-dtype: its fp32 "
                   "activations (a model recorded in fp32, without autocast) in --param-dtype's "
                   "dtype, as a MixedPrecision run computes")
      ->check(CLI::IsMember({"recorded", "param-dtype"}))
      ->capture_default_str();
  auto output = std::make_shared<std::string>("-");
  command->add_option("-o,--output", *output, "Output file (- for stdout)")->capture_default_str();
  command->footer(
      "Example:\n  bucketsim gen transformer --layers 4 --emit-program gpt4.json\n"
      "  bucketsim gen program gpt4.json --world-size 64 --groups shared -o gpt4-ws64.json\n"
      "The program fixes the model (its activations' sizes and dtypes, autocast; "
      "--activation-dtype param-dtype puts fp32 ones in the param dtype); the options fix FSDP. A "
      "recorded model that was already wrapped with FSDP1 or fully_shard is emitted "
      "with its own settings (the program's \"fsdp\" key) unless a flag says otherwise.");
  command->callback(
      [command, options, model, batch_size, checkpoint, activation_dtype, output, &context] {
        context.exit_code = RunProgram(*model, *command, *options, *batch_size, *checkpoint,
                                       *activation_dtype, *output);
      });
}

// One block: "name: summary", its parameters as "--name VALUE  default X  meaning", aligned.
void PrintBlock(std::string_view name, std::string_view summary,
                const std::vector<PresetParam>& params, std::string_view example) {
  fmt::print("{}: {}\n", name, summary);
  std::vector<std::string> usages;
  std::size_t usage_width = 0;
  std::size_t default_width = 0;
  for (const PresetParam& param : params) {
    usages.push_back(param.kind == ParamKind::kBool
                         ? "--" + param.name
                         : fmt::format("--{} {}", param.name, param.ValueHint()));
    usage_width = std::max(usage_width, usages.back().size());
    default_width = std::max(default_width, param.get().size());
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    fmt::print("  {:<{}}  default {:<{}}  {}\n", usages[i], usage_width, params[i].get(),
               default_width, params[i].meaning);
  }
  fmt::print("  example: {}\n\n", example);
}

// Every preset, then `program` with the options it shares with them.
void PrintList() {
  for (const std::unique_ptr<Preset>& preset : MakePresets()) {
    PrintBlock(preset->name(), preset->summary(), preset->Params(), preset->example());
  }
  GenOptions options;
  PrintBlock("program MODEL.json",
             "A model program (a preset's --emit-program FILE, tools/record_program.py); the "
             "program fixes the model, these options FSDP. Presets also take --emit-program "
             "FILE: write the program (the trace too only with -o)",
             GenOptionParams(options),
             "bucketsim gen program model.json --world-size 64 --groups shared -o trace.json");
}

}  // namespace

void AddGenCommand(CLI::App& command, CommandContext& context) {
  command.require_subcommand(0, 1);
  auto list = std::make_shared<bool>(false);
  command.add_flag("--list", *list, "List every preset with its parameters, defaults and meaning");
  std::string names;
  for (std::unique_ptr<Preset>& preset : MakePresets()) {
    names += names.empty() ? "" : ", ";
    names += preset->name();
    AddPreset(command, context, std::shared_ptr<Preset>(std::move(preset)));
  }
  AddProgramCommand(command, context);
  command.footer(fmt::format(
      "Presets: {}. 'bucketsim gen --list' lists their parameters; 'bucketsim gen PRESET --help' "
      "shows one. 'bucketsim gen program MODEL.json' emits a model program.",
      names));
  command.callback([list, names, &command, &context] {
    if (*list) {
      PrintList();
      return;
    }
    if (command.get_subcommands().empty()) {
      context.exit_code = ReportError(
          InvalidArgument(fmt::format("gen needs a preset ({}), program or --list", names)));
    }
  });
}

}  // namespace bucketsim
