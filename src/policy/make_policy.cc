#include "policy/make_policy.h"

#include "policy/ddp_reducer.h"
#include "policy/direct_reduce_scatter.h"
#include "policy/fairscale_bucketer.h"
#include "policy/group_reduce_scatter.h"
#include "policy/megatron_grad_buffer.h"
#include "policy/zero_ipg_bucket.h"

namespace bucketsim {

std::unique_ptr<BucketPolicy> MakeBucketPolicy(const PolicySpec& spec, double bucket_cap_mb) {
  switch (spec.strategy) {
    case Strategy::kFairscale:
      break;
    case Strategy::kDdp:
      return std::make_unique<DdpReducer>(bucket_cap_mb, spec.first_cap_mb, spec.grad_as_view);
    case Strategy::kZero12:
      return std::make_unique<ZeroIpgBucket>(ZeroIpgBucket::Stage::kOneTwo, spec.reduce_bucket_size,
                                             spec.overlap_comm);
    case Strategy::kZero3:
      return std::make_unique<ZeroIpgBucket>(ZeroIpgBucket::Stage::kThree, spec.reduce_bucket_size,
                                             false);
    case Strategy::kMegatron:
      return std::make_unique<MegatronGradBuffer>(
          MegatronLayoutOptions{spec.bucket_size, spec.distributed_optimizer,
                                spec.overlap_grad_reduce, spec.pad_for_high_nccl_busbw});
    case Strategy::kFsdp1:
      return std::make_unique<DirectReduceScatter>();
    case Strategy::kFsdp2:
      return std::make_unique<GroupReduceScatter>(spec.inflight);
  }
  return std::make_unique<FairscaleBucketer>(spec.lifetime, spec.key, bucket_cap_mb);
}

}  // namespace bucketsim
