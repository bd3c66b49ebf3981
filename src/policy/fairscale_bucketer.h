// fairscale's ReduceScatterBucketer (fairscale/internal/reduce_scatter_bucketer.py), byte for
// byte as reference/fsdp_semantics.md §1 and §9 describe it, with its two degrees of freedom made
// explicit: when bucket buffers live (Lifetime) and what identifies a bucket (KeyMode).
//
// Per request of n elements per rank, element size e, group size ws, shard size S:
//   n > S      bypass: output (n*e), then cat temporary (ws*n*e), collective, callback; both
//              let go on return. No bucket is touched.
//   otherwise  the bucket for the key is created (data ws*S*e, then output S*e) or set up again
//              after a teardown; if n > S - offset the bucket is flushed first; a stack
//              temporary (ws*n*e) is allocated and let go; the callback waits for the flush.
// Flush of a non-empty bucket: a .contiguous() temporary (ws*offset*e) when 0 < offset < S and
// ws > 1, the collective, the temporary let go, every callback in order with a view of the
// current output shard, then a fresh output shard (S*e) is allocated and only then the old one
// is let go: it lives on as long as gradient views hold it.
#pragma once

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "policy/bucket_policy.h"
#include "policy/policy_spec.h"

namespace bucketsim {

class FairscaleBucketer final : public BucketPolicy {
 public:
  FairscaleBucketer(Lifetime lifetime, KeyMode key, double bucket_cap_mb);

  Status ReduceScatter(const ReduceScatterCall& call, PolicyHost& host) override;
  Status EndBackward(PolicyHost& host) override;
  PolicyCounters counters() const override { return counters_; }

  // ReduceScatterBucketer.flush(): every bucket, in creation order.
  Status Flush(PolicyHost& host);
  // ReduceScatterBucketer.teardown(): frees data and the current output of every bucket;
  // fails, as fairscale's assert does, on a bucket that still holds data or callbacks.
  Status Teardown(PolicyHost& host);

 private:
  struct Bucket {
    const ProcessGroup* group = nullptr;  // the first group registered under this key
    DType dtype = DType::kFloat32;
    Numel shard_size = 0;
    std::optional<BufferId> data;
    std::optional<BufferId> output;
    Numel offset = 0;
    std::vector<ReduceScatterCall> callbacks;
  };
  using Key = std::pair<DType, GroupId>;

  Status Bypass(const ReduceScatterCall& call, Numel n, PolicyHost& host);
  Bucket& GetBucket(const ReduceScatterCall& call, Numel shard_size, PolicyHost& host);
  void Setup(Bucket& bucket, PolicyHost& host);
  void FlushBucket(Bucket& bucket, PolicyHost& host);
  // The group that stands for `group` in a bucket key: itself by identity, or the first group
  // seen with the same sorted members.
  GroupId KeyGroup(const ProcessGroup& group);

  Lifetime lifetime_;
  KeyMode key_mode_;
  double bucket_cap_mb_;
  std::vector<Bucket> buckets_;  // creation order, as the Python dict keeps it
  std::map<Key, std::size_t> bucket_index_;
  std::map<std::vector<int>, GroupId> group_by_members_;
  std::map<GroupId, GroupId> key_group_;
  PolicyCounters counters_;
  std::vector<ReducedSlice> slices_;  // scratch of FlushBucket
};

}  // namespace bucketsim
