#include "core/collective_record.h"

namespace bucketsim {

std::string_view CollectiveKindName(CollectiveKind kind) {
  return kind == CollectiveKind::kBypass ? "bypass" : "bucket_flush";
}

Bytes SendBytes(const CollectiveRecord& record) {
  return record.input_numel * ElementSize(record.dtype);
}

void CollectiveTotals::Add(const CollectiveRecord& record) {
  const Bytes bytes_sent = SendBytes(record);
  ++count;
  bytes += bytes_sent;
  bus_bytes += static_cast<double>(bytes_sent) * (record.group_size - 1) / record.group_size;
}

}  // namespace bucketsim
