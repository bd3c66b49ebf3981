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
  }
  return "unknown";
}

Bytes SendBytes(const CollectiveRecord& record) {
  return record.input_numel * ElementSize(record.dtype);
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
