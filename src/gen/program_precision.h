// Precision as a what-if on a model program: the activations of a program recorded in fp32 (on
// the CPU, or on meta) put in the dtype a mixed-precision run computes in.
#ifndef BUCKETSIM_GEN_PROGRAM_PRECISION_H_
#define BUCKETSIM_GEN_PROGRAM_PRECISION_H_

#include <cstddef>

#include "core/dtype.h"
#include "core/status.h"
#include "gen/model_program.h"

namespace bucketsim {

// What CastActivations changed.
struct CastSummary {
  std::size_t tensors = 0;  // tensors whose dtype and size changed
  Bytes bytes_before = 0;   // their sizes before ...
  Bytes bytes_after = 0;    // ... and after
};

// Gives every fp32 tensor that the forward makes (runs' outputs, what runs save for backward
// and their backward workspaces) the dtype `to` and its size, as FSDP's MixedPrecision
// (param_dtype) and fairscale's compute_dtype make a model compute: the gathered parameters
// are in `to`, so are the inputs (FSDP1's cast_forward_inputs, fairscale's input cast), and
// each op's output follows its inputs' dtype. Tensors of other dtypes (indices, masks, and
// tensors already in a low precision) and the model's inputs (the batch as loaded) keep theirs.
// What it cannot know: an op the model runs in fp32 on purpose (`x.float()` before a softmax,
// an fp32 RMSNorm) is a no-op in an fp32 recording, so its fp32 copy is not there to keep.
// Refused for a program recorded under autocast (its dtypes are autocast's already) and for
// `to` other than bf16 or fp16.
Result<CastSummary> CastActivations(ModelProgram& model, DType to);

// The floating tensors the forward makes, by precision: the fp32 ones (those CastActivations
// would cast) and those in a lower precision (bf16, fp16). A program with both was recorded
// in a low precision, and its fp32 tensors are the model's own choice (RMSNorm's x.float(), an
// fp32 loss), which a run in that precision computes in fp32 too.
struct FloatActivations {
  std::size_t fp32 = 0;
  Bytes fp32_bytes = 0;
  std::size_t low_precision = 0;
};
FloatActivations CountFloatActivations(const ModelProgram& model);

// Every tensor of `from` (the inputs and what the forward makes) gets `to`, of the same element
// size: the bf16 recording of a model emitted for an fp16 run, which keeps the same tensors.
// Returns how many changed.
std::size_t RelabelActivations(ModelProgram& model, DType from, DType to);

}  // namespace bucketsim

#endif  // BUCKETSIM_GEN_PROGRAM_PRECISION_H_
