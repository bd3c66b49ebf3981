// One collective a policy issued, as the report's collective log shows it. The log is what
// lets anyone check a replay against the framework's own code: same order, same groups, same
// sizes. fairscale and FSDP2 reduce-scatter a (group size x columns) bucket whose rows are the
// ranks' chunks (bypass, bucket_flush); DeepSpeed ZeRO and Megatron's distributed optimizer
// reduce-scatter a flat bucket split into group-size equal ranges (reduce_scatter); DDP and
// Megatron without the distributed optimizer all-reduce a flat bucket (all_reduce).
#pragma once

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
};

struct CollectiveRecord {
  CollectiveKind kind = CollectiveKind::kBypass;
  GroupId group = 0;
  int group_size = 1;
  DType dtype = DType::kFloat32;
  Numel input_numel = 0;   // the whole send buffer: group_size * output_numel (all_reduce: it all)
  Numel output_numel = 0;  // what this rank receives: its reduced shard, or all of it (all_reduce)
  std::uint32_t requests = 1;  // gradients carried by this collective
  EventIndex event_index = 0;  // the trace event that caused it (an rs or the flush)
  // When it ran on the backend's clock (µs), set by the engine when its iteration ends.
  Micros start_us = 0;
  Micros dur_us = 0;
};

// "bypass", "bucket_flush", "reduce_scatter", "all_reduce"
std::string_view CollectiveKindName(CollectiveKind kind);

}  // namespace bucketsim
