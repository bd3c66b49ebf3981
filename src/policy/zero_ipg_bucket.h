// DeepSpeed ZeRO's independent-partition-gradient (IPG) bucket, stages 1/2 and 3.
//
// Gradients are copied, as they become ready, into a flat IPG buffer of reduce_bucket_size
// elements (contiguous_gradients=True, the default); when the next one would not fit
// (elements_in_ipg_bucket + numel > reduce_bucket_size) the bucket's contents are reduced and
// each rank keeps its partition, then the bucket starts over. A gradient larger than the whole
// bucket is reduced on its own (stage_1_and_2.py extra_large_param_to_reduce).
//   zero12  stage_1_and_2.py backward(): the IPG buffer is allocated at each backward() and
//           released in independent_gradient_partition_epilogue (_release_ipg_buffers) at its
//           end; with overlap_comm a second buffer alternates with it (2 x reduce_bucket_size).
//   zero3   stage3.py: __ipg_bucket_flat_buffer is allocated once (optimizer init) and kept.
// Both keep the reduced partitions in a flat buffer of this rank's partition of every gradient
// (ZeRO-2 grads_in_partition, ZeRO-3 grad_partitions_flat_buffer), allocated at the first
// reduction and kept. reference/anchors.md §1.3 (the 4.5x factor of the HF docs is gone since
// DeepSpeed #1042).
//
// Modelled: the buffers' bytes and lifetimes, and one reduce-scatter of the filled part of the
// bucket per reduction (kind reduce_scatter, in place: rank p receives the p-th of group-size
// equal ranges, the filled part rounded up to a multiple of the group size). DeepSpeed reduces
// by partition boundaries that follow the whole model's flat layout (dist.reduce per rank
// range, or a reduce-scatter when ranges align); the bytes on the wire are the same, which
// rank receives which element is not. Gradients are in the parameter's dtype and numel (the
// trace header's), with the trace's process group. Not modelled: the extra-large gradient is
// reduced from param.grad in place; here it is copied into a temporary of its size first
// (category rs_cat_temp). The copy of a rank's range into the partition buffer is accounted,
// not executed.
#pragma once

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "policy/bucket_policy.h"

namespace bucketsim {

class ZeroIpgBucket final : public BucketPolicy {
 public:
  enum class Stage { kOneTwo, kThree };
  ZeroIpgBucket(Stage stage, Numel reduce_bucket_size, bool overlap_comm);

  Status Start(const TraceHeader& header) override;
  Status BeginPhase(Phase phase, PolicyHost& host) override;
  Status ReduceScatter(const ReduceScatterCall& call, PolicyHost& host) override;
  Status EndBackward(PolicyHost& host) override;
  PolicyCounters counters() const override { return counters_; }

 private:
  // One IPG state per (dtype, group members): DeepSpeed has one per optimizer, whose dtype and
  // data-parallel group are fixed; FSDP traces give each instance its own group object, which
  // all stand for the one data-parallel group (the first seen carries the collectives).
  struct Ipg {
    const ProcessGroup* group = nullptr;
    DType dtype = DType::kFloat32;
    std::vector<std::optional<BufferId>> buffers;  // 1, or 2 with overlap_comm
    std::size_t index = 0;                         // ipg_index
    Numel elements = 0;                            // elements_in_ipg_bucket
    std::vector<ReducedSlice> slices;
    std::optional<BufferId> partition;  // the kept partitioned gradients
  };
  using Key = std::pair<DType, std::vector<int>>;

  void AllocateBuffers(Ipg& ipg, PolicyHost& host);
  void Reduce(Ipg& ipg, PolicyHost& host);
  void ReduceAlone(Ipg& ipg, const ReduceScatterCall& call, Numel numel, PolicyHost& host);
  void KeepPartition(Ipg& ipg, PolicyHost& host);

  Stage stage_;
  Numel capacity_;
  bool overlap_;
  const TraceHeader* header_ = nullptr;
  std::map<DType, Numel> model_numel_;  // every parameter's numel, by dtype
  std::map<Key, std::size_t> index_;
  std::vector<Ipg> ipgs_;  // creation order
  PolicyCounters counters_;
};

}  // namespace bucketsim
