#include "core/collective_record.h"

namespace bucketsim {

std::string_view CollectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kBypass:
      return "bypass";
    case CollectiveKind::kBucketFlush:
      return "bucket_flush";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kAllGather:
      return "all_gather";
  }
  return "unknown";
}

CollectiveRecord ReplicaAllReduce(const CollectiveRecord& reduction, int replicas) {
  CollectiveRecord record = reduction;
  record.kind = CollectiveKind::kAllReduce;
  record.group = *reduction.replicate_group;
  record.group_size = replicas;
  record.input_numel = reduction.output_numel;
  record.replicate_group.reset();
  return record;
}

Bytes SendBytes(const CollectiveRecord& record) {
  const Numel numel =
      record.kind == CollectiveKind::kAllGather ? record.output_numel : record.input_numel;
  return numel * ElementSize(record.dtype);
}

void CollectiveTotals::Add(const CollectiveRecord& record) {
  const Bytes bytes_sent = SendBytes(record);
  ++count;
  bytes += bytes_sent;
  bus_bytes += static_cast<double>(bytes_sent) * BusFactor(record.kind, record.group_size);
}

double BusFactor(CollectiveKind kind, int ranks) {
  if (ranks <= 0) return 0;
  const double factor = static_cast<double>(ranks - 1) / ranks;
  return kind == CollectiveKind::kAllReduce ? 2 * factor : factor;
}

}  // namespace bucketsim
