#include "engine/framework_setting.h"

#include <fmt/format.h>

namespace bucketsim {
namespace {

// fairscale FSDP's constructor argument (fairscale/nn/data_parallel/fully_sharded_data_parallel.py,
// `bucket_cap_mb: int = 25`; ReduceScatterBucketer takes a float too, and `_get_shard_size`
// returns 0 for a cap <= 0: every gradient is reduce-scattered on its own,
// reference/fsdp_semantics.md §1.2). `{}` prints the shortest text that reads back as the cap.
std::string FairscaleCall(double cap_mb) {
  return fmt::format("FullyShardedDataParallel(module, bucket_cap_mb={})", cap_mb);
}

}  // namespace

FrameworkSetting SettingFor(const PolicySpec& spec, double cap_mb) {
  FrameworkSetting s;
  s.framework = "fairscale";
  if (cap_mb <= 0) {
    s.setting = FairscaleCall(0);
    s.note = "bucket_cap_mb <= 0 disables fairscale's reduce-scatter bucketing";
    s.simplicity = Simplicity::kUnbucketed;
    return s;
  }
  s.setting = FairscaleCall(cap_mb);
  const bool always = spec.lifetime == Lifetime::kAlways;
  const bool members = spec.key == KeyMode::kMembers;
  if (!always && !members) {
    s.note =
        "upstream fairscale since PR #633 (a5594032, 2021-04-27): bucket buffers live only "
        "in backward";
    s.simplicity = Simplicity::kBackwardOnly;
    return s;
  }
  s.upstream = false;
  if (!always) {
    s.note =
        "not upstream: needs ReduceScatterBucketer._get_bucket to key buckets by the group's "
        "member ranks (the TODO PR #633 left there)";
    s.simplicity = Simplicity::kPerGroupDedup;
  } else if (!members) {
    s.note =
        "fairscale before PR #633 (a5594032, 2021-04-27) kept bucket buffers for the whole "
        "run; later releases have no switch for it";
    s.simplicity = Simplicity::kAlwaysAllocated;
  } else {
    s.note = "not upstream: fairscale before PR #633 with buckets keyed by member ranks";
    s.simplicity = Simplicity::kAlwaysDedup;
  }
  return s;
}

}  // namespace bucketsim
