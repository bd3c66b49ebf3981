// PyTorch FSDP2's gradient reduction (`fully_shard`), and the hold-until-end pattern.
//
// FSDP2 has no size-capped bucket: each fully_shard group (an FSDP instance of our traces) is
// reduced by one reduce-scatter once every gradient of the group is ready
// (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py foreach_reduce). Its input is the
// group's gradients, each padded on dim 0 to a multiple of the group size, laid out by
// torch._chunk_cat as (group size, columns): a rank's row is its chunk of every gradient,
// in the reduce dtype (reference/anchors.md §1.7). The trace's per-rank numel is the chunk
// (fairscale's flat padding; equal to dim-0 padding for 1-D and dim-0-divisible parameters,
// which is all the trace can express: it has no shapes). The output is the rank's row, fresh
// per group (PR #132445: allocated in the default stream, held to the end of backward); the
// sharded gradients are views of it or casts from it, as the trace's shard_mode says.
//
// Input lifetime: FSDP keeps `inflight` reduce-scatter inputs (default 1, PR #186000's
// set_reduce_scatter_max_input_buffers): before the next group's copy-in, the oldest input
// beyond the limit is waited for and dropped. inflight = 0 keeps every input until the end of
// backward: Megatron-FSDP's dynamic buckets as reported in ISEEKYAN/Megatron-LM#158
// (hold-until-end, O(layers) live inputs).
#pragma once

#include <deque>
#include <map>
#include <vector>

#include "policy/bucket_policy.h"

namespace bucketsim {

class GroupReduceScatter final : public BucketPolicy {
 public:
  explicit GroupReduceScatter(int inflight) : inflight_(inflight) {}

  Status Start(const TraceHeader& header) override;
  Status ReduceScatter(const ReduceScatterCall& call, PolicyHost& host) override;
  Status EndBackward(PolicyHost& host) override;
  PolicyCounters counters() const override { return counters_; }

 private:
  Status ReduceGroup(std::vector<ReduceScatterCall>& group, PolicyHost& host);

  int inflight_;
  const TraceHeader* header_ = nullptr;
  std::map<std::uint32_t, std::vector<ReduceScatterCall>> pending_;  // by FSDP instance
  std::vector<std::uint32_t> pending_order_;                         // instances, first seen
  std::deque<BufferId> inputs_;                                      // oldest first
  std::vector<BufferId> outputs_;                                    // held to the end of backward
  std::vector<ReducedSlice> slices_;
  PolicyCounters counters_;
};

}  // namespace bucketsim
