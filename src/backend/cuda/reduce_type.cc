#include "backend/cuda/reduce_type.h"

#include <fmt/format.h>

namespace bucketsim {

Result<ReduceType> ReduceTypeFor(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return ReduceType::kFloat16;
    case DType::kBFloat16:
      return ReduceType::kBFloat16;
    case DType::kFloat32:
      return ReduceType::kFloat32;
    case DType::kFloat64:
      return ReduceType::kFloat64;
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2:
      break;
  }
  return InvalidTrace(fmt::format(
      "the cuda backend does not reduce-scatter {} gradients: fp8 has too few mantissa bits for "
      "a verified sum; replay this trace with --backend sim",
      DTypeName(dtype)));
}

}  // namespace bucketsim
