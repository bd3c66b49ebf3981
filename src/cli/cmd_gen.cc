// bucketsim gen PRESET [options] -o FILE: a trace from a model preset; gen --list: the presets,
// their parameters, defaults and meanings. Subcommands and flags are made from the presets'
// parameter tables (gen/preset.h), the same entries --list prints.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/command.h"
#include "gen/preset.h"
#include "io/trace_writer.h"

namespace bucketsim {
namespace {

int RunPreset(const Preset& preset, const std::string& output) {
  Status status;
  if (output == "-") {
    TraceWriter writer(std::cout, "stdout");
    status = preset.Generate(writer);
  } else {
    Result<std::unique_ptr<TraceWriter>> writer = TraceWriter::Open(output);
    if (!writer.ok()) return ReportError(writer.status());
    status = preset.Generate(**writer);
  }
  if (!status.ok()) return ReportError(status);
  if (output != "-") std::fprintf(stderr, "wrote %s\n", output.c_str());
  return kExitOk;
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
  command->add_option("-o,--output", *output, "Output file (- for stdout)")->capture_default_str();
  command->footer(
      fmt::format("Example:\n  {}\n'bucketsim gen --list' lists every preset.", preset->example()));
  command->callback(
      [preset, output, &context] { context.exit_code = RunPreset(*preset, *output); });
}

// One block per preset: its parameters as "--name VALUE  default X  meaning", aligned.
void PrintList() {
  for (const std::unique_ptr<Preset>& preset : MakePresets()) {
    fmt::print("{}: {}\n", preset->name(), preset->summary());
    const std::vector<PresetParam> params = preset->Params();
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
    fmt::print("  example: {}\n\n", preset->example());
  }
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
  command.footer(fmt::format(
      "Presets: {}. 'bucketsim gen --list' lists their parameters; 'bucketsim gen PRESET --help' "
      "shows one.",
      names));
  command.callback([list, names, &command, &context] {
    if (*list) {
      PrintList();
      return;
    }
    if (command.get_subcommands().empty()) {
      context.exit_code =
          ReportError(InvalidArgument(fmt::format("gen needs a preset ({}) or --list", names)));
    }
  });
}

}  // namespace bucketsim
