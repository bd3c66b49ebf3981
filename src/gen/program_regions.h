// The checkpointed regions of a model program as the emitter runs them: which region each op is
// in, and where each region's recompute starts and stops. A reentrant region (torch.utils.
// checkpoint's CheckpointFunction.backward) reruns its whole forward at the start of its
// backward. A non-reentrant one (torch 2.x's _checkpoint_without_reentrant_generator) reruns it
// when the backward first unpacks one of its saved tensors, the backward of its last run that
// saves any, and stops (_StopRecomputationError, early_stop=True) once every saved tensor has
// been packed again: at that run, whose kernel runs only if it saves its own outputs or new
// tensors (autograd packs what a node reads before the kernel, its outputs after; the emitter's
// Recompute). Its later runs save nothing and are not rerun.
// Without early stop (the begin's early_stop false) the recompute, started at the same
// backward, runs to the region's end.
#ifndef BUCKETSIM_GEN_PROGRAM_REGIONS_H_
#define BUCKETSIM_GEN_PROGRAM_REGIONS_H_

#include <cstddef>
#include <limits>
#include <vector>

#include "gen/model_program.h"

namespace bucketsim {

struct CheckpointRegions {
  static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  // Per op: the checkpoint_begin of the region it is in (its begin and end included), or kNone.
  std::vector<std::size_t> region;
  // Per checkpoint_begin: the last op its recompute reruns (the begin itself: none).
  std::vector<std::size_t> stop;
  // Per run: the checkpoint_end of the non-reentrant region whose recompute its backward starts
  // (the region's stop), or kNone.
  std::vector<std::size_t> trigger;
  // Per run: the checkpoint_begin of the non-reentrant region whose own saves (its inputs, the
  // RNG state) go when this run's backward releases its saved tensors, or kNone. They belong to
  // the region's _CheckpointFrame, which the pack hooks' holders in the region's nodes keep
  // alive: it dies with the last of them, the backward of the region's first run that saves
  // any (torch 2.6 torch/utils/checkpoint.py, _checkpoint_hook). A reentrant region keeps them
  // in CheckpointFunction's ctx until its one backward node returns (its checkpoint_begin).
  std::vector<std::size_t> frame_release;

  // Whether op i is rerun by its region's recompute.
  bool Reruns(std::size_t i) const { return region[i] != kNone && i <= stop[region[i]]; }
};

// The regions of a program whose checkpoint_begin/_end pairs ValidateProgram has checked.
CheckpointRegions FindCheckpointRegions(const ModelProgram& model);

}  // namespace bucketsim

#endif  // BUCKETSIM_GEN_PROGRAM_REGIONS_H_
