#include "engine/tune_grid.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include <fmt/format.h>

#include "core/comma_list.h"

namespace bucketsim {
namespace {

// The value of a size flag (kSizeFlags) in a point whose settings vary it; unset otherwise.
std::optional<std::uint64_t> SizeOf(const TunePoint& point, std::string_view size_flag) {
  for (const auto& [flag, value] : point.settings) {
    if (flag == size_flag) return ParseBatchSize(value);
  }
  return std::nullopt;
}

// The better of two points that both fit: faster, then less peak reserved, then the first.
bool Better(const TunePoint& a, std::size_t ia, const TunePoint& b, std::size_t ib) {
  if (a.figures.step_time_us != b.figures.step_time_us) {
    return a.figures.step_time_us < b.figures.step_time_us;
  }
  if (a.figures.peak_reserved_bytes != b.figures.peak_reserved_bytes) {
    return a.figures.peak_reserved_bytes < b.figures.peak_reserved_bytes;
  }
  return ia < ib;
}

// The point of `candidates` with the least peak reserved (then the first); none if empty.
std::optional<std::size_t> LeastReserved(const std::vector<TunePoint>& points,
                                         const std::vector<std::size_t>& candidates) {
  std::optional<std::size_t> best;
  for (std::size_t i : candidates) {
    if (!best ||
        points[i].figures.peak_reserved_bytes < points[*best].figures.peak_reserved_bytes) {
      best = i;
    }
  }
  return best;
}

}  // namespace

std::optional<std::uint64_t> ParseBatchSize(std::string_view text) {
  std::uint64_t size = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), size);
  if (error != std::errc() || end != text.data() + text.size() || size == 0) return std::nullopt;
  return size;
}

Result<TuneAxis> ParseTuneAxis(std::string_view spec) {
  const std::size_t equals = spec.find('=');
  std::string_view flag = spec.substr(0, equals);
  while (flag.starts_with('-')) flag.remove_prefix(1);
  if (equals == std::string_view::npos || flag.empty() || equals + 1 == spec.size()) {
    return InvalidArgument(
        fmt::format("--vary '{}': expected FLAG=VALUE,VALUE,... (e.g. batch-size=2,4,8)", spec));
  }
  TuneAxis axis{std::string(flag), {}};
  for (std::string_view entry : SplitCommaList(spec.substr(equals + 1))) {
    const std::string value(entry);
    if (value.empty()) {
      return InvalidArgument(fmt::format("--vary '{}': an empty value", spec));
    }
    if (std::find(axis.values.begin(), axis.values.end(), value) != axis.values.end()) {
      return InvalidArgument(fmt::format("--vary '{}': '{}' is given twice", spec, value));
    }
    if (IsSizeFlag(axis.flag) && !ParseBatchSize(value)) {
      return InvalidArgument(
          fmt::format("--vary '{}': '{}' is not a {} (an integer of at least 1)", spec, value,
                      axis.flag == kBatchSizeFlag ? "batch size" : "sequence length"));
    }
    axis.values.push_back(value);
  }
  return axis;
}

std::vector<TuneSettings> TuneGrid(const std::vector<TuneAxis>& axes) {
  std::vector<TuneSettings> grid = {{}};
  for (const TuneAxis& axis : axes) {
    std::vector<TuneSettings> next;
    next.reserve(grid.size() * axis.values.size());
    for (const TuneSettings& settings : grid) {
      for (const std::string& value : axis.values) {
        next.push_back(settings);
        next.back().emplace_back(axis.flag, value);
      }
    }
    grid = std::move(next);
  }
  return grid;
}

bool TuneFits(const TunePoint& point, std::optional<Bytes> budget_bytes) {
  if (point.figures.out_of_memory) return false;
  return !budget_bytes || point.figures.peak_reserved_bytes <= *budget_bytes;
}

void MarkTunePareto(std::vector<TunePoint>& points) {
  const auto per_sample = [](const TunePoint& point) {  // per sample and token, where varied
    double work = 1;
    for (std::string_view flag : kSizeFlags) {
      work *= static_cast<double>(SizeOf(point, flag).value_or(1));
    }
    return point.figures.step_time_us / work;
  };
  for (TunePoint& candidate : points) {
    candidate.figures.pareto =
        !candidate.figures.out_of_memory &&
        std::none_of(points.begin(), points.end(), [&](const TunePoint& other) {
          if (other.figures.out_of_memory) return false;
          const bool no_worse =
              other.figures.peak_reserved_bytes <= candidate.figures.peak_reserved_bytes &&
              per_sample(other) <= per_sample(candidate);
          const bool better =
              other.figures.peak_reserved_bytes < candidate.figures.peak_reserved_bytes ||
              per_sample(other) < per_sample(candidate);
          return no_worse && better;
        });
  }
}

TuneAdvice AdviseTune(const std::vector<TunePoint>& points, std::optional<Bytes> budget_bytes) {
  TuneAdvice advice;
  for (std::string_view flag : kSizeFlags) {
    if (advice.by.empty() && !points.empty() && SizeOf(points.front(), flag)) advice.by = flag;
  }
  const auto size = [&](const TunePoint& point) { return *SizeOf(point, advice.by); };
  std::optional<std::uint64_t> largest;  // the largest value of `by` that fits
  if (!advice.by.empty()) {
    for (const TunePoint& point : points) {
      if (TuneFits(point, budget_bytes)) largest = std::max(largest.value_or(0), size(point));
    }
  }
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (!TuneFits(points[i], budget_bytes)) continue;
    if (!advice.by.empty() && size(points[i]) != largest) continue;
    if (!advice.chosen || Better(points[i], i, points[*advice.chosen], *advice.chosen)) {
      advice.chosen = i;
    }
  }
  if (advice.chosen && !advice.by.empty()) {
    for (const TunePoint& point : points) {
      if (size(point) > *largest && (!advice.next || size(point) < *advice.next)) {
        advice.next = size(point);
      }
    }
  }
  if (!advice.chosen) {
    std::vector<std::size_t> ran;  // those that did not run out of memory first
    for (std::size_t i = 0; i < points.size(); ++i) {
      if (!points[i].figures.out_of_memory) ran.push_back(i);
    }
    advice.closest = LeastReserved(points, ran);
  }
  return advice;
}

}  // namespace bucketsim
