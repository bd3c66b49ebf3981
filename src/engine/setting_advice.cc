#include "engine/setting_advice.h"

namespace bucketsim {
namespace {

// fairscale: `_get_shard_size` returns 0 for bucket_cap_mb <= 0, so every gradient is
// reduce-scattered on its own (reference/fsdp_semantics.md §1.2); PR #633 (a5594032,
// 2021-04-27) made the buffers live only in backward and left the group-members key a TODO.
void FairscaleAdvice(const PolicySpec& spec, double cap_mb, SettingAdvice& s) {
  if (cap_mb <= 0) {
    s.note = "bucket_cap_mb <= 0 disables fairscale's reduce-scatter bucketing";
    s.simplicity = Simplicity::kUnbucketed;
    return;
  }
  const bool always = spec.lifetime == Lifetime::kAlways;
  const bool members = spec.key == KeyMode::kMembers;
  if (!always && !members) {
    s.note =
        "upstream fairscale since PR #633 (a5594032, 2021-04-27): bucket buffers live only "
        "in backward";
    return;
  }
  s.upstream = false;
  if (!always) {
    s.note =
        "not upstream: needs ReduceScatterBucketer._get_bucket to key buckets by the group's "
        "member ranks (the TODO PR #633 left there)";
    s.simplicity = Simplicity::kPatched;
  } else if (!members) {
    s.note =
        "fairscale before PR #633 (a5594032, 2021-04-27) kept bucket buffers for the whole "
        "run; later releases have no switch for it";
    s.simplicity = Simplicity::kOldRelease;
  } else {
    s.note = "not upstream: fairscale before PR #633 with buckets keyed by member ranks";
    s.simplicity = Simplicity::kOldReleaseAndPatched;
  }
}

}  // namespace

SettingAdvice SettingFor(const PolicySpec& spec, double cap_mb) {
  SettingAdvice s;
  s.strategy = spec.strategy;
  s.framework = std::string(FrameworkName(spec));
  s.setting =
      FrameworkSetting(spec, spec.strategy == Strategy::kFairscale && cap_mb <= 0 ? 0 : cap_mb);
  switch (spec.strategy) {
    case Strategy::kFairscale:
      FairscaleAdvice(spec, cap_mb, s);
      break;
    case Strategy::kFsdp2:
      if (spec.inflight == 0) {
        // The pattern users report for Megatron-FSDP (reference/anchors.md §1.1).
        s.upstream = false;
        s.note =
            "every reduce-scatter input held to the end of backward: a pattern reported for "
            "Megatron-FSDP, not a setting to choose";
        s.simplicity = Simplicity::kPatched;
      } else {
        s.note = spec.inflight == 1 ? "FSDP2's default: one reduce-scatter input in flight"
                                    : "set_reduce_scatter_max_input_buffers: not confirmed in a "
                                      "PyTorch release (reference/anchors.md)";
      }
      break;
    case Strategy::kFsdp1:
      s.note =
          "PyTorch FSDP1 has no reduce-scatter buckets: each unit's gradient is reduced on its "
          "own (_runtime_utils.py _reduce_grad)";
      break;
    case Strategy::kDdp:
    case Strategy::kZero12:
    case Strategy::kZero3:
    case Strategy::kMegatron:
      s.note = "an upstream setting";
      break;
  }
  return s;
}

}  // namespace bucketsim
