#include "engine/tune_grid.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include <fmt/format.h>

#include "core/comma_list.h"

namespace bucketsim {
namespace {

// The batch size of a point whose settings vary it; unset otherwise.
std::optional<std::uint64_t> BatchSizeOf(const TunePoint& point) {
  for (const auto& [flag, value] : point.settings) {
    if (flag == kBatchSizeFlag) return ParseBatchSize(value);
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
    if (axis.flag == kBatchSizeFlag && !ParseBatchSize(value)) {
      return InvalidArgument(fmt::format(
          "--vary '{}': '{}' is not a batch size (an integer of at least 1)", spec, value));
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
  const auto per_sample = [](const TunePoint& point) {
    return point.figures.step_time_us / static_cast<double>(BatchSizeOf(point).value_or(1));
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
  advice.by_batch_size = !points.empty() && BatchSizeOf(points.front()).has_value();
  std::optional<std::uint64_t> largest;  // the largest batch size that fits
  if (advice.by_batch_size) {
    for (const TunePoint& point : points) {
      if (TuneFits(point, budget_bytes))
        largest = std::max(largest.value_or(0), *BatchSizeOf(point));
    }
  }
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (!TuneFits(points[i], budget_bytes)) continue;
    if (advice.by_batch_size && BatchSizeOf(points[i]) != largest) continue;
    if (!advice.chosen || Better(points[i], i, points[*advice.chosen], *advice.chosen)) {
      advice.chosen = i;
    }
  }
  if (advice.chosen && advice.by_batch_size) {
    for (const TunePoint& point : points) {
      const std::uint64_t size = *BatchSizeOf(point);
      if (size > *largest && (!advice.next_batch_size || size < *advice.next_batch_size)) {
        advice.next_batch_size = size;
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
