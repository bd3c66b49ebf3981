// The options every trace preset shares: the job (world size, this rank, iterations), FSDP's
// mixed precision and resharding, the optimizer, how process groups are laid out, the run's
// bucket cap and the time model. One struct and one table of parameters (GenOptionParams), so
// each preset's flags and `gen --list` come from the same place. A preset's configuration
// derives from GenOptions and may change its defaults.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/fsdp_impl.h"
#include "core/gpu_catalog.h"
#include "core/status.h"
#include "core/trace_header.h"
#include "gen/fairscale_fsdp_options.h"
#include "gen/preset_param.h"
#include "gen/torch_fsdp1_options.h"
#include "gen/torch_fsdp2_options.h"

namespace bucketsim {

// How FSDP instances get their process group (the bucket key of fairscale's reducer).
enum class GroupLayout {
  kShared,       // one cached group object of all ranks (fairscale since #678)
  kPerInstance,  // a new group object per instance, same members (fairscale at #633)
  // fairscale's memory test at #633/#650: the main instances share one group object
  // (get_global_group()), each auto_wrap_bn wrapper (FsdpUnit::own_group) makes its own.
  kSharedBnOwn,
  // Hybrid sharding: parameters are sharded over a group of `hsdp_shard_size` consecutive
  // ranks and replicated across such groups (PyTorch FSDP HYBRID_SHARD). One shared shard-group
  // object; the cross-replica all-reduce of the reduced shard is in place and allocates nothing.
  kHsdp,
};

// torch.optim's optimizers (src/gen/optimizer_step.h): SGD without and with momentum (0.9),
// Adam, and AdamW (decoupled weight decay).
enum class OptimizerKind { kSgd, kSgdMomentum, kAdam, kAdamW };

// How torch.optim runs the step (the foreach= and fused= arguments): a Python loop over the
// parameters, _foreach_* ops over all of them at once, or one fused kernel.
enum class OptimizerImpl { kForLoop, kForeach, kFused };

struct GenOptions {
  FsdpImpl fsdp_impl = FsdpImpl::kFairscale;
  int world_size = 8;
  int rank = 0;
  int iterations = 2;
  // Mixed precision: parameters are kept in fp32 shards; compute (all-gather, activations,
  // full gradients) is in `compute_dtype` (MixedPrecision's param_dtype, fairscale's
  // compute_dtype); gradients are reduced in `reduce_dtype` (unset: the compute dtype) and
  // cast back to fp32 when that differs, else kept as views of the reduced buffer.
  // The default depends on the implementation: bf16 for fairscale (its traces have always been
  // emitted so), fp32 for FSDP1 and FSDP2, whose default is no MixedPrecision. Setting
  // --param-dtype (compute_dtype_given) wins over that default whatever the flags' order.
  DType compute_dtype = DType::kBFloat16;
  bool compute_dtype_given = false;
  std::optional<DType> reduce_dtype;
  // Free the gathered parameters after each instance's forward (re-gathered in backward). The
  // outermost instance never reshards (fairscale's disable_reshard_on_root).
  bool reshard_after_forward = true;
  OptimizerKind optimizer = OptimizerKind::kAdam;
  // The default is torch's for the implementation (DefaultOptimizerImpl, optimizer_step.h):
  // for-loop for fairscale, foreach for FSDP1 and FSDP2 on CUDA. --optimizer-impl
  // (optimizer_impl_given) wins over it whatever the flags' order.
  OptimizerImpl optimizer_impl = OptimizerImpl::kForLoop;
  bool optimizer_impl_given = false;
  // torch's default for the optimizer unless --weight-decay was given (0, AdamW 0.01).
  double weight_decay = 0;
  bool weight_decay_given = false;
  // fairscale's default is per-instance (fairscale at #633, the memory test's); PyTorch's FSDP1
  // and FSDP2 use one process group (the default group, or the mesh's) for every unit, so with
  // --fsdp-impl fsdp1|fsdp2 the layout is shared unless --groups or --hsdp-shape says otherwise.
  GroupLayout group_layout = GroupLayout::kPerInstance;
  bool group_layout_given = false;
  int hsdp_shard_size = 0;  // with kHsdp: ranks per shard group, dividing world_size
  int hsdp_replicas = 0;    // --hsdp-shape R,S: R (checked against world_size); 0: unset

