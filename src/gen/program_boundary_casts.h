// FSDP2's casts at a unit's boundary (MixedPrecisionPolicy.cast_forward_inputs and
// output_dtype) as a rewrite of a model program: each cast a run of its own, so that the
// emitter allocates, saves and differentiates it as any other op.
//
// torch 2.6 torch/distributed/fsdp/_fully_shard/_fsdp_state.py: FSDPState._pre_forward casts
// the floating-point tensors among the module's forward arguments to param_dtype (when
// cast_forward_inputs and param_dtype are set) before its parameter group's pre_forward (the
// all-gather); _post_forward casts its floating-point outputs to output_dtype (when set) after
// the group's post_forward (the reshard). _fsdp_common.py _cast_fp_tensor: a tensor already in
// that dtype is passed through (no copy); any other is x.to(dtype), a new tensor whose
// backward (ToCopyBackward0) gives the gradient in the source's dtype and saves nothing. Both
// hooks return at once in PRE_BACKWARD, the state of a unit a checkpointed region recomputes.
#ifndef BUCKETSIM_GEN_PROGRAM_BOUNDARY_CASTS_H_
#define BUCKETSIM_GEN_PROGRAM_BOUNDARY_CASTS_H_

#include <cstddef>
#include <optional>

#include "core/dtype.h"
#include "core/status.h"
#include "gen/model_program.h"

namespace bucketsim {

struct BoundaryCasts {
  std::optional<DType> inputs{};  // each unit's floating forward inputs to this (param_dtype)
  // ... the root's alone: FSDP1's MixedPrecision(cast_root_forward_inputs=True), its default
  // (torch 2.6 fsdp/_runtime_utils.py _root_cast_forward_input, before the root's unshard).
  // Skipped when the root has no parameters (never gathered: no place to put it).
  bool inputs_root_only = false;
  // The root's floating forward outputs to this: its output_dtype, the model's outputs (the
  // units' policies have none: on every unit, the root's own ops after the last one would get
  // their inputs in that dtype).
  std::optional<DType> root_outputs{};
};

// What InsertBoundaryCasts added.
struct BoundaryCastSummary {
  std::size_t casts = 0;  // tensors cast (one run each)
  Bytes bytes = 0;        // the copies' sizes
};

// Inserts a run "<unit>:cast_forward_inputs" before each unit's gather for every floating
// tensor made before it (or a model input) that a run of the unit reads in another dtype, and
// a run "<root>:cast_forward_outputs" after the root's end_forward for every floating tensor
// the root's forward made that is read after it (or is the loss, or held) in another dtype.
// The root is the program's instance 0; refused when it has no parameters (it is then never
// gathered, and the program does not say where its forward ends). The unit's reads (and
// saves and releases) of an input, and every later reference to an output, then name the copy.
// A unit's inputs are the tensors its runs read that were made before it: the program does not
// say which were its forward's arguments. Refused for a unit inside a checkpointed region that
// would need a cast (FSDP's hooks skip their casts when the region is recomputed, which the
// emitter's recompute would not).
Result<BoundaryCastSummary> InsertBoundaryCasts(ModelProgram& model, const BoundaryCasts& casts);

}  // namespace bucketsim

#endif  // BUCKETSIM_GEN_PROGRAM_BOUNDARY_CASTS_H_
