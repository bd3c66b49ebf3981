// Activation checkpointing as a what-if on a model program (`gen program --checkpoint`): the
// program's own checkpointed regions taken out, and each call of the named module classes made a
// region of its own, as `torch.utils.checkpoint` (reentrant by default, or non-reentrant)
// around that module's forward makes it: the forward under no_grad keeping only the call's
// inputs, the module's forward recomputed at the start of its backward. The calls are the
// program's module calls (its "modules" key, written by tools/record_program.py).
#ifndef BUCKETSIM_GEN_PROGRAM_CHECKPOINT_H_
#define BUCKETSIM_GEN_PROGRAM_CHECKPOINT_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "gen/fsdp_program.h"

namespace bucketsim {

// What --checkpoint asks for: no checkpointing, every FSDP unit's module (the classes of the
// program's instances other than the root: apply_activation_checkpointing with the check_fn
// of the auto-wrap policy), or the modules of these classes.
struct CheckpointChoice {
  enum class Kind { kNone, kAll, kClasses };
  Kind kind = Kind::kNone;
  std::vector<std::string> classes;  // kClasses
  // The regions' checkpoint implementation (--checkpoint-impl): torch.utils.checkpoint's
  // use_reentrant=True (CheckpointImpl.REENTRANT), or False (NO_REENTRANT, the default of
  // apply_activation_checkpointing's checkpoint_wrapper in torch 2.x), run as the emitter runs a
  // non-reentrant region (fsdp_program.cc: the recompute stops early).
  bool reentrant = true;
};

// "none", "all" or "CLASS[,CLASS...]" (class names as type(module).__name__ gives them).
Result<CheckpointChoice> ParseCheckpointChoice(std::string_view text);

// --checkpoint-impl: "reentrant" or "no-reentrant"; the error lists them.
Result<bool> ParseCheckpointReentrant(std::string_view text);

// What CheckpointModules changed.
struct CheckpointSummary {
  std::size_t removed = 0;           // the program's own regions taken out
  std::size_t regions = 0;           // regions placed, one per call
  std::vector<std::string> classes;  // the classes whose calls they are (a class whose calls
                                     // all lie inside other chosen calls is not among them)
  Bytes kept_bytes = 0;  // what the regions' begins keep, each storage once, but the inputs
};

// Takes the program's checkpointed regions out and, unless `choice` is none, places a region on
// each call of the chosen classes; a call inside another chosen call is left to the outer one
// (regions do not nest), a call that runs nothing gets none. A region sits inside its module's
// FSDP hooks (the instance's gather and end_forward stay outside, as apply_activation_
// checkpointing under FSDP puts the checkpoint wrapper inside the FSDP unit), and keeps what
// its runs read of tensors made before it (the call's arguments, program inputs included, as
// the recorder writes them; a tensor the module reads from elsewhere, kept alive by whoever
// references it, is kept as well). A `releases` entry that would cross a region's edge is
// dropped (the format allows a release only in the region its tensor was made in, where a
// recompute repeats it): a tensor made before a region and released inside it is one the
// region keeps when it reads it; a tensor made inside and released after the region (a variable
// holding the module's output past its last reader) is freed after its last reader instead.
// Each region is reentrant or not as `choice` says. What is not modelled: torch.utils.
// checkpoint's RNG state (preserve_rng_state=True keeps torch.get_rng_state(), and on CUDA the
// CUDA generator's: host memory, 5,056 B on the CPU).
// The module calls are dropped from the program (they name ops of the program as read); its
// description says "checkpointed: CLASS, ..." or "not checkpointed" where anything changed.
// Fails, changing nothing, when the program has no module calls, or a class is not among its
// calls' (the message lists them), or with `all`, when no instance but the root is a call.
Result<CheckpointSummary> CheckpointModules(FsdpModel& model, const CheckpointChoice& choice);

}  // namespace bucketsim

#endif  // BUCKETSIM_GEN_PROGRAM_CHECKPOINT_H_
