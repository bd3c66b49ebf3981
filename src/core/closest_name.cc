#include "core/closest_name.h"

#include <algorithm>

#include <fmt/format.h>

namespace bucketsim {

std::size_t EditDistance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic programme: the transposition looks two rows back.
  std::vector<std::size_t> before(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t substitute = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::optional<std::string> ClosestName(std::string_view typed,
                                       const std::vector<std::string>& candidates) {
  const std::size_t limit = std::clamp<std::size_t>(typed.size() / 3, 1, 3);
  std::optional<std::string> best;
  std::size_t best_distance = limit + 1;
  for (const std::string& candidate : candidates) {
    std::size_t distance = EditDistance(typed, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

std::string DidYouMean(std::string_view typed, const std::vector<std::string>& candidates) {
  std::optional<std::string> closest = ClosestName(typed, candidates);
  return closest ? fmt::format("; did you mean '{}'?", *closest) : std::string();
}

}  // namespace bucketsim
