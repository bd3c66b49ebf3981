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
#include "cli/program_flags.h"
#include "core/size_format.h"
#include "gen/fsdp_emitter.h"
#include "gen/model_program.h"
#include "gen/preset.h"
#include "gen/program_what_ifs.h"
#include "gen/unit_settings.h"
#include "io/model_program_file.h"
#include "io/trace_writer.h"

namespace bucketsim {
namespace {

// Emits `model` under `options` as a trace to `output` ("-": stdout).
int WriteTrace(const ModelProgram& model, const GenOptions& options, const std::string& output) {
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
  Result<ModelProgram> program = preset.Program();
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

// What the what-ifs changed, one note each on stderr, as `gen program` says it.
void PrintWhatIfChanges(const WhatIfChanges& changes, const ProgramWhatIfs& what_ifs,
                        const GenOptions& options, const std::string& model_path) {
  if (changes.wrap) {
    std::fprintf(stderr,
                 "gen: wrapped: %zu instance(s) (the root and the modules of %s), not "
                 "the program's %zu\n",
                 changes.wrap->instances_after,
                 what_ifs.wrap == "none" ? "no class" : what_ifs.wrap.c_str(),
                 changes.wrap->instances_before);
  }
  if (changes.batch) {
    std::fprintf(stderr, "gen: %s: the program's tensors %s -> %s\n",
                 ShapeText(*changes.batch, ShapeSide::kChange).c_str(),
                 FormatBytes(changes.batch->bytes_before).c_str(),
                 FormatBytes(changes.batch->bytes_after).c_str());
  }
  if (changes.checkpoint) {
    const CheckpointSummary& placed = *changes.checkpoint;
    const std::string removed =
        placed.removed == 0
            ? std::string()
            : fmt::format("; the program's own {} region(s) taken out", placed.removed);
    if (what_ifs.checkpoint == "none") {
      std::fprintf(stderr, "gen: checkpointing: none%s\n", removed.c_str());
    } else {
      std::fprintf(stderr, "gen: checkpointing: %zu call(s) of %s, keeping %s%s\n", placed.regions,
                   fmt::format("{}", fmt::join(placed.classes, ", ")).c_str(),
                   FormatBytes(placed.kept_bytes).c_str(), removed.c_str());
    }
    if (!placed.saved_runs.empty()) {
      std::vector<std::string> runs;
      for (const auto& [op, count] : placed.saved_runs)
        runs.push_back(fmt::format("{} x{}", op, count));
      fmt::print(stderr, "gen: selective checkpointing ({}): saved {} ({}), not recomputed\n",
                 what_ifs.checkpoint_save, fmt::join(runs, ", "), FormatBytes(placed.saved_bytes));
    }
    if (!placed.unmatched_ops.empty()) {
      fmt::print(stderr, "gen: note: --checkpoint-save {}: no checkpointed run is {}\n",
                 what_ifs.checkpoint_save, fmt::join(placed.unmatched_ops, ", "));
    }
  }
  if (changes.unit_settings_dropped) {
    std::fprintf(stderr,
                 "gen: note: --wrap %s: the recorded units' own settings are not the new units'; "
                 "every unit has the flags' settings\n",
                 what_ifs.wrap.c_str());
  }
  for (const auto& [unit, settings] : changes.unit_settings) {
    std::fprintf(stderr, "gen: unit %s: %s (--unit-setting)\n", unit.c_str(),
                 DescribeUnitSettings(settings).c_str());
  }
  const std::string dtype(DTypeName(options.compute_dtype));
  if (const auto& kept = changes.fp32_activations_kept; kept && kept->low_precision > 0) {
    // Recorded in a low precision: its fp32 tensors are the model's own upcasts, kept so.
    std::fprintf(stderr,
                 "gen: note: %s's %zu fp32 activation(s) (%s) are kept as recorded: the model "
                 "computes them in fp32 itself (%zu floating activation(s) were recorded in "
                 "bf16 or fp16)\n",
                 model_path.c_str(), kept->fp32, FormatBytes(kept->fp32_bytes).c_str(),
                 kept->low_precision);
  } else if (kept) {
    std::fprintf(stderr,
                 "gen: note: %s's activations are fp32, as recorded, but a run with "
                 "--param-dtype %s computes in %s: --activation-dtype param-dtype puts them "
                 "in it\n",
                 model_path.c_str(), dtype.c_str(), dtype.c_str());
  }
  if (const auto& low = changes.low_precision) {
    std::fprintf(stderr,
                 "gen: activations in %s: %s's own bf16 recording (its low_precision key) is "
                 "emitted, not a cast of the fp32 one: %zu activation(s) in %s, %zu (%s) kept in "
                 "fp32 where the model computes in fp32 itself\n",
                 dtype.c_str(), model_path.c_str(), low->low_precision, dtype.c_str(), low->fp32,
                 FormatBytes(low->fp32_bytes).c_str());
  }
  if (changes.cast) {
    std::fprintf(stderr, "gen: activations cast to %s: %zu fp32 tensor(s), %s -> %s\n",
                 dtype.c_str(), changes.cast->tensors,
                 FormatBytes(changes.cast->bytes_before).c_str(),
                 FormatBytes(changes.cast->bytes_after).c_str());
  }
}

// The device the program was recorded for, and what the recorder did not model for it.
// `cast_to`: the dtype --activation-dtype param-dtype put the fp32 activations in, if it did.
void PrintTarget(const RecordedTarget& target, const std::string& model_path,
                 std::optional<DType> cast_to) {
  std::vector<std::string> kernels;
  for (const auto& [kernel, runs] : target.attention) {
    kernels.push_back(fmt::format("{} x{}", kernel, runs));
  }
  std::fprintf(
      stderr, "gen: note: %s was recorded for %s%s%s\n", model_path.c_str(), target.device.c_str(),
      target.gpu.empty() ? "" : (" " + target.gpu).c_str(),
      kernels.empty() ? "" : fmt::format(" (attention: {})", fmt::join(kernels, ", ")).c_str());
  for (const std::string& what : target.unmodelled) {
    std::fprintf(stderr, "gen: note: not modelled for the target: %s\n", what.c_str());
  }
  if (cast_to && target.fp32_upcasts > 0) {
    const std::string_view dtype = DTypeName(*cast_to);
    fmt::print(stderr,
               "gen: warning: the model casts to fp32 itself ({}: {} call(s) of .float() or "
               ".to(torch.float32) on tensors the fp32 recording had in fp32 already): a {} run "
               "copies there and computes what follows in fp32, which --activation-dtype "
               "param-dtype has put in {} too; record the model again (tools/record_program.py "
               "--mixed-precision auto, the default, also records it in bf16) or with --dtype "
               "{} for that run's activations (docs/laptop-to-h100.md)\n",
               fmt::join(target.fp32_upcast_modules, ", "), target.fp32_upcasts, dtype, dtype,
               dtype);
  }
}

int RunProgram(const std::string& model_path, const CLI::App& command, GenOptions& options,
               const ProgramWhatIfs& what_ifs, const std::string& output) {
  Result<ModelProgram> program = ReadProgramFile(model_path);
  if (!program.ok()) return ReportError(program.status());
  if (Status applied = ApplyProgramSettings(*program, command, options); !applied.ok()) {
    return ReportError(applied);
  }
  Result<WhatIfChanges> changes = ApplyWhatIfs(*program, options, what_ifs);
  if (!changes.ok()) return ReportError(changes.status());
  PrintWhatIfChanges(*changes, what_ifs, options, model_path);
  for (const std::string& note : UnappliedInstanceKeys(*program, options)) {
    std::fprintf(stderr, "gen: note: %s\n", note.c_str());
  }
  if (program->target) {
    PrintTarget(*program->target, model_path,
                changes->cast ? std::optional<DType>(options.compute_dtype) : std::nullopt);
  }
  return WriteTrace(*program, options, output);
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
  auto what_ifs = std::make_shared<ProgramWhatIfs>();
  AddWhatIfFlags(*command, *what_ifs);
  auto output = std::make_shared<std::string>("-");
  command->add_option("-o,--output", *output, "Output file (- for stdout)")->capture_default_str();
  command->footer(
      "Example:\n  bucketsim gen transformer --layers 4 --emit-program gpt4.json\n"
      "  bucketsim gen program gpt4.json --world-size 64 --groups shared -o gpt4-ws64.json\n"
      "The program fixes the model (its activations' sizes and dtypes, autocast; "
      "--activation-dtype param-dtype puts fp32 ones in the param dtype); the options fix FSDP. A "
      "recorded model that was already wrapped with FSDP1 or fully_shard is emitted "
      "with its own settings (the program's \"fsdp\" key) unless a flag says otherwise.");
  command->callback([command, options, model, what_ifs, output, &context] {
    context.exit_code = RunProgram(*model, *command, *options, *what_ifs, *output);
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
    default_width = std::max(default_width, param.StatedDefault().size());
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    fmt::print("  {:<{}}  default {:<{}}  {}\n", usages[i], usage_width, params[i].StatedDefault(),
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
