#include "gen/gen_options.h"

#include <charconv>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "gen/fsdp_impl_options.h"
#include "gen/optimizer_step.h"

namespace bucketsim {

DType GenOptions::ReduceDType() const {
  if (fairscale.fp32_reduce_scatter) return DType::kFloat32;
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

std::vector<int> GenOptions::ReplicaRanks() const {
  std::vector<int> ranks;
  if (group_layout != GroupLayout::kHsdp) return ranks;
  for (int r = rank % hsdp_shard_size; r < world_size; r += hsdp_shard_size) ranks.push_back(r);
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
    case OptimizerKind::kAdamW:
      return "adamw";
  }
  return "?";
}

std::string_view OptimizerImplName(OptimizerImpl impl) {
  switch (impl) {
    case OptimizerImpl::kForLoop:
      return "for-loop";
    case OptimizerImpl::kForeach:
      return "foreach";
    case OptimizerImpl::kFused:
      return "fused";
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

namespace {

// An implementation's own option set away from its default under another is an error, as is a
// shared option the run's implementation does not take: the trace would not be what the user
// asked for. Then the run's implementation's own rules.
Status ValidateImplOptions(const GenOptions& o) {
  const FsdpImplOptions& run = OptionsOf(o.fsdp_impl);
  const std::string_view impl = FsdpImplName(o.fsdp_impl);
  GenOptions given = o;  // the params bind to a configuration they may set; neither is set here
  GenOptions defaults;
  for (const FsdpImplOptions& other : FsdpImplOptionsTable()) {
    if (other.impl == o.fsdp_impl) continue;
    const std::vector<PresetParam> set = other.params(given);
    const std::vector<PresetParam> unset = other.params(defaults);
    for (std::size_t i = 0; i < set.size(); ++i) {
      if (set[i].get() == unset[i].get()) continue;
      for (const auto& [flag, instead] : other.said_elsewhere) {
        if (flag == set[i].name) {
          return InvalidArgument(fmt::format("--{} is {}'s; with --fsdp-impl {} say {}", flag,
                                             FsdpImplName(other.impl), impl, instead));
        }
      }
      return InvalidArgument(fmt::format("--{} is an option of --fsdp-impl {} (this is {})",
                                         set[i].name, FsdpImplName(other.impl), impl));
    }
  }
  // The shared options some implementations take, named by whoever takes them.
  const auto taken_by = [&](bool FsdpImplOptions::*takes, bool used, std::string_view flag) {
    if (!used || run.*takes) return Status::Ok();
    std::vector<std::string_view> takers;
    for (const FsdpImplOptions& entry : FsdpImplOptionsTable()) {
      if (entry.*takes) takers.push_back(FsdpImplName(entry.impl));
    }
    std::string names;
    for (std::size_t i = 0; i < takers.size(); ++i) {
      names += fmt::format("{}{}", i == 0 ? "" : i + 1 == takers.size() ? " or " : ", ", takers[i]);
    }
    return InvalidArgument(
        fmt::format("--{} is an option of --fsdp-impl {} (this is {})", flag, names, impl));
  };
  BUCKETSIM_RETURN_IF_ERROR(taken_by(&FsdpImplOptions::reshards_to_ranks,
                                     o.reshard_after_forward_ranks != 0,
                                     "reshard-after-forward=N"));
  BUCKETSIM_RETURN_IF_ERROR(
      taken_by(&FsdpImplOptions::offloads, o.offload_params, "offload-params"));
  if (o.reshard_after_forward_ranks < 0 ||
      (o.reshard_after_forward_ranks > 0 && (o.reshard_after_forward_ranks >= o.world_size ||
                                             o.world_size % o.reshard_after_forward_ranks != 0))) {
    return InvalidArgument(fmt::format(
        "reshard_after_forward={} must be a divisor of world_size {} below it (fully_shard "
        "reshards to that many ranks after forward)",
        o.reshard_after_forward_ranks, o.world_size));
  }
  return run.validate ? run.validate(o) : Status::Ok();
}

}  // namespace

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
  if (options.hsdp_replicas != 0 &&
      options.hsdp_replicas * static_cast<long long>(options.hsdp_shard_size) !=
          options.world_size) {
    return InvalidArgument(
        fmt::format("--hsdp-shape {},{} is {} ranks, but world_size is {}", options.hsdp_replicas,
                    options.hsdp_shard_size,
                    options.hsdp_replicas * static_cast<long long>(options.hsdp_shard_size),
                    options.world_size));
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
  BUCKETSIM_RETURN_IF_ERROR(ValidateImplOptions(options));
  // torch.optim: "Invalid weight_decay value" below zero.
  if (!std::isfinite(options.weight_decay) || options.weight_decay < 0) {
    return InvalidArgument(
        fmt::format("weight_decay must be a finite number >= 0 (got {})", options.weight_decay));
  }
  if (!std::isfinite(options.bucket_cap_mb)) {
    return InvalidArgument("bucket_cap_mb must be a finite number");
  }
  if (!std::isfinite(options.device_tflops) || options.device_tflops <= 0) {
    return InvalidArgument(
        fmt::format("device_tflops must be a positive number (got {})", options.device_tflops));
  }
  if (!options.gpu.empty()) {
    if (FindGpu(options.gpu) == nullptr) {
      return InvalidArgument(fmt::format("gpu '{}' is not one of {}", options.gpu, GpuNameList()));
    }
    if (options.device_tflops != GenOptions{}.device_tflops) {
      return InvalidArgument(fmt::format(
          "device_tflops and gpu both price compute: give one (gpu {} prices it from its "
          "published rates at gpu_efficiency compute={:.4g})",
          options.gpu, options.gpu_efficiency.compute));
    }
  } else if (options.gpu_efficiency != GpuEfficiency{}) {
    return InvalidArgument("gpu_efficiency scales a GPU's published rates: give gpu too");
  }
  return Status::Ok();
}

std::string DescribeOptimizer(const GenOptions& o) {
  std::string s(OptimizerName(o.optimizer));
  std::string sep = " ";
  if (o.optimizer_impl != DefaultOptimizerImpl(o.fsdp_impl)) {
    s += sep + std::string(OptimizerImplName(o.optimizer_impl));
    sep = ", ";
  }
  if (o.weight_decay != DefaultWeightDecay(o.optimizer)) {
    s += fmt::format("{}weight_decay {}", sep, o.weight_decay);
  }
  return s;
}

std::string TorchFsdpSetting(const GenOptions& options) {
  const FsdpImplOptions& entry = OptionsOf(options.fsdp_impl);
  return entry.setting ? entry.setting(options) : std::string();
}

std::string DescribeGenOptions(const GenOptions& options) {
  return OptionsOf(options.fsdp_impl).describe(options);
}

namespace {

// The implementations by their one name (core/fsdp_impl.h), as --fsdp-impl takes them.
std::vector<std::pair<std::string, FsdpImpl>> ImplNames() {
  std::vector<std::pair<std::string, FsdpImpl>> names;
  for (const FsdpImplInfo& info : FsdpImpls()) names.emplace_back(info.name, info.impl);
  return names;
}

// --gpu NAME: the spans priced from that GPU's published rates (gen/compute_rates.h).
PresetParam GpuParam(GenOptions& o) {
  PresetParam param{"gpu",
                    "Price compute spans from this GPU's published rates, an estimate (a "
                    "roofline of FLOPs and bytes, host copies and the CPU step of offload; "
                    "docs/time-model.md); none: --device-tflops alone",
                    ParamKind::kChoice,
                    {"none"},
                    {},
                    {}};
  for (const GpuSpec& gpu : Gpus()) param.choices.emplace_back(gpu.name);
  param.get = [&o] { return o.gpu.empty() ? std::string("none") : o.gpu; };
  param.set = [&o](std::string_view text) {
    if (text == "none") {
      o.gpu.clear();
      return Status::Ok();
    }
    if (FindGpu(text) == nullptr) return UnknownChoice(text, GpuParam(o).choices);
    o.gpu = std::string(text);
    return Status::Ok();
  };
  return param;
}

PresetParam GpuEfficiencyParam(GenOptions& o) {
  PresetParam param{"gpu-efficiency",
                    "With --gpu: the fraction of each published rate a run reaches, F (compute) "
                    "or compute=F,memory=F,link=F,host=F",
                    ParamKind::kChoice,
                    {},
                    {},
                    {}};
  param.get = [&o] { return GpuEfficiencyText(o.gpu_efficiency); };
  param.set = [&o](std::string_view text) {
    Result<GpuEfficiency> parsed = ParseGpuEfficiency(text);
    if (!parsed.ok()) return parsed.status();
    o.gpu_efficiency = *parsed;
    return Status::Ok();
  };
  return param;
}

}  // namespace

std::vector<PresetParam> GenOptionParams(GenOptions& o) {
  std::vector<PresetParam> params;
  PresetParam impl = ChoiceParam("fsdp-impl",
                                 "Whose FSDP: fairscale (2021), fsdp1 (PyTorch "
                                 "FullyShardedDataParallel), fsdp2 (PyTorch fully_shard)",
                                 o.fsdp_impl, ImplNames());
  // The implementation's defaults of the shared options, unless they were given (either order).
  impl.set = [&o, set = impl.set](std::string_view text) {
    BUCKETSIM_RETURN_IF_ERROR(set(text));
    const FsdpImplOptions& entry = OptionsOf(o.fsdp_impl);
    if (!o.compute_dtype_given) o.compute_dtype = entry.compute_dtype;
    if (!o.group_layout_given) o.group_layout = entry.group_layout;
    if (!o.optimizer_impl_given) o.optimizer_impl = entry.optimizer_impl;
    return Status::Ok();
  };
  params.push_back(std::move(impl));
  params.push_back(IntParam("world-size", "Ranks of the job", o.world_size));
  params.push_back(IntParam("rank", "The rank whose view the trace is", o.rank));
  params.push_back(IntParam("iterations", "Training iterations", o.iterations));
  PresetParam param_dtype = DTypeParam("param-dtype",
                                       "Mixed precision param/compute dtype: all-gathered "
                                       "parameters, activations, full gradients (shards stay "
                                       "fp32); default bf16 for fairscale, fp32 (no "
                                       "MixedPrecision) for fsdp1 and fsdp2",
                                       o.compute_dtype);
  param_dtype.set = [&o, set = param_dtype.set](std::string_view text) {
    o.compute_dtype_given = true;
    return set(text);
  };
  param_dtype.default_depends_on = "fsdp-impl";
  params.push_back(std::move(param_dtype));
  params.push_back(ChoiceParam("reduce-dtype",
                               "Reduce-scatter dtype (param-dtype: the same as --param-dtype)",
                               o.reduce_dtype,
                               {{"param-dtype", std::nullopt},
                                {"fp32", DType::kFloat32},
                                {"bf16", DType::kBFloat16},
                                {"fp16", DType::kFloat16}}));
  PresetParam reshard = SwitchParam("reshard-after-forward",
                                    "Free gathered parameters after each instance's forward "
                                    "(false: keep them until its backward; fsdp2 also takes N: "
                                    "reshard to N ranks)",
                                    o.reshard_after_forward);
  reshard.choices = {"true", "false", "N"};
  reshard.set = [&o, set = reshard.set](std::string_view text) {
    int ranks = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), ranks);
    if (error != std::errc() || end != text.data() + text.size() || ranks < 2) {
      o.reshard_after_forward_ranks = 0;
      return set(text);
    }
    o.reshard_after_forward = true;
    o.reshard_after_forward_ranks = ranks;
    return Status::Ok();
  };
  reshard.get = [&o, get = reshard.get] {
    return o.reshard_after_forward_ranks > 0 ? fmt::format("{}", o.reshard_after_forward_ranks)
                                             : get();
  };
  params.push_back(std::move(reshard));
  PresetParam optimizer = ChoiceParam(
      "optimizer",
      "torch.optim's SGD (momentum 0.9 with sgd-momentum), Adam or AdamW: its state and the "
      "step's temporaries",
      o.optimizer,
      {{"sgd", OptimizerKind::kSgd},
       {"sgd-momentum", OptimizerKind::kSgdMomentum},
       {"adam", OptimizerKind::kAdam},
       {"adamw", OptimizerKind::kAdamW}});
  // torch's default weight decay for the optimizer unless --weight-decay was given (either
  // order).
  optimizer.set = [&o, set = optimizer.set](std::string_view text) {
    BUCKETSIM_RETURN_IF_ERROR(set(text));
    if (!o.weight_decay_given) o.weight_decay = DefaultWeightDecay(o.optimizer);
    return Status::Ok();
  };
  params.push_back(std::move(optimizer));
  PresetParam optimizer_impl = ChoiceParam(
      "optimizer-impl",
      "How torch.optim runs the step: for-loop (foreach=False), foreach (foreach=True) or fused "
      "(fused=True); default torch's: for-loop for fairscale, foreach for fsdp1 and fsdp2",
      o.optimizer_impl,
      {{"for-loop", OptimizerImpl::kForLoop},
       {"foreach", OptimizerImpl::kForeach},
       {"fused", OptimizerImpl::kFused}});
  optimizer_impl.set = [&o, set = optimizer_impl.set](std::string_view text) {
    o.optimizer_impl_given = true;
    return set(text);
  };
  optimizer_impl.default_depends_on = "fsdp-impl";
  params.push_back(std::move(optimizer_impl));
  PresetParam weight_decay =
      NumberParam("weight-decay",
                  "The optimizer's weight_decay (default torch's: 0, AdamW 0.01); Adam's and "
                  "SGD's make a temporary per gradient, AdamW's decays in place",
                  o.weight_decay);
  weight_decay.set = [&o, set = weight_decay.set](std::string_view text) {
    o.weight_decay_given = true;
    return set(text);
  };
  weight_decay.default_depends_on = "optimizer";
  params.push_back(std::move(weight_decay));
  PresetParam groups = ChoiceParam(
      "groups",
      "Process-group objects: shared (one cached group, fairscale #678; PyTorch FSDP1 and FSDP2, "
      "their default with --fsdp-impl fsdp1|fsdp2), per-instance (a new group per FSDP instance, "
      "fairscale #633, the default for fairscale), shared-bn-own (one group for the main "
      "instances, one per auto_wrap_bn wrapper: the memory test at #633/#650), hsdp",
      o.group_layout,
      {{"shared", GroupLayout::kShared},
       {"per-instance", GroupLayout::kPerInstance},
       {"shared-bn-own", GroupLayout::kSharedBnOwn},
       {"hsdp", GroupLayout::kHsdp}});
  groups.set = [&o, set = groups.set](std::string_view text) {
    o.group_layout_given = true;
    return set(text);
  };
  groups.default_depends_on = "fsdp-impl";
  params.push_back(std::move(groups));
  params.push_back(IntParam("hsdp-shard-size",
                            "With --groups hsdp: ranks per shard group (consecutive ranks)",
                            o.hsdp_shard_size));
  params.push_back(HsdpShapeParam(o));
  params.push_back(SwitchParam("offload-params",
                               "fsdp1 CPUOffload(offload_params=True), fsdp2 CPUOffloadPolicy: "
                               "sharded parameters, gradients and optimizer state in host memory",
                               o.offload_params));
  // Each implementation's own, after the shared ones.
  for (const FsdpImplOptions& entry : FsdpImplOptionsTable()) {
    for (PresetParam& param : entry.params(o)) params.push_back(std::move(param));
  }
  params.push_back(NumberParam("bucket-cap-mb",
                               "The run's bucket_cap_mb, recorded in the trace header (the cap "
                               "compare/check use without --bucket-cap-mb)",
                               o.bucket_cap_mb));
  params.push_back(NumberParam(
      "device-tflops", "Sustained TFLOP/s of one device, for compute spans", o.device_tflops));
  params.push_back(GpuParam(o));
  params.push_back(GpuEfficiencyParam(o));
  return params;
}

Status SetGenOption(GenOptions& options, std::string_view flag, std::string_view value) {
  for (PresetParam& param : GenOptionParams(options)) {
    if (param.name == flag) return param.set(value);
  }
  return InvalidArgument(fmt::format("no option --{}", flag));
}

PresetParam HsdpShapeParam(GenOptions& o) {
  PresetParam param{"hsdp-shape",
                    "R,S: hybrid sharding over R replicas of S consecutive ranks (R x S = "
                    "world size): --groups hsdp --hsdp-shard-size S (none: no hybrid sharding)",
                    ParamKind::kChoice,
                    {},
                    {},
                    {}};
  param.get = [&o] {
    if (o.group_layout != GroupLayout::kHsdp || o.hsdp_shard_size == 0) return std::string("none");
    return fmt::format("{},{}", o.world_size / o.hsdp_shard_size, o.hsdp_shard_size);
  };
  param.set = [&o](std::string_view text) {
    if (text == "none") return Status::Ok();  // the default, as get() says it: no hybrid mesh
    int replicas = 0;
    int shard = 0;
    const char* end = text.data() + text.size();
    const auto first = std::from_chars(text.data(), end, replicas);
    if (first.ec != std::errc() || first.ptr == end || *first.ptr != ',') {
      return InvalidArgument(fmt::format("'{}' is not R,S (replicas,shard size)", text));
    }
    const auto second = std::from_chars(first.ptr + 1, end, shard);
    if (second.ec != std::errc() || second.ptr != end || replicas < 1 || shard < 2) {
      return InvalidArgument(fmt::format("'{}' is not R,S with R >= 1 and S >= 2", text));
    }
    o.group_layout = GroupLayout::kHsdp;
    o.group_layout_given = true;
    o.hsdp_shard_size = shard;
    o.hsdp_replicas = replicas;
    return Status::Ok();
  };
  return param;
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
