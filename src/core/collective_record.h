// One collective a policy issued, as the report's collective log shows it. The log is what
// lets anyone check a replay against the framework's own code: same order, same groups, same
// sizes. fairscale and FSDP2 reduce-scatter a (group size x columns) bucket whose rows are the
// ranks' chunks (bypass, bucket_flush); DeepSpeed ZeRO and Megatron's distributed optimizer
// reduce-scatter a flat bucket split into group-size equal ranges (reduce_scatter); DDP and
// Megatron without the distributed optimizer all-reduce a flat bucket (all_reduce). The
// framework's own collectives on the trace's allocations are logged with them, in issue order:
// PyTorch FSDP's parameter all-gathers (all_gather), NO_SHARD's gradient all-reduce, and
// HYBRID_SHARD's all-reduce of each reduced shard over its replicas (all_reduce).
#pragma once

#include <optional>
#include <string_view>

#include "core/dtype.h"
#include "core/units.h"

namespace bucketsim {

enum class CollectiveKind : std::uint8_t {
  kBypass,       // a gradient larger than the bucket shard, reduced on its own
  kBucketFlush,  // a bucket's filled columns, reduced together
  // A flat bucket (gradients laid end to end) reduce-scattered: the rank at group position p
  // receives elements [p * output_numel, (p + 1) * output_numel) of it.
  kReduceScatter,
  // A flat bucket all-reduced: every rank receives the whole sum (output_numel == input_numel).
  kAllReduce,
  // Every rank's input (input_numel elements) gathered: each receives all group_size of them
  // (output_numel == group_size * input_numel), the rank at position p's at p * input_numel.
  kAllGather,
};

struct CollectiveRecord {
  CollectiveKind kind = CollectiveKind::kBypass;
  GroupId group = 0;
  int group_size = 1;
  DType dtype = DType::kFloat32;
  // The whole send buffer: group_size * output_numel (all_reduce: it all; all_gather: this
  // rank's part)
  Numel input_numel = 0;
  // What this rank receives: its reduced shard, or all of it (all_reduce, all_gather)
  Numel output_numel = 0;
  std::uint32_t requests = 1;  // gradients carried by this collective
  EventIndex event_index = 0;  // the trace event that caused it (an rs or the flush)
  // A gradient reduction of a HYBRID_SHARD trace (TraceHeader::replicate_group): the backend
  // then all-reduces this rank's output over that group, in place (ReplicaAllReduce: the
  // record the log has of it).
  std::optional<GroupId> replicate_group = std::nullopt;
  // When it ran on the backend's clock (µs), set by the engine when its iteration ends.
  Micros start_us = 0;
  Micros dur_us = 0;
};

// "bypass", "bucket_flush", "reduce_scatter", "all_reduce", "all_gather"
std::string_view CollectiveKindName(CollectiveKind kind);
inline constexpr int kNumCollectiveKinds = 5;

// The all-reduce over `reduction.replicate_group` (of `replicas` ranks) that follows a
// HYBRID_SHARD reduction: this rank's output, in place.
CollectiveRecord ReplicaAllReduce(const CollectiveRecord& reduction, int replicas);

// A collective's size as nccl-tests counts it: the whole send buffer of a reduction, the whole
// receive buffer of an all-gather (what torch.distributed's tensors hold either way).
Bytes SendBytes(const CollectiveRecord& record);

// nccl-tests' bus factor (doc/PERFORMANCE.md there), what each rank must move per byte of the
// send buffer: (n-1)/n for a reduce-scatter or an all-gather (of its receive buffer), 2(n-1)/n
// for an all-reduce; 0 for no ranks.
double BusFactor(CollectiveKind kind, int ranks);

// Sums over collectives that a run's time figures need (algbw, busbw) without keeping the log.
struct CollectiveTotals {
  std::uint64_t count = 0;
  Bytes bytes = 0;       // SendBytes summed
  double bus_bytes = 0;  // each collective's SendBytes scaled by its BusFactor (nccl-tests' busbw)

  void Add(const CollectiveRecord& record);
};

}  // namespace bucketsim
