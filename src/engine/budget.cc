#include "engine/budget.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "core/size_format.h"

namespace bucketsim {

bool PolicyBudget::empty() const {
  return !max_peak_allocated_bytes && !max_peak_reserved_bytes && max_at_mark_bytes.empty() &&
         !max_step_time_us;
}

void PolicyBudget::OverrideWith(const PolicyBudget& over) {
  if (over.max_peak_allocated_bytes) max_peak_allocated_bytes = over.max_peak_allocated_bytes;
  if (over.max_peak_reserved_bytes) max_peak_reserved_bytes = over.max_peak_reserved_bytes;
  for (const auto& [mark, limit] : over.max_at_mark_bytes) SetMark(mark, limit);
  if (over.max_step_time_us) max_step_time_us = over.max_step_time_us;
}

void PolicyBudget::SetMark(std::string_view mark, Bytes limit) {
  auto it = std::find_if(max_at_mark_bytes.begin(), max_at_mark_bytes.end(),
                         [mark](const auto& entry) { return entry.first == mark; });
  if (it == max_at_mark_bytes.end()) {
    max_at_mark_bytes.emplace_back(std::string(mark), limit);
  } else {
    it->second = limit;
  }
}

void PolicyFigures::AddMarkSample(std::string_view name, Bytes allocated_bytes) {
  auto it = std::find_if(mark_bytes.begin(), mark_bytes.end(),
                         [name](const auto& entry) { return entry.first == name; });
  if (it == mark_bytes.end()) {
    mark_bytes.emplace_back(std::string(name), allocated_bytes);
  } else {
    it->second = std::max(it->second, allocated_bytes);
  }
}

std::optional<Bytes> PolicyFigures::AtMark(std::string_view name) const {
  for (const auto& [mark, bytes] : mark_bytes) {
    if (mark == name) return bytes;
  }
  return std::nullopt;
}

PolicyFigures FiguresOf(const RunResult& run) {
  PolicyFigures figures;
  figures.policy = run.policy;
  figures.peak_allocated_bytes = run.peak.allocated_bytes;
  figures.peak_reserved_bytes = run.peak.reserved_bytes;
  for (const MarkSample& sample : run.marks) {
    figures.AddMarkSample(sample.name, sample.allocated_bytes);
  }
  // The report's timing.step_time_us, from the one place that defines it; none when no
  // iteration was timed (a trace without iteration events).
  if (!run.iterations.empty()) {
    figures.step_time_us = SumTimings(run.iterations, run.collective_summary.totals()).step_time_us;
  }
  figures.out_of_memory = run.oom.has_value();
  return figures;
}

Bytes Tolerance::AllowedGrowth(Bytes baseline) const {
  // Rounded down: a tolerance never allows a byte more than the fraction of the baseline.
  auto fraction = static_cast<Bytes>(std::floor(static_cast<double>(baseline) * relative));
  return std::max(fraction, absolute_bytes);
}

Micros Tolerance::AllowedGrowth(Micros baseline) const { return baseline * relative; }

Status ParseTolerance(std::string_view text, Tolerance& tolerance) {
  auto bad = [text](std::string_view why) {
    return InvalidArgument(fmt::format(
        "--tolerance '{}': {}; expected a percentage ('2%', '0.5%') or an absolute size with a "
        "plus sign ('+1MiB')",
        text, why));
  };
  if (!text.empty() && text.front() == '+') {
    Result<Bytes> bytes = ParseSize(text.substr(1));
    if (!bytes.ok()) return bad(bytes.status().message());
    tolerance.absolute_bytes = *bytes;
  } else if (!text.empty() && text.back() == '%') {
    std::string_view number = text.substr(0, text.size() - 1);
    double percent = 0;
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), percent);
    if (number.empty() || ec != std::errc() || end != number.data() + number.size() ||
        !std::isfinite(percent) || percent < 0) {
      return bad("not a non-negative number before '%'");
    }
    tolerance.relative = percent / 100.0;
  } else {
    return bad("a bare number is ambiguous (a fraction or a percentage?)");
  }
  tolerance.text =
      tolerance.text.empty() ? std::string(text) : fmt::format("{},{}", tolerance.text, text);
  return Status::Ok();
}

}  // namespace bucketsim
