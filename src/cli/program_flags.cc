#include "cli/program_flags.h"

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "io/model_program_file.h"

namespace bucketsim {
namespace {

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

// "a, b" of unit names.
std::string Names(const std::vector<std::string>& names) {
  return fmt::format("{}", fmt::join(names, ", "));
}

// Each instance's own settings (SetUnitSettings), but those a flag on the command line gives
// every unit; each unit whose own differ from the first unit's is said on stderr.
Status ApplyUnitSettings(const ProgramFsdpFlags& recorded, const CLI::App& command,
                         ModelProgram& program) {
  const UnitSettingFlags given{command.count("--backward-prefetch") > 0,
                               command.count("--reshard-after-forward") > 0,
                               command.count("--modules-to-forward-prefetch") > 0,
                               command.count("--modules-to-backward-prefetch") > 0};
  BUCKETSIM_RETURN_IF_ERROR(SetUnitSettings(recorded, given, program));
  for (const FsdpUnit& instance : program.units) {
    UnitSettings differs = instance.settings;  // what differs from the first unit's, to say so
    if (differs.backward_prefetch == recorded.every_unit.backward_prefetch) {
      differs.backward_prefetch.reset();
    }
    if (differs.reshard_after_forward == recorded.every_unit.reshard_after_forward) {
      differs.reshard_after_forward.reset();
    }
    if (const std::string text = DescribeUnitSettings(differs); !text.empty()) {
      std::fprintf(stderr, "gen: unit %s: %s\n", instance.name.c_str(), text.c_str());
    }
  }
  return Status::Ok();
}

}  // namespace

// A parameter's parse error is a usage error: CLI11 prints it with the flag and exits 2.
void AddParamFlag(CLI::App& command, const PresetParam& param) {
  const std::string flag = "--" + param.name;
  // A default that depends on another flag is stated in the meaning, value by value.
  const std::string help = param.default_depends_on.empty()
                               ? fmt::format("{} (default {})", param.meaning, param.get())
                               : param.meaning;
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

std::string DescribeUnitSettings(const UnitSettings& s) {
  std::vector<std::string> parts;
  if (s.backward_prefetch) {
    parts.push_back(
        fmt::format("backward_prefetch={}", TorchBackwardPrefetch(*s.backward_prefetch)));
  }
  if (s.reshard_after_forward) {
    parts.push_back(
        "reshard_after_forward=" +
        TorchReshardAfterForward(s.reshard_after_forward->reshard, s.reshard_after_forward->ranks));
  }
  if (s.modules_to_forward_prefetch && !s.modules_to_forward_prefetch->empty()) {
    parts.push_back(fmt::format("set_modules_to_forward_prefetch([{}])",
                                Names(*s.modules_to_forward_prefetch)));
  }
  if (s.modules_to_backward_prefetch && !s.modules_to_backward_prefetch->empty()) {
    parts.push_back(fmt::format("set_modules_to_backward_prefetch([{}])",
                                Names(*s.modules_to_backward_prefetch)));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

void AddWhatIfFlags(CLI::App& command, ProgramWhatIfs& what_ifs) {
  command
      .add_option("--wrap", what_ifs.wrap,
                  "FSDP units: recorded (the program's instances), none (the root alone), or "
                  "CLASS[,CLASS...]: the root and every module of these classes, as "
                  "ModuleWrapPolicy or fully_shard on each would wrap them, from the module calls "
                  "tools/record_program.py records")
      ->type_name("recorded|none|CLASS,...")
      ->capture_default_str();
  command
      .add_option("--batch-size", what_ifs.batch_size,
                  "The batch size to emit the model at (0: as recorded), from a program "
                  "recorded at several (tools/record_program.py --batch-sizes)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command
      .add_option("--seq-len", what_ifs.seq_len,
                  "The sequence length to emit the model at (0: as recorded), from a program "
                  "recorded at several (tools/record_program.py --seq-lens)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command
      .add_option("--checkpoint", what_ifs.checkpoint,
                  "Activation checkpointing: recorded (the program's own regions), none, all "
                  "(every module FSDP wraps but the root), or CLASS[,CLASS...]: every call of "
                  "these module classes checkpointed as torch.utils.checkpoint does (reentrant), "
                  "from the module calls tools/record_program.py records")
      ->type_name("recorded|none|all|CLASS,...")
      ->capture_default_str();
  command
      .add_option("--checkpoint-impl", what_ifs.checkpoint_impl,
                  "The regions --checkpoint places: reentrant (torch.utils.checkpoint's "
                  "use_reentrant=True, CheckpointImpl.REENTRANT) or no-reentrant "
                  "(use_reentrant=False, apply_activation_checkpointing's default in torch "
                  "2.x: the recompute stops after the last op that saves a tensor)")
      ->check(CLI::IsMember({"reentrant", "no-reentrant"}))
      ->capture_default_str();
  command
      .add_option("--checkpoint-save", what_ifs.checkpoint_save,
                  "Selective activation checkpointing in the regions --checkpoint places "
                  "(needs --checkpoint-impl no-reentrant), as create_selective_checkpoint_"
                  "contexts runs a policy: none (full checkpointing), torchtitan (its op-level "
                  "default: mm/2 and the attention kernels, max, abs, reduce_scatter_tensor), "
                  "torchtitan-2026 (its later save set, mm and linear on one counter), or "
                  "OP,...: the calls of these ATen ops are saved, not recomputed; OP[+OP...]/N: "
                  "their calls share a counter per region and every N-th is recomputed "
                  "(mm/2: torchtitan's every other mm)")
      ->type_name("none|torchtitan|torchtitan-2026|OP[/N],...")
      ->capture_default_str();
  command
      .add_option("--checkpoint-every", what_ifs.checkpoint_every,
                  "Layer-level selective checkpointing: of the calls --checkpoint names, in "
                  "forward order, only every N-th gets a region (torchtitan's selective_ac_"
                  "option N: the N-th, 2N-th, ...)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      .add_option("--checkpoint-early-stop", what_ifs.checkpoint_early_stop,
                  "Non-reentrant regions' early stop: true (torch 2.6's default: the recompute "
                  "stops once every saved tensor is packed again) or false (it reruns the whole "
                  "region; torchtitan since 2025 passes early_stop=False)")
      ->check(CLI::IsMember({"true", "false"}))
      ->capture_default_str();
  command
      .add_option("--activation-dtype", what_ifs.activation_dtype,
                  "recorded: the activations' dtypes as in the program; param-dtype: its fp32 "
                  "activations (a model recorded in fp32, without autocast) in --param-dtype's "
                  "dtype, as a MixedPrecision run computes")
      ->check(CLI::IsMember({"recorded", "param-dtype"}))
      ->capture_default_str();
  command
      .add_option("--unit-setting", what_ifs.unit_settings,
                  "SELECTOR:KEY=VALUE (repeatable): one unit's own setting, over the all-units "
                  "flag's for that unit. SELECTOR: a unit's instance name (after --wrap: the "
                  "new units'), root, or last (the last unit the forward gathers, the root "
                  "aside). KEY: fsdp2 reshard_after_forward=true|false|N (as "
                  "--reshard-after-forward), modules_to_forward_prefetch=UNIT,... and "
                  "modules_to_backward_prefetch=UNIT,...; fsdp1 backward_prefetch=pre|post|none "
                  "(as --backward-prefetch). torchtitan's FSDP2 recipe: --unit-setting "
                  "last:reshard_after_forward=false")
      ->type_name("SELECTOR:KEY=VALUE")
      ->allow_extra_args(false);
}

// A recorded model that was already wrapped (the program's "fsdp" key) is emitted as it was
// wrapped: each of its settings sets the flag that says it, unless the command line gave that
// flag, or named another implementation with --fsdp-impl. Then the optimizer it was recorded
// with (the "optimizer" key), flag by flag the same way, unless --optimizer names another.
Status ApplyProgramSettings(ModelProgram& program, const CLI::App& command, GenOptions& options) {
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
      BUCKETSIM_RETURN_IF_ERROR(ApplyUnitSettings(*recorded, command, program));
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

}  // namespace bucketsim
