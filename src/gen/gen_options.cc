#include "gen/gen_options.h"

#include <cmath>
#include <utility>

#include <fmt/format.h>

namespace bucketsim {

DType GenOptions::ReduceDType() const {
  if (fp32_reduce_scatter) return DType::kFloat32;
  return reduce_dtype.value_or(compute_dtype);
}

std::vector<int> GenOptions::ShardGroupRanks() const {
  int first = 0;
  int size = world_size;
  if (group_layout == GroupLayout::kHsdp) {
    size = hsdp_shard_size;
    first = rank / size * size;
  }
  std::vector<int> ranks(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) ranks[static_cast<std::size_t>(r)] = first + r;
  return ranks;
}

std::string_view OptimizerName(OptimizerKind optimizer) {
  switch (optimizer) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kSgdMomentum:
      return "sgd-momentum";
    case OptimizerKind::kAdam:
      return "adam";
  }
  return "?";
}

std::string_view GroupLayoutName(GroupLayout layout) {
  switch (layout) {
    case GroupLayout::kShared:
      return "shared";
    case GroupLayout::kPerInstance:
      return "per-instance";
    case GroupLayout::kSharedBnOwn:
      return "shared-bn-own";
    case GroupLayout::kHsdp:
      return "hsdp";
  }
  return "?";
}

Status ValidateGenOptions(const GenOptions& options) {
  if (options.iterations < 1) {
    return InvalidArgument(
        fmt::format("iterations must be at least 1 (got {})", options.iterations));
  }
  // With one rank fairscale does not shard: the emitter then makes the unsharded trace (no
  // all-gather, no reduce-scatter, the full gradient kept as the gradient), which is also plain
  // PyTorch's, the trace real runs are checked against.
  if (options.world_size < 1) {
    return InvalidArgument(
        fmt::format("world_size must be at least 1 (got {})", options.world_size));
  }
  // The header lists every member rank; TraceHeader::Finalize rejects more than 2^20 anyway,
  // but only after the list is built.
  if (options.world_size > (1 << 20)) {
    return InvalidArgument(fmt::format("world_size {} is beyond 2^20 ranks", options.world_size));
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgument(
        fmt::format("rank {} is outside [0, world_size {})", options.rank, options.world_size));
  }
  if (options.group_layout == GroupLayout::kHsdp) {
    const int k = options.hsdp_shard_size;
    if (k < 2 || options.world_size % k != 0) {
      return InvalidArgument(
          fmt::format("hsdp_shard_size must be at least 2 and divide world_size {} (got {})",
                      options.world_size, k));
    }
  } else if (options.hsdp_shard_size != 0) {
    return InvalidArgument(
        fmt::format("hsdp_shard_size ({}) is only meaningful with the hsdp group layout (got {})",
                    options.hsdp_shard_size, GroupLayoutName(options.group_layout)));
  }
  const DType compute = options.compute_dtype;
  if (compute != DType::kFloat32 && compute != DType::kFloat16 && compute != DType::kBFloat16) {
    return InvalidArgument(
        fmt::format("compute_dtype must be fp32, fp16 or bf16 (got {})", DTypeName(compute)));
  }
  // fairscale reduces in the compute dtype, or in fp32 with fp32_reduce_scatter.
  const DType reduce = options.reduce_dtype.value_or(compute);
  if (reduce != compute && reduce != DType::kFloat32) {
    return InvalidArgument(fmt::format("reduce_dtype must be compute_dtype ({}) or fp32 (got {})",
                                       DTypeName(compute), DTypeName(reduce)));
  }
  if (options.fp32_reduce_scatter && reduce != DType::kFloat32 && options.reduce_dtype) {
    return InvalidArgument(fmt::format(
        "fp32_reduce_scatter reduces in fp32, but reduce_dtype is {}", DTypeName(reduce)));
  }
  if (!std::isfinite(options.bucket_cap_mb)) {
    return InvalidArgument("bucket_cap_mb must be a finite number");
  }
  if (!std::isfinite(options.device_tflops) || options.device_tflops <= 0) {
    return InvalidArgument(
        fmt::format("device_tflops must be a positive number (got {})", options.device_tflops));
  }
  return Status::Ok();
}

