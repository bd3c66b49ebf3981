#include "policy/make_policy.h"

#include "policy/fairscale_bucketer.h"

namespace bucketsim {

std::unique_ptr<BucketPolicy> MakeBucketPolicy(const PolicySpec& spec, double bucket_cap_mb) {
  return std::make_unique<FairscaleBucketer>(spec.lifetime, spec.key, bucket_cap_mb);
}

}  // namespace bucketsim
