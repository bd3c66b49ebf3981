// What a user needs to adopt a policy that `sweep` recommends: the setting in the framework it
// comes from (policy_spec.h's FrameworkSetting, the one place that spells it), whether that
// framework has a switch for it, and how simple it is to adopt. `sweep` prints it beside its
// recommendation and orders ties by `simplicity`.
#pragma once

#include <string>

#include "policy/policy_spec.h"

namespace bucketsim {

// How much it takes to adopt a policy, the order in which `sweep` prefers configurations whose
// figures tie (smaller first):
//   0 unbucketed       - fairscale's bucket_cap_mb <= 0: no bucket buffers at all
//   1 upstream         - a setting of an upstream release: fairscale's backward-only (since PR
//                        #633), and the DDP, ZeRO, Megatron and FSDP2 settings
//   2 patched          - a patch no release has: per-group-dedup (the TODO in fairscale's
//                        _get_bucket); hold-until-end, a pattern no framework offers as a setting
//   3 old release      - always-allocated: fairscale before PR #633, buffers held through the step
//   4 both             - lifetime=always,key=members
enum class Simplicity : int {
  kUnbucketed = 0,
  kUpstream = 1,
  kPatched = 2,
  kOldRelease = 3,
  kOldReleaseAndPatched = 4,
};

struct SettingAdvice {
  Strategy strategy = Strategy::kFairscale;
  std::string framework;  // FrameworkName: "fairscale FSDP", "PyTorch DDP", ...
  std::string setting;    // FrameworkSetting: "FullyShardedDataParallel(bucket_cap_mb=25)", ...
  bool upstream = true;   // false: no release has a switch for it; `note` says what it takes
  std::string note;       // where the behaviour comes from, and what it takes when not upstream
  Simplicity simplicity = Simplicity::kUpstream;
};

// The advice for `spec` at `cap_mb` (the resolved cap; for fairscale <= 0 is unbucketed whatever
// the lifetime and key).
SettingAdvice SettingFor(const PolicySpec& spec, double cap_mb);

}  // namespace bucketsim
