// The one place that turns a PolicySpec into a BucketPolicy, by its strategy (fairscale's
// bucketer, DDP's reducer, ZeRO's IPG bucket, Megatron's grad buffer, FSDP2's per-group
// reduce-scatter); the engine never asks which one it runs.
#pragma once

#include <memory>

#include "policy/bucket_policy.h"
#include "policy/policy_spec.h"

namespace bucketsim {

std::unique_ptr<BucketPolicy> MakeBucketPolicy(const PolicySpec& spec, double bucket_cap_mb);

}  // namespace bucketsim
