// The what-ifs `gen program` and `tune` apply to a model program before emitting it, in one
// order: the wrapping (gen/program_wrap.h), the units' own settings given on the command line
// (gen/unit_settings.h, named as the wrapping left the units), the batch's shape
// (gen/program_batch.h), the checkpointing (gen/program_checkpoint.h), the activations' dtype
// (gen/program_precision.h, after the options fix the compute dtype). One place, so that a
// configuration `tune` reports is the trace `gen program` writes with the same flags.
#ifndef BUCKETSIM_GEN_PROGRAM_WHAT_IFS_H_
#define BUCKETSIM_GEN_PROGRAM_WHAT_IFS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "gen/gen_options.h"
#include "gen/model_program.h"
#include "gen/program_batch.h"
#include "gen/program_checkpoint.h"
#include "gen/program_precision.h"
#include "gen/program_wrap.h"
#include "gen/unit_settings.h"

namespace bucketsim {

// The flags, as given.
struct ProgramWhatIfs {
  std::string wrap = "recorded";               // --wrap: recorded, none, CLASS,...
  std::uint64_t batch_size = 0;                // --batch-size; 0: as recorded
  std::uint64_t seq_len = 0;                   // --seq-len; 0: as recorded
  std::string checkpoint = "recorded";         // --checkpoint: recorded, none, all, CLASS,...
  std::string checkpoint_impl = "reentrant";   // --checkpoint-impl: reentrant, no-reentrant
  std::string checkpoint_save = "none";        // --checkpoint-save: none, or a SavePolicy
  std::uint64_t checkpoint_every = 1;          // --checkpoint-every N (layer SAC)
  std::string checkpoint_early_stop = "true";  // --checkpoint-early-stop: true, false
  std::string activation_dtype = "recorded";   // --activation-dtype: recorded, param-dtype
  std::vector<std::string> unit_settings;      // --unit-setting SELECTOR:KEY=VALUE, in order
};

// What they changed (unset: that what-if was not asked for, or changed nothing).
struct WhatIfChanges {
  std::optional<WrapSummary> wrap;
  std::optional<BatchSummary> batch;
  std::optional<CheckpointSummary> checkpoint;
  std::optional<CastSummary> cast;
  // --activation-dtype param-dtype on a program with a low-precision recording: that recording
  // was emitted (no cast); its floating activations.
  std::optional<FloatActivations> low_precision;
  // `recorded` activations that are fp32 where the run computes in a lower precision: how
  // many, and how many are in a low precision already (then the fp32 ones are the model's own).
  std::optional<FloatActivations> fp32_activations_kept;
  // --wrap replaced units that had settings of their own (FsdpUnit::settings).
  bool unit_settings_dropped = false;
  // --unit-setting: what each gave, by unit name, in order.
  std::vector<UnitSettingsFor> unit_settings;
};

// Applies the what-ifs to `program` for a run with `options`. An error says which flag (and
// value) could not be applied ("--batch-size 1: ...", "--checkpoint Blok: ...").
Result<WhatIfChanges> ApplyWhatIfs(ModelProgram& program, const GenOptions& options,
                                   const ProgramWhatIfs& what_ifs);

}  // namespace bucketsim

#endif  // BUCKETSIM_GEN_PROGRAM_WHAT_IFS_H_
