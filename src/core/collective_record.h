// One reduce-scatter a policy issued, as the report's collective log shows it. The log is what
// lets anyone check a replay against fairscale's own code: same order, same groups, same sizes.
#pragma once

#include <string_view>

#include "core/dtype.h"
#include "core/units.h"

namespace bucketsim {

enum class CollectiveKind : std::uint8_t {
  kBypass,       // a gradient larger than the bucket shard, reduced on its own
  kBucketFlush,  // a bucket's filled columns, reduced together
};

struct CollectiveRecord {
  CollectiveKind kind = CollectiveKind::kBypass;
  GroupId group = 0;
  int group_size = 1;
  DType dtype = DType::kFloat32;
  Numel input_numel = 0;       // the whole send buffer: group_size * output_numel
  Numel output_numel = 0;      // this rank's reduced shard
  std::uint32_t requests = 1;  // gradients carried by this collective
  EventIndex event_index = 0;  // the trace event that caused it (an rs or the flush)
  // When it ran on the backend's clock (µs), set by the engine when its iteration ends.
  Micros start_us = 0;
  Micros dur_us = 0;
};

std::string_view CollectiveKindName(CollectiveKind kind);  // "bypass", "bucket_flush"
inline constexpr int kNumCollectiveKinds = 2;

// The whole send buffer, as nccl-tests counts a reduce-scatter's bytes.
Bytes SendBytes(const CollectiveRecord& record);

// Sums over collectives that a run's time figures need (algbw, busbw) without keeping the log.
struct CollectiveTotals {
  std::uint64_t count = 0;
  Bytes bytes = 0;       // SendBytes summed
  double bus_bytes = 0;  // each collective's SendBytes scaled by (n-1)/n (nccl-tests' busbw)

  void Add(const CollectiveRecord& record);
};

}  // namespace bucketsim
