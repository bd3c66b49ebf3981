// FSDP2's entry of the implementations' table (gen/fsdp_impl_options.h).
#include "gen/torch_fsdp2_options.h"

#include <utility>

#include <fmt/format.h>

#include "gen/fsdp_impl_options.h"
#include "gen/torch_fsdp2.h"
#include "gen/torch_fsdp_setting.h"

namespace bucketsim {

std::string TorchReshardAfterForward(bool reshard, int ranks) {
  if (ranks > 0) return std::to_string(ranks);
  return reshard ? "True" : "False";
}

namespace {

std::vector<PresetParam> Params(GenOptions& o) {
  Fsdp2Options& f = o.fsdp2;
  std::vector<PresetParam> params;
  params.push_back(ChoiceParam(
      "output-dtype",
      "fsdp2 the root's MixedPrecisionPolicy.output_dtype: the model's floating outputs cast to "
      "it (none: no cast)",
      f.output_dtype,
      {{"none", std::nullopt},
       {"fp32", DType::kFloat32},
       {"bf16", DType::kBFloat16},
       {"fp16", DType::kFloat16}}));
  params.push_back(IntParam("modules-to-forward-prefetch",
                            "fsdp2: each unit set_modules_to_forward_prefetch(the next N units), "
                            "as PyTorch's FSDP2 example (0: none)",
                            f.forward_prefetch_modules));
  params.push_back(IntParam("modules-to-backward-prefetch",
                            "fsdp2: each unit set_modules_to_backward_prefetch(the N before it), "
                            "as PyTorch's FSDP2 example (0: the implicit prefetch)",
                            f.backward_prefetch_modules));
  params.push_back(SwitchParam("cast-forward-inputs",
                               "fsdp2 MixedPrecisionPolicy.cast_forward_inputs (on|off): each "
                               "unit's floating inputs cast to the param dtype",
                               f.cast_forward_inputs));
  return params;
}

Status Validate(const GenOptions& o) {
  for (const auto& [flag, count] :
       {std::pair<std::string_view, int>{"modules-to-forward-prefetch",
                                         o.fsdp2.forward_prefetch_modules},
        {"modules-to-backward-prefetch", o.fsdp2.backward_prefetch_modules}}) {
    if (count < 0) {
      return InvalidArgument(
          fmt::format("--{} {}: expected a count of units, 0 or more", flag, count));
    }
  }
  return ValidateTorchProcessGroups(o);
}

std::string Setting(const GenOptions& o) {
  const Fsdp2Options& f = o.fsdp2;
  const std::string reshard =
      "reshard_after_forward=" +
      TorchReshardAfterForward(o.reshard_after_forward, o.reshard_after_forward_ranks);
  std::string s = "fully_shard(module, " + reshard;
  // cast_forward_inputs=False matters only with a param_dtype (_fsdp_state.py _pre_forward).
  std::string policy = MixedPrecisionArgs(o);
  if (o.compute_dtype != DType::kFloat32 && !f.cast_forward_inputs) {
    policy += ", cast_forward_inputs=False";
  }
  std::string rest;
  if (o.offload_params) rest += ", offload_policy=CPUOffloadPolicy()";
  const std::string mesh = TorchDeviceMesh(o);
  if (!mesh.empty()) rest += ", mesh=" + mesh;
  const auto with_policy = [&](const std::string& args) {
    return args.empty() ? std::string() : fmt::format(", mp_policy=MixedPrecisionPolicy({})", args);
  };
  s += with_policy(policy) + rest + ")";
  // The explicit prefetch of PyTorch's FSDP2 example (examples/distributed/FSDP2), over the
  // units in forward order.
  if (f.forward_prefetch_modules > 0) {
    s += fmt::format(
        ", then set_modules_to_forward_prefetch as PyTorch's FSDP2 example "
        "(num_to_forward_prefetch={})",
        f.forward_prefetch_modules);
  }
  if (f.backward_prefetch_modules > 0) {
    s += fmt::format(
        ", then set_modules_to_backward_prefetch as PyTorch's FSDP2 example "
        "(num_to_backward_prefetch={})",
        f.backward_prefetch_modules);
  }
  // output_dtype is the root's alone (gen/program_boundary_casts.h).
  if (f.output_dtype) {
    const std::string root_policy = fmt::format(
        "{}{}output_dtype={}", policy, policy.empty() ? "" : ", ", TorchDType(*f.output_dtype));
    s += fmt::format(", and on the root fully_shard(model, {}{}{})", reshard,
                     with_policy(root_policy), rest);
  }
  return s;
}

// FSDP2 casts every unit's floating forward inputs to param_dtype (cast_forward_inputs) and the
// root's outputs to output_dtype (_fsdp_state.py _pre_forward, _root_post_forward).
BoundaryCasts Casts(const GenOptions& o) {
  BoundaryCasts casts;
  if (o.compute_dtype != DType::kFloat32 && o.fsdp2.cast_forward_inputs) {
    casts.inputs = o.compute_dtype;
  }
  casts.root_outputs = o.fsdp2.output_dtype;
  return casts;
}

std::string InstanceReshardInstead(std::string_view unit) {
  return fmt::format("--unit-setting {}:reshard_after_forward=false gives fully_shard's", unit);
}

}  // namespace

FsdpImplOptions TorchFsdp2Options() {
  // fp32: no MixedPrecisionPolicy, PyTorch's default; one process group (or the mesh's);
  // foreach: DTensor parameters, which torch.optim's _default_to_fused_or_foreach accepts.
  FsdpImplOptions entry;
  entry.impl = FsdpImpl::kFsdp2;
  entry.compute_dtype = DType::kFloat32;
  entry.group_layout = GroupLayout::kShared;
  entry.optimizer_impl = OptimizerImpl::kForeach;
  entry.offloads = true;
  entry.reshards_to_ranks = true;
  entry.params = Params;
  entry.validate = Validate;
  entry.setting = Setting;
  entry.describe = DescribeTorchFsdpOptions;
  entry.boundary_casts = Casts;
  entry.unit_keys = {"reshard_after_forward", "modules_to_forward_prefetch",
                     "modules_to_backward_prefetch"};
  entry.instance_reshard_instead = InstanceReshardInstead;
  entry.make = MakeTorchFsdp2;
  return entry;
}

}  // namespace bucketsim
