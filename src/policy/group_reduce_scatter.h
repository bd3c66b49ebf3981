// PyTorch FSDP2's gradient reduction (`fully_shard`), and the hold-until-end pattern.
//
// FSDP2 has no size-capped bucket: each fully_shard group (an FSDP instance of our traces) is
// reduced by one reduce-scatter in its post-backward, once every gradient of the group is
// ready (torch 2.6 torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py post_backward ->
// _fsdp_collectives.py foreach_reduce). Its input (reduce_scatter_input = torch.empty, in the
// reduce dtype, on the current stream) is the group's gradients, each padded on dim 0 to a
// multiple of the group size, laid out by torch._chunk_cat as (group size, columns) in the
// group's parameter order: a rank's row is its chunk of every gradient. The trace's per-rank
// numel is the chunk (ceil(numel / group size); the FSDP2 emitter declares each parameter with
// its dim-0 padded numel so that the chunk is the padded shard). The output
// (reduce_scatter_input.new_empty) is the rank's row, fresh per group.
//
// When each buffer is made: foreach_reduce allocates the input, copies the gradients in, frees
// them (unsharded_grads.clear()), then allocates the output. The trace tells the policy so by
// its order: the group's first request allocates the input (its size from the header: every
// parameter of the group), the emitter frees the unsharded gradients before the group's last
// request, and the last request allocates the output and reduces.
//
// A parameter no gradient reached (requests with shard "no_grad") is left out: foreach_reduce
// gets the group's fsdp_params_with_grad alone, so the input's columns are theirs, and a group
// none of whose parameters got a gradient is not reduced at all (post_backward returns before
// it, and the previous input stays in flight). The emitter puts a group's no_grad requests
// before its others, which the first of them sizes the input from.
//
// What the sharded gradients keep: an output in the parameters' dtype is viewed by them
// (as_strided) until zero_grad (requests with shard "view"); an output in another dtype is cast
// to it as one tensor (_to_dtype_if_needed(reduce_output, orig_dtype)), which the gradients
// view, and the output itself is freed at once (requests with shard "cast").
//
// Input lifetime: FSDP keeps `inflight` reduce-scatter inputs (default 1: 2.6's
// comm_ctx.reduce_scatter_state, dropped at the next group's post_backward before its
// foreach_reduce, and the last one by the root's final callback; PR #186000's
// set_reduce_scatter_max_input_buffers generalises it). inflight = 0 keeps every input until
// the end of backward: Megatron-FSDP's dynamic buckets as reported in ISEEKYAN/Megatron-LM#158
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
  // A group whose requests are arriving: its input, allocated at the first.
  struct Group {
    std::vector<ReduceScatterCall> calls;
    std::vector<bool> no_grad;  // by parameter: left out of this reduction
    std::size_t without_grad = 0;
    BufferId input = 0;
    Numel columns = 0;
    bool reduced = false;  // at least once: a bucket of the counters
  };
  Status BeginGroup(const ReduceScatterCall& call, Group& group, PolicyHost& host);
  Status ReduceGroup(Group& group, PolicyHost& host);
  // The request's first column in its group's input: the chunks of the parameters before it
  // that are reduced.
  Numel ColumnOf(const ReduceScatterCall& call, const Group& group) const;
  // A group's reduction is over: the next backward's requests start a new one.
  static void Reset(Group& group);

  int inflight_;
  const TraceHeader* header_ = nullptr;
  std::map<std::uint32_t, Group> pending_;    // by FSDP instance
  std::vector<std::uint32_t> pending_order_;  // instances, first seen
  std::deque<BufferId> inputs_;               // oldest first
  std::vector<BufferId> outputs_;             // held to the end of backward
  std::vector<ReducedSlice> slices_;
  PolicyCounters counters_;
};

}  // namespace bucketsim
