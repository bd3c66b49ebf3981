#include "core/dtype.h"

#include <array>

namespace bucketsim {
namespace {

struct DTypeInfo {
  DType dtype;
  Bytes element_size;
  std::string_view name;
  std::string_view torch_name;
};

constexpr std::array<DTypeInfo, kNumDTypes> kDTypes = {{
    {DType::kFloat64, 8, "fp64", "float64"},
    {DType::kFloat32, 4, "fp32", "float32"},
    {DType::kFloat16, 2, "fp16", "float16"},
    {DType::kBFloat16, 2, "bf16", "bfloat16"},
    {DType::kFloat8E4M3, 1, "fp8_e4m3", "float8_e4m3fn"},
    {DType::kFloat8E5M2, 1, "fp8_e5m2", "float8_e5m2"},
}};

}  // namespace

Bytes ElementSize(DType dtype) { return kDTypes[static_cast<int>(dtype)].element_size; }

std::string_view DTypeName(DType dtype) { return kDTypes[static_cast<int>(dtype)].name; }

std::optional<DType> ParseDType(std::string_view name) {
  // PyTorch's names may carry their module prefix ("torch.float32"); ours never do.
  bool torch_prefixed = name.starts_with("torch.");
  if (torch_prefixed) name.remove_prefix(6);
  for (const DTypeInfo& info : kDTypes) {
    if (name == info.torch_name || (!torch_prefixed && name == info.name)) return info.dtype;
  }
  return std::nullopt;
}

}  // namespace bucketsim
