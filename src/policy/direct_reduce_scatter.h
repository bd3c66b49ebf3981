// PyTorch FSDP1's gradient reduction (torch.distributed.fsdp.FullyShardedDataParallel, torch
// 2.6): no buckets. Each unit's post-backward hook reduce-scatters its FlatParameter's padded
// unsharded gradient on its own, straight into a fresh shard (_runtime_utils.py `_reduce_grad`:
// `new_sharded_grad = torch.empty_like(chunks[0])` from `_get_reduce_scatter_tensors`, then
// `dist.reduce_scatter_tensor(new_sharded_grad, padded_unsharded_grad)` on the post-backward
// stream). The input is the gradient itself, an allocation of the trace: it is only staged for
// the backends that move data, never charged again. The shard is delivered as the trace's
// shard_mode says (`_accumulate_sharded_grad`: kept as `_saved_grad_shard`, or first cast to
// the parameter dtype by `_cast_grad_to_param_dtype`) and the output is let go when the hook
// returns. HYBRID_SHARD's all-reduce across replicas is in place on that shard and allocates
// nothing.
#pragma once

#include "policy/bucket_policy.h"

namespace bucketsim {

class DirectReduceScatter final : public BucketPolicy {
 public:
  Status ReduceScatter(const ReduceScatterCall& call, PolicyHost& host) override;
  Status EndBackward(PolicyHost& /*host*/) override { return Status::Ok(); }
  PolicyCounters counters() const override { return counters_; }

 private:
  PolicyCounters counters_;
};

}  // namespace bucketsim
