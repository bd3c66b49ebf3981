#include "backend/span_timing.h"

#include <algorithm>
#include <vector>

namespace bucketsim {
namespace {

struct Interval {
  Micros start = 0;
  Micros end = 0;
};

// Sorted, non-overlapping cover of the spans of one kind.
std::vector<Interval> Union(const std::vector<TimedSpan>& spans, SpanKind kind) {
  std::vector<Interval> sorted;
  for (const TimedSpan& span : spans) {
    if (span.kind == kind && span.end_us > span.start_us) {
      sorted.push_back({span.start_us, span.end_us});
    }
  }
  // Spans of one stream are issued in start order: with one stream they are sorted already.
  auto earlier = [](const Interval& a, const Interval& b) { return a.start < b.start; };
  if (!std::is_sorted(sorted.begin(), sorted.end(), earlier)) {
    std::sort(sorted.begin(), sorted.end(), earlier);
  }
  std::vector<Interval> merged;
  for (const Interval& interval : sorted) {
    if (!merged.empty() && interval.start <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, interval.end);
    } else {
      merged.push_back(interval);
    }
  }
  return merged;
}

Micros Length(const std::vector<Interval>& intervals) {
  Micros total = 0;
  for (const Interval& interval : intervals) total += interval.end - interval.start;
  return total;
}

// Total length of the intersection of two sorted, non-overlapping covers.
Micros Overlap(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  Micros total = 0;
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < a.size() && j < b.size()) {
    Micros start = std::max(a[i].start, b[j].start);
    Micros end = std::min(a[i].end, b[j].end);
    if (end > start) total += end - start;
    if (a[i].end < b[j].end) {
      ++i;
    } else {
      ++j;
    }
  }
  return total;
}

}  // namespace

IterationTiming SummarizeIteration(const IterationSpans& spans, std::uint64_t iteration) {
  IterationTiming timing;
  timing.iteration = iteration;
  timing.iteration_us = spans.end_us - spans.start_us;
  for (const TimedSpan& span : spans.spans) {
    Micros length = span.end_us - span.start_us;
    switch (span.kind) {
      case SpanKind::kCompute:
        timing.compute_us += length;
        break;
      case SpanKind::kCollective:
        timing.communication_us += length;
        break;
      case SpanKind::kCopy:
        timing.copy_us += length;
        break;
    }
  }
  std::vector<Interval> communication = Union(spans.spans, SpanKind::kCollective);
  timing.exposed_communication_us =
      Length(communication) - Overlap(communication, Union(spans.spans, SpanKind::kCompute));
  return timing;
}

TimingTotals SumTimings(const std::vector<IterationTiming>& iterations,
                        const CollectiveTotals& collectives) {
  TimingTotals totals;
  std::vector<Micros> steps;
  for (const IterationTiming& it : iterations) {
    totals.iteration_us += it.iteration_us;
    totals.compute_us += it.compute_us;
    totals.communication_us += it.communication_us;
    totals.copy_us += it.copy_us;
    totals.exposed_communication_us += it.exposed_communication_us;
    steps.push_back(it.iteration_us);
  }
  if (steps.size() > 1) steps.erase(steps.begin());
  const std::size_t first_steady = iterations.size() > 1 ? 1 : 0;
  const double steady = static_cast<double>(iterations.size() - first_steady);
  for (std::size_t i = first_steady; i < iterations.size(); ++i) {
    const IterationTiming& it = iterations[i];
    totals.per_iteration.iteration_us += it.iteration_us / steady;
    totals.per_iteration.compute_us += it.compute_us / steady;
    totals.per_iteration.communication_us += it.communication_us / steady;
    totals.per_iteration.copy_us += it.copy_us / steady;
    totals.per_iteration.exposed_communication_us += it.exposed_communication_us / steady;
  }
  if (!steps.empty()) {
    auto middle = steps.begin() + static_cast<std::ptrdiff_t>(steps.size() / 2);
    std::nth_element(steps.begin(), middle, steps.end());
    totals.step_time_us = *middle;
    if (steps.size() % 2 == 0) {
      totals.step_time_us = (*middle + *std::max_element(steps.begin(), middle)) / 2;
    }
  }
  totals.collective_bytes = collectives.bytes;
  totals.algbw_GBps = AlgBandwidthGBps(totals.collective_bytes, totals.communication_us);
  if (totals.communication_us > 0) {
    totals.busbw_GBps = collectives.bus_bytes / (totals.communication_us * 1e3);
  }
  return totals;
}

double AlgBandwidthGBps(Bytes send_bytes, Micros duration) {
  if (duration <= 0) return 0;
  return static_cast<double>(send_bytes) / (duration * 1e3);  // bytes/µs / 1e3 = GB/s
}

double BusBandwidthGBps(Bytes send_bytes, Micros duration, int ranks, CollectiveKind kind) {
  return AlgBandwidthGBps(send_bytes, duration) * BusFactor(kind, ranks);
}

double PredictionError(Micros predicted, Micros measured) {
  return measured > 0 ? predicted / measured - 1 : 0;
}

}  // namespace bucketsim
