// Which NCCL element type reduces a gradient of a given dtype. Kept as our own enum, apart from
// nccl.h, so the mapping (and its refusals) is tested without CUDA; the backend turns it into
// ncclDataType_t in one switch.
#pragma once

#include "core/dtype.h"
#include "core/status.h"

namespace bucketsim {

enum class ReduceType : std::uint8_t { kFloat16, kBFloat16, kFloat32, kFloat64 };

// fp16/bf16/fp32/fp64 reduce as themselves. fp8 is refused: fairscale reduces gradients in
// their own dtype and no FSDP recipe reduce-scatters fp8 gradients, and the verification sums
// (up to 8 per rank, backend/verify_pattern.h) do not fit fp8's 3 or 2 mantissa bits.
Result<ReduceType> ReduceTypeFor(DType dtype);

}  // namespace bucketsim
