#include "core/collective_record.h"

namespace bucketsim {

std::string_view CollectiveKindName(CollectiveKind kind) {
  return kind == CollectiveKind::kBypass ? "bypass" : "bucket_flush";
}

}  // namespace bucketsim
