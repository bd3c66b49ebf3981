// fairscale's entry of the implementations' table (gen/fsdp_impl_options.h).
#include "gen/fairscale_fsdp_options.h"

#include <fmt/format.h>

#include "gen/fairscale_fsdp.h"
#include "gen/fsdp_impl_options.h"

namespace bucketsim {
namespace {

std::vector<PresetParam> Params(GenOptions& o) {
  std::vector<PresetParam> params;
  params.push_back(BoolParam("fp32-reduce-scatter",
                             "fairscale fp32_reduce_scatter: copy the gradient to fp32 and reduce "
                             "in fp32",
                             o.fairscale.fp32_reduce_scatter));
  return params;
}

Status Validate(const GenOptions& o) {
  // fairscale reduces in the compute dtype, or in fp32 with fp32_reduce_scatter
  // (fully_sharded_data_parallel.py _post_backward_hook).
  const DType compute = o.compute_dtype;
  const DType reduce = o.reduce_dtype.value_or(compute);
  if (reduce != compute && reduce != DType::kFloat32) {
    return InvalidArgument(fmt::format("reduce_dtype must be compute_dtype ({}) or fp32 (got {})",
                                       DTypeName(compute), DTypeName(reduce)));
  }
  if (o.fairscale.fp32_reduce_scatter && reduce != DType::kFloat32 && o.reduce_dtype) {
    return InvalidArgument(fmt::format(
        "fp32_reduce_scatter reduces in fp32, but reduce_dtype is {}", DTypeName(reduce)));
  }
  return Status::Ok();
}

// "fairscale FSDP rank 0 of 8, compute bf16, reduce bf16, per-instance groups, adam, 2
// iterations".
std::string Describe(const GenOptions& o) {
  std::string layout = fmt::format("{} groups", GroupLayoutName(o.group_layout));
  if (o.group_layout == GroupLayout::kHsdp) {
    layout = fmt::format("hsdp shard groups of {}", o.hsdp_shard_size);
  }
  return fmt::format("fairscale FSDP rank {} of {}, compute {}, reduce {}, {}, {}, {} iterations{}",
                     o.rank, o.world_size, DTypeName(o.compute_dtype), DTypeName(o.ReduceDType()),
                     layout, DescribeOptimizer(o), o.iterations,
                     o.reshard_after_forward ? "" : ", no reshard after forward");
}

}  // namespace

FsdpImplOptions FairscaleFsdpOptions() {
  FsdpImplOptions entry;
  entry.impl = FsdpImpl::kFairscale;
  entry.compute_dtype = DType::kBFloat16;
  entry.group_layout = GroupLayout::kPerInstance;
  entry.optimizer_impl = OptimizerImpl::kForLoop;
  // bf16: its traces have always been emitted so; per-instance groups: fairscale at #633 (the
  // memory test's); for-loop: its FlatParameter is its own Parameter subclass, which torch's
  // _default_to_fused_or_foreach does not accept, and the torch 1.x of its day defaulted to
  // for-loop anyway.
  entry.params = Params;
  entry.said_elsewhere = {{"fp32-reduce-scatter", "--reduce-dtype fp32"}};
  entry.validate = Validate;
  // An instance's own reshard_after_forward and own_group are fairscale's wrapper settings
  // (auto_wrap_bn, a preset's last unit).
  entry.own_groups = true;
  entry.describe = Describe;
  entry.make = MakeFairscaleFsdp;
  return entry;
}

}  // namespace bucketsim
