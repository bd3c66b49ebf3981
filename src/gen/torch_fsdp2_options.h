// FSDP2's own options (torch.distributed.fsdp.fully_shard, torch 2.6): MixedPrecisionPolicy's
// casts and the explicit prefetch of PyTorch's FSDP2 example. GenOptions::fsdp2 holds them;
// their flags, rules and setting text are this implementation's entry of the table
// (gen/fsdp_impl_options.h), in torch_fsdp2_options.cc. reshard_after_forward=N is said with
// the flag every implementation shares (GenOptions::reshard_after_forward_ranks).
#pragma once

#include <optional>
#include <string>

#include "core/dtype.h"

namespace bucketsim {

struct Fsdp2Options {
  // MixedPrecisionPolicy: the root's output_dtype, the model's floating outputs cast to it
  // (unset: none), and every unit's cast_forward_inputs, its floating forward inputs cast to
  // param_dtype (PyTorch's default, true; only with a param_dtype).
  // gen/program_boundary_casts.h.
  std::optional<DType> output_dtype;
  bool cast_forward_inputs = true;
  // Explicit prefetch as PyTorch's FSDP2 example sets it: each unit but the root, in forward
  // order, set_modules_to_forward_prefetch(the next N units) (0: none, the default) and
  // set_modules_to_backward_prefetch(the N before it), from the N+1-th on (0: the implicit
  // prefetch of the unit before it in post-forward order).
  int forward_prefetch_modules = 0;
  int backward_prefetch_modules = 0;

  friend bool operator==(const Fsdp2Options&, const Fsdp2Options&) = default;
};

// fully_shard's reshard_after_forward as a user writes it: "True", "False" or the int of
// `ranks` (> 0).
std::string TorchReshardAfterForward(bool reshard, int ranks);

}  // namespace bucketsim
