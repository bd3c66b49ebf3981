// Element types of gradients and parameters. Only the element size matters to memory, but the
// name is kept because fairscale keys buckets by dtype: an fp16 and an fp32 gradient never
// share a bucket, and each gets its own shard size (reference/fsdp_semantics.md §1.9).
#pragma once

#include <optional>
#include <string_view>

#include "core/units.h"

namespace bucketsim {

enum class DType : std::uint8_t {
  kFloat64,
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat8E4M3,
  kFloat8E5M2
};

inline constexpr int kNumDTypes = 6;

Bytes ElementSize(DType dtype);
std::string_view DTypeName(DType dtype);  // "fp32", "bf16", ...
// Accepts the trace names ("fp32") and PyTorch's ("float32", "torch.float32").
std::optional<DType> ParseDType(std::string_view name);

}  // namespace bucketsim
