#include "gen/program_precision.h"

#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace bucketsim {
namespace {

// An fp32 tensor's storage (a size that is not a whole number of fp32 elements is left as
// recorded).
bool IsFp32Storage(std::string_view dtype, Bytes bytes) {
  return ParseDType(dtype) == DType::kFloat32 && bytes % kFp32Size == 0;
}

}  // namespace

FloatActivations CountFloatActivations(const ModelProgram& model) {
  FloatActivations count;
  ForEachForwardTensor(model, [&](const auto& tensor) {
    if (IsFp32Storage(tensor.dtype, tensor.bytes)) {
      ++count.fp32;
      count.fp32_bytes += tensor.bytes;
    } else if (const std::optional<DType> dtype = ParseDType(tensor.dtype);
               dtype == DType::kBFloat16 || dtype == DType::kFloat16) {
      ++count.low_precision;
    }
  });
  return count;
}

Result<CastSummary> CastActivations(ModelProgram& model, DType to) {
  if (model.autocast) {
    return InvalidArgument(fmt::format(
        "the program was recorded under autocast ({}): its activations already have the dtypes "
        "autocast gave each op; casting them applies to a program recorded without autocast",
        DTypeName(*model.autocast)));
  }
  if (to != DType::kBFloat16 && to != DType::kFloat16) {
    return InvalidArgument(fmt::format(
        "activations can be cast to bf16 or fp16, the dtypes a mixed-precision run computes in "
        "(got {})",
        DTypeName(to)));
  }
  CastSummary summary;
  ForEachForwardTensor(model, [&](auto& tensor) {
    if (!IsFp32Storage(tensor.dtype, tensor.bytes)) return;
    ++summary.tensors;
    summary.bytes_before += tensor.bytes;
    tensor.bytes = tensor.bytes / kFp32Size * ElementSize(to);  // the same count in `to`
    summary.bytes_after += tensor.bytes;
    tensor.dtype = std::string(DTypeName(to));
  });
  return summary;
}

std::size_t RelabelActivations(ModelProgram& model, DType from, DType to) {
  BUCKETSIM_CHECK(ElementSize(from) == ElementSize(to));
  const std::string_view old_name = DTypeName(from);
  std::size_t changed = 0;
  const auto relabel = [&](auto& tensor) {
    if (tensor.dtype != old_name) return;
    tensor.dtype = std::string(DTypeName(to));
    ++changed;
  };
  for (ProgramTensor& input : model.inputs) relabel(input);
  ForEachForwardTensor(model, relabel);
  return changed;
}

}  // namespace bucketsim
