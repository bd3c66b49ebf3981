#include "core/event.h"

#include <array>

namespace bucketsim {

std::string_view EventKindName(EventKind kind) {
  static constexpr std::array<std::string_view, 9> kNames = {
      "iteration", "phase", "alloc", "free", "compute", "mark", "rs", "flush", "zero_grad"};
  return kNames[static_cast<int>(kind)];
}

std::string_view PhaseName(Phase phase) {
  static constexpr std::array<std::string_view, kNumPhases> kNames = {
      "init", "forward", "backward", "step", "zero_grad"};
  return kNames[static_cast<int>(phase)];
}

std::string_view ShardModeName(ShardMode mode) {
  static constexpr std::array<std::string_view, 3> kNames = {"view", "cast", "accumulate"};
  return kNames[static_cast<int>(mode)];
}

}  // namespace bucketsim
