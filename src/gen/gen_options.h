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
#include "core/status.h"
#include "core/trace_header.h"
#include "gen/preset_param.h"

namespace bucketsim {

// How FSDP instances get their process group (the bucket key of fairscale's reducer).
enum class GroupLayout {
  kShared,       // one cached group object of all ranks (fairscale since #678)
  kPerInstance,  // a new group object per instance, same members (fairscale at #633)
  // fairscale's memory test at #633/#650: the main instances share one group object
  // (get_global_group()), each auto_wrap_bn wrapper (GenInstance::own_group) makes its own.
  kSharedBnOwn,
  // Hybrid sharding: parameters are sharded over a group of `hsdp_shard_size` consecutive
  // ranks and replicated across such groups (PyTorch FSDP HYBRID_SHARD). One shared shard-group
  // object; the cross-replica all-reduce of the reduced shard is in place and allocates nothing.
  kHsdp,
};

enum class OptimizerKind { kSgd, kSgdMomentum, kAdam };

struct GenOptions {
  int world_size = 8;
  int rank = 0;
  int iterations = 2;
  // Mixed precision: parameters are kept in fp32 shards; compute (all-gather, activations,
  // full gradients) is in `compute_dtype` (MixedPrecision's param_dtype, fairscale's
  // compute_dtype); gradients are reduced in `reduce_dtype` (unset: the compute dtype) and
  // cast back to fp32 when that differs, else kept as views of the reduced buffer.
  DType compute_dtype = DType::kBFloat16;
  std::optional<DType> reduce_dtype;
  // fairscale's fp32_reduce_scatter: with mixed precision the post-backward hook copies the
  // gradient to fp32 and reduces that. The same as reduce_dtype fp32.
  bool fp32_reduce_scatter = false;
  // Free the gathered parameters after each instance's forward (re-gathered in backward). The
  // outermost instance never reshards (fairscale's disable_reshard_on_root).
  bool reshard_after_forward = true;
  OptimizerKind optimizer = OptimizerKind::kAdam;
  GroupLayout group_layout = GroupLayout::kPerInstance;
  int hsdp_shard_size = 0;       // with kHsdp: ranks per shard group, dividing world_size
  double bucket_cap_mb = 25.0;   // recorded in the header: the run's default cap
  double device_tflops = 400.0;  // sustained FLOP/s of one device, for compute spans

  // The dtype gradients are reduce-scattered in.
  DType ReduceDType() const;
  // The ranks parameters are sharded over and gradients reduce-scattered over: all ranks, or
  // this rank's HSDP shard group.
  std::vector<int> ShardGroupRanks() const;
};

// torch.autocast around forward and loss, a model option of the presets: parameters are
// gathered in the param dtype (fairscale compute_dtype, fp32 in the memory test's
// fsdp_amp_compute_dtype32), each matmul/conv casts its weight to `autocast` and saves the copy
// for backward, activations are in `autocast`. Unset: no autocast.
PresetParam AutocastParam(std::optional<DType>& autocast);
// Fails unless `autocast` is unset, fp16 or bf16.
Status ValidateAutocast(const std::optional<DType>& autocast);

// Fails on options that describe no job; the message names the field.
Status ValidateGenOptions(const GenOptions& options);
// "fairscale FSDP rank 0 of 8, compute bf16, reduce bf16, per-instance groups, adam, 2 iterations"
std::string DescribeGenOptions(const GenOptions& options);
std::string_view OptimizerName(OptimizerKind optimizer);
std::string_view GroupLayoutName(GroupLayout layout);
// The parameters of `options` as CLI/--list entries, bound to it.
std::vector<PresetParam> GenOptionParams(GenOptions& options);

}  // namespace bucketsim
