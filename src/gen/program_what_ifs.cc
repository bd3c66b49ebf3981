#include "gen/program_what_ifs.h"

#include <fmt/format.h>

#include <algorithm>

namespace bucketsim {

Result<WhatIfChanges> ApplyWhatIfs(ModelProgram& program, const GenOptions& options,
                                   const ProgramWhatIfs& what_ifs) {
  WhatIfChanges changes;
  const bool mixed = options.compute_dtype != DType::kFloat32 && !program.autocast;
  if (what_ifs.activation_dtype == "param-dtype" && mixed && program.low_precision) {
    // The model recorded as the bf16 run computes it, first, so that every what-if after
    // applies to it: its own fp32 casts and its attention kernel are that run's.
    ModelProgram low = *program.low_precision;
    low.units = program.units;  // with the units' settings the program was given
    low.description = program.description + "; emitted from its bf16 recording (low_precision)";
    if (options.compute_dtype != DType::kBFloat16) {
      RelabelActivations(low, DType::kBFloat16, options.compute_dtype);
    }
    changes.low_precision = CountFloatActivations(low);
    program = std::move(low);
  }
  if (what_ifs.wrap != "recorded") {
    Result<std::vector<std::string>> classes = ParseWrapClasses(what_ifs.wrap);
    if (!classes.ok()) return InvalidArgument("--wrap " + classes.status().message());
    // The new units have PyTorch's settings from the options alone: a recorded unit's own
    // settings name units that no longer exist.
    changes.unit_settings_dropped =
        std::any_of(program.units.begin(), program.units.end(),
                    [](const FsdpUnit& instance) { return instance.settings != UnitSettings{}; });
    Result<WrapSummary> wrapped = RewrapModules(program, *classes);
    if (!wrapped.ok()) {
      return InvalidArgument(
          fmt::format("--wrap {}: {}", what_ifs.wrap, wrapped.status().message()));
    }
    changes.wrap = *wrapped;
  }
  for (const std::string& spec : what_ifs.unit_settings) {
    Result<UnitSettingsFor> unit = ParseUnitSetting(spec, program, options.fsdp_impl);
    if (!unit.ok()) return unit.status();
    changes.unit_settings.push_back(*unit);
  }
  OverlayUnitSettings(changes.unit_settings, program);
  if (what_ifs.batch_size != 0 || what_ifs.seq_len != 0) {
    Result<BatchSummary> scaled =
        ScaleBatch(program, BatchShape{what_ifs.batch_size, what_ifs.seq_len});
    if (!scaled.ok()) {
      std::string flags;
      if (what_ifs.batch_size != 0) flags = fmt::format("--batch-size {}", what_ifs.batch_size);
      if (what_ifs.seq_len != 0) {
        flags += fmt::format("{}--seq-len {}", flags.empty() ? "" : " ", what_ifs.seq_len);
      }
      return InvalidArgument(fmt::format("{}: {}", flags, scaled.status().message()));
    }
    if (scaled->size || scaled->seq_len) changes.batch = *scaled;
  }
  Result<bool> reentrant = ParseCheckpointReentrant(what_ifs.checkpoint_impl);
  if (!reentrant.ok()) return InvalidArgument("--checkpoint-impl " + reentrant.status().message());
  if (what_ifs.checkpoint == "recorded" && !*reentrant) {
    return InvalidArgument(
        "--checkpoint-impl no-reentrant: the regions it makes are those --checkpoint places "
        "(CLASS,... or all); a recorded program's regions are as recorded");
  }
  const bool selective = what_ifs.checkpoint_save != "none" || what_ifs.checkpoint_every != 1 ||
                         what_ifs.checkpoint_early_stop != "true";
  if (selective && (what_ifs.checkpoint == "recorded" || what_ifs.checkpoint == "none")) {
    return InvalidArgument(fmt::format(
        "--checkpoint-save, --checkpoint-every and --checkpoint-early-stop set the regions "
        "--checkpoint places (CLASS,... or all), and --checkpoint is {}",
        what_ifs.checkpoint));
  }
  if (what_ifs.checkpoint != "recorded") {
    Result<CheckpointChoice> choice = ParseCheckpointChoice(what_ifs.checkpoint);
    if (!choice.ok()) return InvalidArgument("--checkpoint " + choice.status().message());
    choice->reentrant = *reentrant;
    if (what_ifs.checkpoint_every == 0) {
      return InvalidArgument("--checkpoint-every 0: expected a positive number of calls");
    }
    choice->every = what_ifs.checkpoint_every;
    if (what_ifs.checkpoint_early_stop != "true" && what_ifs.checkpoint_early_stop != "false") {
      return InvalidArgument(fmt::format("--checkpoint-early-stop {}: expected true or false",
                                         what_ifs.checkpoint_early_stop));
    }
    choice->early_stop = what_ifs.checkpoint_early_stop == "true";
    if (what_ifs.checkpoint_save != "none") {
      Result<SavePolicy> policy = ParseSavePolicy(what_ifs.checkpoint_save);
      if (!policy.ok()) return InvalidArgument("--checkpoint-save " + policy.status().message());
      choice->save = std::move(*policy);
    }
    Result<CheckpointSummary> placed = CheckpointModules(program, *choice);
    if (!placed.ok()) {
      return InvalidArgument(
          fmt::format("--checkpoint {}: {}", what_ifs.checkpoint, placed.status().message()));
    }
    changes.checkpoint = *placed;
  }
  if (what_ifs.activation_dtype == "recorded") {
    if (const FloatActivations count = CountFloatActivations(program); mixed && count.fp32 > 0) {
      changes.fp32_activations_kept = count;
    }
  } else if (!changes.low_precision && (mixed || program.autocast)) {  // at fp32: nothing to cast
    Result<CastSummary> cast = CastActivations(program, options.compute_dtype);
    if (!cast.ok()) {
      return InvalidArgument("--activation-dtype param-dtype: " + cast.status().message());
    }
    changes.cast = *cast;
  }
  return changes;
}

}  // namespace bucketsim
