// Which bucket policy to replay. A policy is two orthogonal choices plus a cap:
//   lifetime  always   - buffers allocated at first use of a key and never freed (pre-#633)
//             backward - buffers set up at first use in each backward, torn down after the
//                        final flush (fairscale #633)
//   key       identity - buckets keyed by (dtype, device, process-group object)
//             members  - keyed by (dtype, device, sorted member ranks): the TODO of #633
//   cap       bucket_cap_mb; <= 0 disables bucketing (every gradient bypasses)
// The named policies are presets of these; the general form is written
// "lifetime=always,key=members,cap=50" and any part left out takes the backward-only default.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace bucketsim {

enum class Lifetime { kAlways, kBackward };
enum class KeyMode { kIdentity, kMembers };

struct PolicySpec {
  std::string name;  // as the user wrote it: "backward-only", or the general form
  Lifetime lifetime = Lifetime::kBackward;
  KeyMode key = KeyMode::kIdentity;
  // Unset: the cap comes from --bucket-cap-mb, else from the trace (the root's bucket_cap_mb).
  std::optional<double> cap_mb;

  // "lifetime=backward,key=identity,cap=25" with the cap resolved.
  std::string Canonical(double resolved_cap_mb) const;
};

Result<PolicySpec> ParsePolicySpec(std::string_view text);
// always-allocated, backward-only, per-group-dedup, unbucketed: the default comparison.
std::vector<PolicySpec> DefaultPolicies();
// The names ParsePolicySpec accepts besides the general form, for --help and errors.
std::string PolicyNamesHelp();

}  // namespace bucketsim
