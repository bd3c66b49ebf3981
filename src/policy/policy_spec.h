// Which bucket policy to replay, as the user writes it on the command line.
//
// Grammar: a policy is `HEAD[,KEY=VALUE]...` where HEAD is a preset name or itself a KEY=VALUE
// part. `strategy=` names the framework whose gradient-reduction scheme is replayed (default
// fairscale); a preset fixes the strategy and some parts, and the parts after it override or
// complete them. Each strategy accepts only its own keys (an unknown or foreign key is an
// error naming the keys it accepts):
//
//   strategy   presets                 keys (default)
//   fairscale  always-allocated,       lifetime=always|backward (backward)
//              backward-only,          key=identity|members (identity)
//              per-group-dedup,        cap=MiB (--bucket-cap-mb, else the trace's); <= 0: none
//              unbucketed
//   ddp        ddp                     cap=MiB (as fairscale), first_cap=MiB (1),
//                                      grad_as_view=0|1 (0)
//   zero12     zero12                  reduce_bucket_size=elements (5e8), overlap_comm=0|1 (0)
//   zero3      zero3                   reduce_bucket_size=elements (5e8)
//   megatron   megatron                bucket_size=params (max(40M, 1M * dp)),
//                                      distributed_optimizer=0|1 (1), overlap_grad_reduce=0|1 (0),
//                                      pad_for_high_nccl_busbw=0|1 (0)
//   fsdp1      fsdp1                   (none: PyTorch FSDP1 has no buckets)
//   fsdp2      fsdp2 (inflight=1),     inflight=buffers (1); 0: every group's input is held
//              hold-until-end (0)      until the end of backward
//
// e.g. "backward-only", "lifetime=always,key=members,cap=50", "ddp,cap=50,grad_as_view=1",
// "zero12,reduce_bucket_size=2e8,overlap_comm=1", "strategy=fsdp2,inflight=2".
// The fairscale parts are two orthogonal choices plus a cap:
//   lifetime  always   - buffers allocated at first use of a key and never freed (pre-#633)
//             backward - buffers set up at first use in each backward, torn down after the
//                        final flush (fairscale #633)
//   key       identity - buckets keyed by (dtype, device, process-group object)
//             members  - keyed by (dtype, device, sorted member ranks): the TODO of #633
// What each other strategy replays, and the framework setting each key is, is in the header of
// its policy (policy/ddp_reducer.h, zero_ipg_bucket.h, megatron_grad_buffer.h,
// direct_reduce_scatter.h, group_reduce_scatter.h) and in docs/policies.md.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/fsdp_impl.h"
#include "core/status.h"
#include "core/units.h"

namespace bucketsim {

enum class Strategy { kFairscale, kDdp, kZero12, kZero3, kMegatron, kFsdp1, kFsdp2 };
enum class Lifetime { kAlways, kBackward };
enum class KeyMode { kIdentity, kMembers };

std::string_view StrategyName(Strategy strategy);  // "fairscale", "ddp", ...

struct PolicySpec {
  std::string name;  // as the user wrote it: "backward-only", "ddp,cap=50", the general form
  Strategy strategy = Strategy::kFairscale;
  // fairscale
  Lifetime lifetime = Lifetime::kBackward;
  KeyMode key = KeyMode::kIdentity;
  // fairscale and ddp: bucket_cap_mb. Unset: from --bucket-cap-mb, else from the trace (the
  // root's bucket_cap_mb). Strategies without a MiB cap fix it at 0.
  std::optional<double> cap_mb;
  // ddp
  double first_cap_mb = 1.0;  // dist._DEFAULT_FIRST_BUCKET_BYTES = 1 MiB
  bool grad_as_view = false;  // gradient_as_bucket_view
  // zero12, zero3
  Numel reduce_bucket_size = 500'000'000;  // elements, DeepSpeed's default 5e8
  bool overlap_comm = false;               // zero12: None -> False for stages 1 and 2
  // megatron
  std::optional<Numel> bucket_size;  // params; unset: max(40M, 1M * dp)
  bool distributed_optimizer = true;
  bool overlap_grad_reduce = false;
  bool pad_for_high_nccl_busbw = false;
  // fsdp2: reduce-scatter input buffers in flight; 0: all (held until the end of backward)
  int inflight = 1;
  // fsdp1, fsdp2: the framework's settings as the trace names them (its fsdp_setting), for the
  // advice; not part of the grammar (the replay sets it from a trace of that implementation).
  std::string setting;

  // The spec with every part resolved: "lifetime=backward,key=identity,cap=25" for fairscale,
  // "strategy=ddp,cap=25,first_cap=1,grad_as_view=0", ...
  std::string Canonical(double resolved_cap_mb) const;
};

// Parses the grammar above; Canonical()'s output parses back to the same spec.
Result<PolicySpec> ParsePolicySpec(std::string_view text);
// The framework's own setting this spec replays, as a user writes it in that framework, with
// the cap resolved: "DistributedDataParallel(bucket_cap_mb=25, gradient_as_bucket_view=False)",
// "zero_optimization: {stage: 2, reduce_bucket_size: 500000000, overlap_comm: false}", ...
std::string FrameworkSetting(const PolicySpec& spec, double resolved_cap_mb);
// "fairscale FSDP", "PyTorch DDP", "DeepSpeed ZeRO-1/2", "DeepSpeed ZeRO-3", "Megatron-Core DDP",
// "PyTorch FSDP1", "PyTorch FSDP2", "Megatron-FSDP" (hold-until-end).
std::string_view FrameworkName(const PolicySpec& spec);
// always-allocated, backward-only, per-group-dedup, unbucketed: the default comparison.
std::vector<PolicySpec> DefaultPolicies();
// The default comparison of a trace emitted for `fsdp_impl` (its header's): that
// implementation's own policy first (core/fsdp_impl.h names it), then the default ones as
// what-ifs. None, or fairscale (no policy of its own): DefaultPolicies().
std::vector<PolicySpec> DefaultPoliciesFor(std::optional<FsdpImpl> fsdp_impl);
// The implementation whose own policy's strategy `strategy` is (fsdp1, fsdp2); none for the
// others (fairscale's bucketer is a choice, the other frameworks are not FSDP implementations).
std::optional<FsdpImpl> ImplementationOf(Strategy strategy);
// Every named preset, fairscale's and the other frameworks' (the fuzzer replays them all).
std::vector<PolicySpec> NamedPolicies();
// The names ParsePolicySpec accepts besides the general form, for --help and errors.
std::string PolicyNamesHelp();

}  // namespace bucketsim
