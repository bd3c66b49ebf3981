// PyTorch DDP's Reducer: persistent flat buckets over the whole model, all-reduced.
//
// Buckets are assigned by DDP's compute_bucket_assignment_by_size
// (torch/csrc/distributed/c10d/reducer.cpp): gradients are appended to the bucket of their
// dtype in order, and a bucket closes once its bytes reach its limit (>=, so it may exceed
// it), the limits being the list given, the last repeated. Torch 1.13 to 2.x
// (torch/nn/parallel/distributed.py _ddp_init_helper): at construction, with
// find_unused_parameters=False, the limit list is [sys.maxsize], so the first iteration runs
// with ONE bucket per dtype over the whole model; at the start of the second forward,
// _rebuild_buckets reassigns them in the order the gradients became ready in the first
// backward with the limits [first_cap (dist._DEFAULT_FIRST_BUCKET_BYTES, 1 MiB), cap
// (bucket_cap_mb, 25 MiB)]. A bucket's flat `gradients` tensor lives until the next rebuild
// (never, after the second forward). Rebuilding clears the old buckets before allocating the
// new ones; with gradient_as_bucket_view the parameters' .grad are views of the old buckets
// and keep them until they are re-pointed into the new ones, i.e. after the last new bucket
// is allocated.
//
// Per gradient (the trace's rs request), its values are copied into its bucket at its offset
// (unsharded, unpadded: the parameter's numel, in the parameter's dtype); a bucket is
// all-reduced in place once all its gradients are ready and every bucket before it has been
// launched (Reducer::mark_bucket_ready launches in bucket order). Buckets still incomplete at
// the end of backward are launched then, as find_unused_parameters=True would mark them.
//
// Without gradient_as_bucket_view, param.grad is a tensor of its own that DDP copies the
// reduced bucket back into: the policy keeps one per parameter (category grad_shard), from
// the parameter's first gradient for the rest of the run (zero_grad(set_to_none=False), torch
// 1.13's default); with it, .grad is a view of the bucket and costs nothing. Not modelled:
// DDP allocates its first buckets at construction, before the trace's first event; here they
// are allocated at the first gradient that needs them. DDP replicates parameters and optimizer
// state (no sharding): those are the trace's allocations, which come from an FSDP run.
#pragma once

#include <optional>
#include <vector>

#include "policy/bucket_policy.h"

namespace bucketsim {

// DDP's compute_bucket_assignment_by_size for gradients of `bytes` and `dtype`, in the order
// given: the buckets' member indices, in the order they close (those still open at the end
// last, by dtype).
struct DdpTensor {
  Bytes bytes = 0;
  DType dtype = DType::kFloat32;
};
std::vector<std::vector<std::size_t>> DdpBucketAssignment(const std::vector<DdpTensor>& tensors,
                                                          const std::vector<Bytes>& limits);

class DdpReducer final : public BucketPolicy {
 public:
  DdpReducer(double bucket_cap_mb, double first_bucket_mb, bool gradient_as_bucket_view);

  Status Start(const TraceHeader& header) override;
  Status BeginPhase(Phase phase, PolicyHost& host) override;
  Status ReduceScatter(const ReduceScatterCall& call, PolicyHost& host) override;
  Status EndBackward(PolicyHost& host) override;
  PolicyCounters counters() const override { return counters_; }

 private:
  struct Bucket {
    std::vector<std::uint32_t> params;  // dense parameter indices, in bucket order
    DType dtype = DType::kFloat32;
    Numel numel = 0;
    std::optional<BufferId> gradients;
    const ProcessGroup* group = nullptr;  // of its first gradient this iteration
    std::size_t ready = 0;
    std::vector<ReducedSlice> slices;  // this iteration's gradients
  };
  struct Locator {
    std::size_t bucket = 0;
    Numel offset = 0;
  };

  void Assign(const std::vector<std::uint32_t>& order, const std::vector<Bytes>& limits);
  void Launch(Bucket& bucket, PolicyHost& host);

  const TraceHeader* header_ = nullptr;
  Bytes cap_bytes_;
  Bytes first_bytes_;
  bool as_view_;
  std::vector<ParamInfo> params_;  // dense index -> parameter
  std::vector<Bucket> buckets_;
  std::vector<Locator> locators_;           // by dense parameter index
  std::size_t next_bucket_ = 0;             // the next bucket to launch
  std::vector<std::uint32_t> ready_order_;  // the first backward's gradient order
  std::vector<bool> seen_;
  std::vector<std::optional<BufferId>> param_grads_;  // without gradient_as_bucket_view
  int backwards_ = 0;
  bool rebuilt_ = false;
  PolicyCounters counters_;
};

}  // namespace bucketsim
