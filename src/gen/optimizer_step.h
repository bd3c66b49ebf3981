// The optimizer step as torch.optim runs it on a CUDA device, the same for every FSDP
// implementation: what the optimizer allocates on the device, in the order it does. Each
// implementation says which tensors the optimizer holds on this rank (FSDP1's FlatParameter
// shards, or with use_orig_params their views' local parts; FSDP2's DTensor local shards;
// fairscale's flat shards) and calls EmitOptimizerStep from its Step hook.
//
// Rules, from torch 2.6's torch/optim/sgd.py, adam.py and adamw.py (torch 1.13's for-loop is the
// same; its foreach Adam makes a second full set, `denom`, which is not modelled):
// - State, created lazily at the first step, fp32 like the parameter, per parameter in order:
//   SGD with momentum its momentum buffer (for-loop and foreach: torch.clone(grad) in the update
//   loop; fused: torch.empty_like(grad) for all before the kernel); Adam and AdamW `step`,
//   exp_avg, exp_avg_sq (Adam._init_group). `step` is a CPU scalar unless fused (or capturable):
//   only fused puts it on the device, a 4-byte tensor per parameter.
// - Temporaries of the step, with element counts of the parameter:
//   for-loop (_single_tensor_adam/_adamw): per parameter `exp_avg_sq.sqrt()` and its quotient by
//   bias_correction2_sqrt, the first dying at once; the quotient is `denom`, alive until the
//   next parameter's `denom` replaces it, the last until the function returns. Adam's weight
//   decay makes `grad.add(param)` per parameter, alive until the next parameter rebinds `grad`;
//   AdamW decays the parameter in place. SGD's weight decay makes the same `grad.add(param)`,
//   which momentum replaces by the buffer at once (`grad = buf`).
//   foreach (_multi_tensor_*): Adam's weight decay makes `_foreach_add(grads, params)`, a full
//   set freed at `del device_grads`; then `_foreach_sqrt(exp_avg_sqs)`, a full set, alive until
//   the function returns. SGD's weight decay makes the same full set, dropped when momentum
//   rebinds `device_grads = bufs`, else at the end.
//   fused (_fused_adam/_fused_sgd): no temporaries; the kernel reads and writes in place.
// - A list's tensors die in reverse order (a Python list or tuple decrefs its items from the
//   last); a function's locals die in the order they were first bound.
#pragma once

#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "gen/gen_options.h"

namespace bucketsim {

class TraceEmitter;

// torch's default implementation under `impl` on CUDA (torch.optim.optimizer
// _default_to_fused_or_foreach): foreach when every parameter is a plain Tensor, Parameter or
// DTensor on a device with foreach kernels. Each implementation's entry says which
// (gen/fsdp_impl_options.h).
OptimizerImpl DefaultOptimizerImpl(FsdpImpl impl);
// torch's default weight_decay: 0, AdamW's 1e-2.
double DefaultWeightDecay(OptimizerKind optimizer);

// optimizer.step() of iteration `iteration` over the optimizer's parameters on this rank, in
// the optimizer's order, each as its fp32 element count (0: no elements here, the optimizer
// skips it): the state at iteration 0, the temporaries, and the step's compute span.
Status EmitOptimizerStep(const GenOptions& options, const std::vector<Numel>& params, int iteration,
                         TraceEmitter& trace);
// optimizer.step() over offloaded parameters (CPU offload): state and step on the CPU, nothing
// on the device; its "optimizer step" span the step's bytes over host memory, priced only with
// --gpu (gen/compute_rates.h; without it the span takes no time).
Status EmitHostOptimizerStep(const GenOptions& options, const std::vector<Numel>& params,
                             TraceEmitter& trace);

}  // namespace bucketsim
