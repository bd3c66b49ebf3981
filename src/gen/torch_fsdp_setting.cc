#include "gen/torch_fsdp_setting.h"

#include <fmt/format.h>

namespace bucketsim {

std::string_view TorchDType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "torch.float32";
    case DType::kBFloat16:
      return "torch.bfloat16";
    case DType::kFloat16:
      return "torch.float16";
    default:
      return DTypeName(dtype);
  }
}

std::string MixedPrecisionArgs(const GenOptions& o) {
  std::string args;
  const auto add = [&args](std::string_view name, DType dtype) {
    args += fmt::format("{}{}={}", args.empty() ? "" : ", ", name, TorchDType(dtype));
  };
  // reduce_dtype=None reduces in param_dtype (FSDP1 MixedPrecision, FSDP2 MixedPrecisionPolicy).
  if (o.compute_dtype != DType::kFloat32) add("param_dtype", o.compute_dtype);
  if (o.reduce_dtype && *o.reduce_dtype != o.compute_dtype) add("reduce_dtype", *o.reduce_dtype);
  return args;
}

std::string TorchDeviceMesh(const GenOptions& o) {
  if (o.group_layout != GroupLayout::kHsdp) return "";
  return fmt::format("init_device_mesh(\"cuda\", ({}, {}))", o.world_size / o.hsdp_shard_size,
                     o.hsdp_shard_size);
}

std::string DescribeTorchFsdpOptions(const GenOptions& o) {
  return fmt::format("PyTorch {} rank {} of {}: {}, {}, {} iterations", FsdpImplName(o.fsdp_impl),
                     o.rank, o.world_size, TorchFsdpSetting(o), DescribeOptimizer(o), o.iterations);
}

Status ValidateTorchProcessGroups(const GenOptions& o) {
  if (o.group_layout == GroupLayout::kShared || o.group_layout == GroupLayout::kHsdp) {
    return Status::Ok();
  }
  return InvalidArgument(
      fmt::format("--groups {} is fairscale's; PyTorch's {} uses one process group for every unit "
                  "(--groups shared) or a 2-D mesh (--hsdp-shape R,S)",
                  GroupLayoutName(o.group_layout), FsdpImplName(o.fsdp_impl)));
}

}  // namespace bucketsim
