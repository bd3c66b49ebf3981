#include "gen/program_precision.h"

#include <string>
#include <string_view>

#include <fmt/format.h>

namespace bucketsim {
namespace {

// Calls fn(dtype, bytes) on every tensor the forward makes: runs' outputs, the fresh tensors
// runs save for backward, and their backward workspaces (FsdpModel or const FsdpModel).
template <typename Model, typename Fn>
void ForEachForwardTensor(Model& model, Fn&& fn) {
  for (auto& op : model.forward) {
    for (auto& output : op.outputs) fn(output.dtype, output.bytes);
    for (auto& save : op.saves) {
      if (save.tensor.empty()) fn(save.fresh.dtype, save.fresh.bytes);
    }
    for (auto& workspace : op.workspace) fn(workspace.dtype, workspace.bytes);
  }
}

// An fp32 tensor's storage (a size that is not a whole number of fp32 elements is left as
// recorded).
bool IsFp32Storage(std::string_view dtype, Bytes bytes) {
  return ParseDType(dtype) == DType::kFloat32 && bytes % kFp32Size == 0;
}

}  // namespace

std::size_t CountFp32Activations(const FsdpModel& model) {
  std::size_t count = 0;
  ForEachForwardTensor(model, [&](const std::string& dtype, Bytes bytes) {
    count += IsFp32Storage(dtype, bytes) ? 1 : 0;
  });
  return count;
}

Result<CastSummary> CastActivations(FsdpModel& model, DType to) {
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
  ForEachForwardTensor(model, [&](std::string& dtype, Bytes& bytes) {
    if (!IsFp32Storage(dtype, bytes)) return;
    ++summary.tensors;
    summary.bytes_before += bytes;
    bytes = bytes / kFp32Size * ElementSize(to);  // the same element count in `to`
    summary.bytes_after += bytes;
    dtype = std::string(DTypeName(to));
  });
  return summary;
}

}  // namespace bucketsim
