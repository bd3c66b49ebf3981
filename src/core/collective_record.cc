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

}  // namespace bucketsim
