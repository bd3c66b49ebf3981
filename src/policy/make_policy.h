// The one place that turns a PolicySpec into a BucketPolicy. Policies modelling other systems
// (DDP reducer buckets, FSDP2's in-flight buffer) are added here, never in the engine.
#pragma once

#include <memory>

#include "policy/bucket_policy.h"
#include "policy/policy_spec.h"

namespace bucketsim {

std::unique_ptr<BucketPolicy> MakeBucketPolicy(const PolicySpec& spec, double bucket_cap_mb);

}  // namespace bucketsim
