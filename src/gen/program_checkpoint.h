// Activation checkpointing as a what-if on a model program (`gen program --checkpoint`): the
// program's own checkpointed regions taken out, and each call of the named module classes made a
// region of its own, as `torch.utils.checkpoint` (reentrant by default, or non-reentrant)
// around that module's forward makes it: the forward under no_grad keeping only the call's
// inputs, the module's forward recomputed at the start of its backward. The calls are the
// program's module calls (its "modules" key, written by tools/record_program.py).
#ifndef BUCKETSIM_GEN_PROGRAM_CHECKPOINT_H_
#define BUCKETSIM_GEN_PROGRAM_CHECKPOINT_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "gen/model_program.h"

namespace bucketsim {

// Selective activation checkpointing's policy (--checkpoint-save), as
// torch.utils.checkpoint.create_selective_checkpoint_contexts runs one in torch 2.6 eagerly: it
// is asked before each ATen op a region's forward dispatches (after decomposition: F.linear is
// view, mm, _unsafe_view) and says save or recompute; a saved call's output is cached and not
// recomputed (reference/cuda_from_cpu.md 1.2-1.4). Each rule saves the calls of its ops; with
// `recompute_every` N > 0 the ops share one counter per region forward and every N-th call
// (the N-th, 2N-th, ...) is recomputed instead, as torchtitan's "save every other mm" (its
// policy's mm count, made anew for each block's forward) with N = 2. Ops are named by their
// overload packet ("mm" for aten.mm.default): a program's runs are named MODULE:OP, without the
// overload (tools/record_program.py).
struct SavePolicy {
  struct Rule {
    std::vector<std::string> ops;
    std::uint64_t recompute_every = 0;
  };
  std::vector<Rule> rules;
  std::string text;  // as given
};

// "OP[,OP...]" (or ';' between them, as in tune's --vary values), each item an op or "OP[+OP...]/N"
// (one counter over those ops, every N-th call recomputed), ops as "mm", "aten.mm" or
// "aten.mm.default"; or a named policy: "torchtitan" (torchtitan 9dec370's _save_list with mm
// counted alone: mm/2, _scaled_dot_product_efficient_attention,
// _scaled_dot_product_flash_attention, reduce_scatter_tensor, abs, max), "torchtitan-2026" (its
// later default save set, mm and linear on one counter).
Result<SavePolicy> ParseSavePolicy(std::string_view text);

// The op a program run stands for: the part of its name after the last ':' (a recorded run,
// MODULE:OP), or the whole name.
std::string_view RunOpName(std::string_view run_name);

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
  // non-reentrant region (fsdp_emitter.cc: the recompute stops early).
  bool reentrant = true;
  // Layer-level selective checkpointing (--checkpoint-every N, torchtitan's selective_ac_option
  // "N"): of the calls that would get a region, in forward order, only the N-th, 2N-th, ... do
  // (torchtitan 9dec370: ptd_checkpoint_wrapper._count incremented, then `_count % N == 0`).
  std::uint64_t every = 1;
  // Op-level selective checkpointing in every region placed (non-reentrant only); unset: full.
  std::optional<SavePolicy> save = std::nullopt;
  // The regions' early stop (non-reentrant only): --checkpoint-early-stop.
  bool early_stop = true;
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
  Bytes kept_bytes = 0;   // what the regions' begins keep, each storage once, but the inputs
  std::size_t calls = 0;  // the calls that could have had a region (--checkpoint-every: more)
  // With a save policy: the runs it saved, by op, and the bytes of their outputs and new saves
  // (each storage once per call); and the policy's ops no run in a region is.
  std::map<std::string, std::size_t> saved_runs;
  Bytes saved_bytes = 0;
  std::vector<std::string> unmatched_ops;
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
Result<CheckpointSummary> CheckpointModules(ModelProgram& model, const CheckpointChoice& choice);

// What saving an op would buy in the regions `choice` places on `model` (a copy; the model is
// unchanged): per op the runs of it in the regions, the bytes their outputs and new saves hold
// (what the policy's cache would keep) and the forward FLOPs their recompute costs.
struct SaveCandidate {
  std::string op;
  std::size_t runs = 0;
  std::size_t most_in_a_region = 0;  // the most runs of it one region has
  Bytes bytes = 0;
  double flops = 0;
};
Result<std::vector<SaveCandidate>> SaveCandidates(const ModelProgram& model,
                                                  const CheckpointChoice& choice);

// The policies `tune --vary checkpoint-save=auto` tries, in order: the ops that hold memory, by
// recompute FLOPs avoided per byte cached, most first (sac_estimator's greedy order, by
// FLOPs for runtime), and each prefix of that order as a policy ("mm", "mm,silu", ...); an op
// run twice or more in a region comes in two steps, every other call first ("mm/2", as
// torchtitan saves it), then all ("mm"); the ops that cost no FLOPs are left out (saving them
// buys no time). `limit` caps the count.
std::vector<std::string> GreedySavePolicies(const std::vector<SaveCandidate>& candidates,
                                            std::size_t limit);

// `policy` as Python a user pastes beside checkpoint(..., use_reentrant=False,
// context_fn=context_fn): a policy function for create_selective_checkpoint_contexts that makes
// the same decisions, counters per region forward and per phase (torch 2.6 asks it in the
// recompute too).
std::string SavePolicyPython(const SavePolicy& policy);

}  // namespace bucketsim

#endif  // BUCKETSIM_GEN_PROGRAM_CHECKPOINT_H_