  // FSDP1 CPUOffload(offload_params=True), FSDP2 CPUOffloadPolicy: the sharded parameters,
  // their gradients and the optimizer state live in host memory.
  bool offload_params = false;
  // FSDP2: reshard_after_forward=N (an int): after forward, keep the parameters sharded over
  // N ranks instead of freeing them; 0: the bool reshard_after_forward decides. Taken by an
  // implementation whose entry says reshards_to_ranks.
  int reshard_after_forward_ranks = 0;
  // Each implementation's own options (its file, gen/fsdp_impl_options.h), at their defaults
  // unless this is that implementation's run.
  FairscaleOptions fairscale;
  Fsdp1Options fsdp1;
  Fsdp2Options fsdp2;
  double bucket_cap_mb = 25.0;   // recorded in the header: the run's default cap
  double device_tflops = 400.0;  // sustained FLOP/s of one device, for compute spans
  // --gpu: the device's published rates (core/gpu_catalog.h) price the spans instead, as a
  // roofline at gpu_efficiency, with host copies and a CPU optimizer step when offloaded
  // (gen/compute_rates.h); empty: device_tflops alone.
  std::string gpu;
  GpuEfficiency gpu_efficiency;

  // The dtype gradients are reduce-scattered in.
  DType ReduceDType() const;
  // The ranks parameters are sharded over and gradients reduce-scattered over: all ranks, or
  // this rank's HSDP shard group.
  std::vector<int> ShardGroupRanks() const;
  // HSDP: this rank's replicas, the ranks at its position in every shard group (the group each
  // reduced shard is all-reduced over); empty without HSDP.
  std::vector<int> ReplicaRanks() const;
};

// torch.autocast around forward and loss, a model option of the presets: parameters are
// gathered in the param dtype (fairscale compute_dtype, fp32 in the memory test's
// fsdp_amp_compute_dtype32), each matmul/conv casts its weight to `autocast` and saves the copy
// for backward, activations are in `autocast`. Unset: no autocast.
PresetParam AutocastParam(std::optional<DType>& autocast);
// --hsdp-shape R,S: the hsdp group layout with shard groups of S ranks, R of them.
PresetParam HsdpShapeParam(GenOptions& options);
// Fails unless `autocast` is unset, fp16 or bf16.
Status ValidateAutocast(const std::optional<DType>& autocast);

// The setting that makes PyTorch run as `options` say, as a user writes it: for FSDP1
// "FullyShardedDataParallel(module, sharding_strategy=ShardingStrategy.FULL_SHARD, ...)",
// for FSDP2 "fully_shard(module, reshard_after_forward=True, ...)"; empty for fairscale (the
// implementation's entry, gen/fsdp_impl_options.h). The emitter puts it in the trace header
// (fsdp_setting), where advice quotes it.
std::string TorchFsdpSetting(const GenOptions& options);

// Fails on options that describe no job; the message names the field.
Status ValidateGenOptions(const GenOptions& options);
// "fairscale FSDP rank 0 of 8, compute bf16, reduce bf16, per-instance groups, adam, 2 iterations"
std::string DescribeGenOptions(const GenOptions& options);
// "adam", or "adam foreach, weight_decay 0.1" where the implementation or the weight decay is
// not torch's default for the run.
std::string DescribeOptimizer(const GenOptions& options);
std::string_view OptimizerName(OptimizerKind optimizer);
// "for-loop", "foreach", "fused".
std::string_view OptimizerImplName(OptimizerImpl impl);
std::string_view GroupLayoutName(GroupLayout layout);
// The parameters of `options` as CLI/--list entries, bound to it.
std::vector<PresetParam> GenOptionParams(GenOptions& options);
// Sets what `--flag value` sets (`flag` without the dashes), as the CLI would; an error names
// an unknown flag, or says why the value is refused.
Status SetGenOption(GenOptions& options, std::string_view flag, std::string_view value);

}  // namespace bucketsim
