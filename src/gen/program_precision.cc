#include "gen/program_precision.h"

#include <string>

#include <fmt/format.h>

namespace bucketsim {
namespace {

class Caster {
 public:
  explicit Caster(DType to) : to_(to), name_(DTypeName(to)) {}

  // An fp32 tensor of `bytes` becomes one of the same element count in `to_`.
  void Cast(std::string& dtype, Bytes& bytes) {
    if (dtype != "fp32" && dtype != "float32" && dtype != "torch.float32") return;
    if (bytes % kFp32Size != 0) return;  // not an fp32 storage's size: leave it as recorded
    ++summary_.tensors;
    summary_.bytes_before += bytes;
    bytes = bytes / kFp32Size * ElementSize(to_);
    summary_.bytes_after += bytes;
    dtype = std::string(name_);
  }

  const CastSummary& summary() const { return summary_; }

 private:
  DType to_;
  std::string_view name_;
  CastSummary summary_;
};

}  // namespace

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
  Caster caster(to);
  for (ForwardOp& op : model.forward) {
    for (ProgramTensor& output : op.outputs) caster.Cast(output.dtype, output.bytes);
    for (SavedTensor& save : op.saves) {
      if (save.tensor.empty()) caster.Cast(save.fresh.dtype, save.fresh.bytes);
    }
    for (NewTensor& workspace : op.workspace) caster.Cast(workspace.dtype, workspace.bytes);
  }
  return caster.summary();
}

}  // namespace bucketsim