std::string DescribeGenOptions(const GenOptions& options) {
  std::string layout = fmt::format("{} groups", GroupLayoutName(options.group_layout));
  if (options.group_layout == GroupLayout::kHsdp) {
    layout = fmt::format("hsdp shard groups of {}", options.hsdp_shard_size);
  }
  return fmt::format("fairscale FSDP rank {} of {}, compute {}, reduce {}, {}, {}, {} iterations{}",
                     options.rank, options.world_size, DTypeName(options.compute_dtype),
                     DTypeName(options.ReduceDType()), layout, OptimizerName(options.optimizer),
                     options.iterations,
                     options.reshard_after_forward ? "" : ", no reshard after forward");
}

std::vector<PresetParam> GenOptionParams(GenOptions& o) {
  std::vector<PresetParam> params;
  params.push_back(IntParam("world-size", "Ranks of the job", o.world_size));
  params.push_back(IntParam("rank", "The rank whose view the trace is", o.rank));
  params.push_back(IntParam("iterations", "Training iterations", o.iterations));
  params.push_back(DTypeParam("param-dtype",
                              "Mixed precision param/compute dtype: all-gathered parameters, "
                              "activations, full gradients (shards stay fp32)",
                              o.compute_dtype));
  params.push_back(ChoiceParam("reduce-dtype",
                               "Reduce-scatter dtype (param-dtype: the same as --param-dtype)",
                               o.reduce_dtype,
                               {{"param-dtype", std::nullopt},
                                {"fp32", DType::kFloat32},
                                {"bf16", DType::kBFloat16},
                                {"fp16", DType::kFloat16}}));
  params.push_back(BoolParam("fp32-reduce-scatter",
                             "fairscale fp32_reduce_scatter: copy the gradient to fp32 and reduce "
                             "in fp32",
                             o.fp32_reduce_scatter));
  params.push_back(BoolParam("reshard-after-forward",
                             "Free gathered parameters after each instance's forward "
                             "(false: keep them until its backward)",
                             o.reshard_after_forward));
  params.push_back(ChoiceParam("optimizer", "Optimizer state: none, momentum, or Adam's two",
                               o.optimizer,
                               {{"sgd", OptimizerKind::kSgd},
                                {"sgd-momentum", OptimizerKind::kSgdMomentum},
                                {"adam", OptimizerKind::kAdam}}));
  params.push_back(ChoiceParam("groups",
                               "Process-group objects: shared (one cached group, fairscale #678), "
                               "per-instance (a new group per FSDP instance, #633), shared-bn-own "
                               "(one group for the main instances, one per auto_wrap_bn wrapper: "
                               "the memory test at #633/#650), hsdp",
                               o.group_layout,
                               {{"shared", GroupLayout::kShared},
                                {"per-instance", GroupLayout::kPerInstance},
                                {"shared-bn-own", GroupLayout::kSharedBnOwn},
                                {"hsdp", GroupLayout::kHsdp}}));
  params.push_back(IntParam("hsdp-shard-size",
                            "With --groups hsdp: ranks per shard group (consecutive ranks)",
                            o.hsdp_shard_size));
  params.push_back(NumberParam("bucket-cap-mb",
                               "The run's bucket_cap_mb, recorded in the trace header (the cap "
                               "compare/check use without --bucket-cap-mb)",
                               o.bucket_cap_mb));
  params.push_back(NumberParam(
      "device-tflops", "Sustained TFLOP/s of one device, for compute spans", o.device_tflops));
  return params;
}

PresetParam AutocastParam(std::optional<DType>& autocast) {
  return ChoiceParam(
      "autocast",
      "torch.autocast dtype of forward and loss (none: off): convolutions and matmuls run in it "
      "(their cast inputs and weight copies saved for backward), layernorm, softmax and the "
      "loss in fp32, other ops in their input's dtype (CUDA's autocast op lists); parameters "
      "gathered in --param-dtype",
      autocast, {{"none", std::nullopt}, {"fp16", DType::kFloat16}, {"bf16", DType::kBFloat16}});
}

Status ValidateAutocast(const std::optional<DType>& autocast) {
  if (autocast && *autocast != DType::kFloat16 && *autocast != DType::kBFloat16) {
    return InvalidArgument(
        fmt::format("autocast must be fp16 or bf16 (got {})", DTypeName(*autocast)));
  }
  return Status::Ok();
}

}  // namespace bucketsim
