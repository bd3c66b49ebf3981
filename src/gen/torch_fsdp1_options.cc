// FSDP1's entry of the implementations' table (gen/fsdp_impl_options.h).
#include "gen/torch_fsdp1_options.h"

#include <fmt/format.h>

#include "gen/fsdp_impl_options.h"
#include "gen/torch_fsdp1.h"
#include "gen/torch_fsdp_setting.h"

namespace bucketsim {

std::string_view ShardingStrategyName(ShardingStrategy strategy) {
  switch (strategy) {
    case ShardingStrategy::kFullShard:
      return "FULL_SHARD";
    case ShardingStrategy::kShardGradOp:
      return "SHARD_GRAD_OP";
    case ShardingStrategy::kNoShard:
      return "NO_SHARD";
    case ShardingStrategy::kHybridShard:
      return "HYBRID_SHARD";
  }
  return "?";
}

std::string_view TorchBackwardPrefetch(BackwardPrefetch prefetch) {
  switch (prefetch) {
    case BackwardPrefetch::kPre:
      return "BackwardPrefetch.BACKWARD_PRE";
    case BackwardPrefetch::kPost:
      return "BackwardPrefetch.BACKWARD_POST";
    case BackwardPrefetch::kNone:
      return "None";
  }
  return "?";
}

namespace {

std::vector<PresetParam> Params(GenOptions& o) {
  Fsdp1Options& f = o.fsdp1;
  std::vector<PresetParam> params;
  params.push_back(ChoiceParam("sharding-strategy",
                               "fsdp1 ShardingStrategy (HYBRID_SHARD with --hsdp-shape)",
                               f.sharding_strategy,
                               {{"FULL_SHARD", ShardingStrategy::kFullShard},
                                {"SHARD_GRAD_OP", ShardingStrategy::kShardGradOp},
                                {"NO_SHARD", ShardingStrategy::kNoShard},
                                {"HYBRID_SHARD", ShardingStrategy::kHybridShard}}));
  params.push_back(ChoiceParam("backward-prefetch",
                               "fsdp1 backward_prefetch: BACKWARD_PRE, BACKWARD_POST or None",
                               f.backward_prefetch,
                               {{"pre", BackwardPrefetch::kPre},
                                {"post", BackwardPrefetch::kPost},
                                {"none", BackwardPrefetch::kNone}}));
  params.push_back(
      SwitchParam("forward-prefetch", "fsdp1 forward_prefetch (on|off)", f.forward_prefetch));
  params.push_back(
      SwitchParam("limit-all-gathers", "fsdp1 limit_all_gathers (on|off)", f.limit_all_gathers));
  params.push_back(
      SwitchParam("use-orig-params", "fsdp1 use_orig_params (on|off)", f.use_orig_params));
  return params;
}

Status Validate(const GenOptions& o) {
  BUCKETSIM_RETURN_IF_ERROR(ValidateTorchProcessGroups(o));
  // HYBRID_SHARD takes the mesh's two groups (fully_sharded_data_parallel.py
  // _init_process_group_state_for_hybrid_shard); no other strategy takes a 2-D mesh here.
  const bool hybrid = o.fsdp1.sharding_strategy == ShardingStrategy::kHybridShard;
  if (hybrid != (o.group_layout == GroupLayout::kHsdp)) {
    return InvalidArgument(
        "HYBRID_SHARD needs its replicate and shard groups: give --sharding-strategy "
        "HYBRID_SHARD with --hsdp-shape R,S (R replicas of S ranks)");
  }
  return Status::Ok();
}

std::string Setting(const GenOptions& o) {
  const Fsdp1Options& f = o.fsdp1;
  std::string s = fmt::format(
      "FullyShardedDataParallel(module, sharding_strategy=ShardingStrategy.{}, "
      "backward_prefetch={}, forward_prefetch={}, limit_all_gathers={}, use_orig_params={}",
      ShardingStrategyName(f.sharding_strategy), TorchBackwardPrefetch(f.backward_prefetch),
      f.forward_prefetch ? "True" : "False", f.limit_all_gathers ? "True" : "False",
      f.use_orig_params ? "True" : "False");
  const std::string mp = MixedPrecisionArgs(o);
  if (!mp.empty()) s += fmt::format(", mixed_precision=MixedPrecision({})", mp);
  if (o.offload_params) s += ", cpu_offload=CPUOffload(offload_params=True)";
  const std::string mesh = TorchDeviceMesh(o);
  if (!mesh.empty()) s += ", device_mesh=" + mesh;
  return s + ")";
}

// FSDP1 casts the root's forward inputs to param_dtype (MixedPrecision's
// cast_root_forward_inputs, its default), no unit's outputs.
BoundaryCasts Casts(const GenOptions& o) {
  BoundaryCasts casts;
  if (o.compute_dtype != DType::kFloat32) casts.inputs = o.compute_dtype;
  casts.inputs_root_only = true;
  return casts;
}

// FSDP1 keeps a unit's parameters after forward by its sharding strategy, not an instance's
// own setting.
std::string InstanceReshardInstead(std::string_view /*unit*/) {
  return "FSDP1 keeps a unit's parameters by its sharding strategy, every unit's here "
         "(--sharding-strategy SHARD_GRAD_OP)";
}

}  // namespace

FsdpImplOptions TorchFsdp1Options() {
  // fp32: no MixedPrecision, PyTorch's default; one process group; foreach: its FlatParameter
  // is a plain nn.Parameter, which torch.optim's _default_to_fused_or_foreach accepts on CUDA.
  FsdpImplOptions entry;
  entry.impl = FsdpImpl::kFsdp1;
  entry.compute_dtype = DType::kFloat32;
  entry.group_layout = GroupLayout::kShared;
  entry.optimizer_impl = OptimizerImpl::kForeach;
  entry.offloads = true;
  entry.params = Params;
  entry.validate = Validate;
  entry.setting = Setting;
  entry.describe = DescribeTorchFsdpOptions;
  entry.boundary_casts = Casts;
  entry.unit_keys = {"backward_prefetch"};
  entry.instance_reshard_instead = InstanceReshardInstead;
  entry.make = MakeTorchFsdp1;
  return entry;
}

}  // namespace bucketsim
