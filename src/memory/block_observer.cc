#include "memory/block_observer.h"

#include <array>

namespace bucketsim {

std::string_view BlockActionName(BlockAction action) {
  static constexpr std::array<std::string_view, 4> kNames = {"alloc", "free_requested",
                                                             "free_completed", "oom"};
  return kNames[static_cast<int>(action)];
}

}  // namespace bucketsim
