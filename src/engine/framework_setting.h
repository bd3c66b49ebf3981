// What a user types to get a policy in the framework it comes from, and how simple a policy is
// to adopt: the one place that maps a policy spec (policy/policy_spec.h) at a resolved cap to
// that framework's setting. `sweep` prints it beside its recommendation and orders ties by
// `simplicity`. Only fairscale's policies are mapped so far; a policy added for another
// framework adds its case here.
#pragma once

#include <string>

#include "policy/policy_spec.h"

namespace bucketsim {

// How much it takes to adopt a policy, the order in which `sweep` prefers configurations whose
// figures tie (smaller first):
//   0 unbucketed       - bucket_cap_mb <= 0: no bucket buffers at all
//   1 backward-only    - upstream fairscale FSDP as it is since PR #633, bucket_cap_mb=X
//   2 per-group-dedup  - a patch to fairscale's ReduceScatterBucketer._get_bucket (not upstream)
//   3 always-allocated - fairscale before PR #633: an old release, buffers held through the step
//   4 lifetime=always,key=members - both of the last two
enum class Simplicity : int {
  kUnbucketed = 0,
  kBackwardOnly = 1,
  kPerGroupDedup = 2,
  kAlwaysAllocated = 3,
  kAlwaysDedup = 4,
};

struct FrameworkSetting {
  std::string framework;  // "fairscale"
  std::string setting;    // what to write: "FullyShardedDataParallel(module, bucket_cap_mb=25)"
  bool upstream = true;   // false: the framework has no switch for it; `note` says what it takes
  std::string note;       // where the behaviour comes from, and what it takes when not upstream
  Simplicity simplicity = Simplicity::kBackwardOnly;
};

// The setting for `spec` at `cap_mb` (the resolved cap; <= 0 is unbucketed whatever the
// lifetime and key). The cap is written so that it reads back as the same double.
FrameworkSetting SettingFor(const PolicySpec& spec, double cap_mb);

}  // namespace bucketsim
