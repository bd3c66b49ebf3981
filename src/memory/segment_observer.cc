#include "memory/segment_observer.h"

#include <array>

namespace bucketsim {

std::string_view SegmentActionName(SegmentAction action) {
  static constexpr std::array<std::string_view, 4> kNames = {"segment_alloc", "segment_free",
                                                             "segment_map", "segment_unmap"};
  return kNames[static_cast<int>(action)];
}

}  // namespace bucketsim
