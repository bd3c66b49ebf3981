#include "gen/program_what_ifs.h"

#include <fmt/format.h>

namespace bucketsim {

Result<WhatIfChanges> ApplyWhatIfs(FsdpModel& program, const GenOptions& options,
                                   const ProgramWhatIfs& what_ifs) {
  WhatIfChanges changes;
  if (what_ifs.wrap != "recorded") {
    Result<std::vector<std::string>> classes = ParseWrapClasses(what_ifs.wrap);
    if (!classes.ok()) return InvalidArgument("--wrap " + classes.status().message());
    Result<WrapSummary> wrapped = RewrapModules(program, *classes);
    if (!wrapped.ok()) {
      return InvalidArgument(
          fmt::format("--wrap {}: {}", what_ifs.wrap, wrapped.status().message()));
    }
    changes.wrap = *wrapped;
  }
  if (what_ifs.batch_size != 0) {
    Result<BatchSummary> scaled = ScaleBatch(program, what_ifs.batch_size);
    if (!scaled.ok()) {
      return InvalidArgument(
          fmt::format("--batch-size {}: {}", what_ifs.batch_size, scaled.status().message()));
    }
    changes.batch = *scaled;
  }
  if (what_ifs.checkpoint != "recorded") {
    Result<CheckpointChoice> choice = ParseCheckpointChoice(what_ifs.checkpoint);
    if (!choice.ok()) return InvalidArgument("--checkpoint " + choice.status().message());
    Result<CheckpointSummary> placed = CheckpointModules(program, *choice);
    if (!placed.ok()) {
      return InvalidArgument(
          fmt::format("--checkpoint {}: {}", what_ifs.checkpoint, placed.status().message()));
    }
    changes.checkpoint = *placed;
  }
  const bool mixed = options.compute_dtype != DType::kFloat32 && !program.autocast;
  if (what_ifs.activation_dtype == "recorded") {
    changes.fp32_activations_kept = mixed && CountFp32Activations(program) > 0;
  } else if (mixed || program.autocast) {  // at fp32 there is nothing to cast
    Result<CastSummary> cast = CastActivations(program, options.compute_dtype);
    if (!cast.ok()) {
      return InvalidArgument("--activation-dtype param-dtype: " + cast.status().message());
    }
    changes.cast = *cast;
  }
  return changes;
}

}  // namespace bucketsim
