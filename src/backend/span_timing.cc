#include "backend/span_timing.h"

#include <algorithm>
#include <vector>

namespace bucketsim {
namespace {

using Interval = IterationTimer::Interval;

// Adds [start, end) to a cover: merged with every interval it overlaps or touches.
void Cover(std::vector<Interval>& cover, Micros start, Micros end) {
  if (end <= start) return;
  if (cover.empty() || start > cover.back().end) {
    cover.push_back({start, end});
    return;
  }
  if (start >= cover.back().start) {  // one stream's next span: the common case
    cover.back().end = std::max(cover.back().end, end);
    return;
  }
  auto first =
      std::lower_bound(cover.begin(), cover.end(), start,
                       [](const Interval& interval, Micros at) { return interval.end < at; });
  auto last = first;
  Interval merged{start, end};
  for (; last != cover.end() && last->start <= merged.end; ++last) {
    merged.start = std::min(merged.start, last->start);
    merged.end = std::max(merged.end, last->end);
  }
  if (first == last) {
    cover.insert(first, merged);
  } else {
    *first = merged;
    cover.erase(first + 1, last);
  }
}

Micros Length(const std::vector<Interval>& intervals) {
  Micros total = 0;
  for (const Interval& interval : intervals) total += interval.end - interval.start;
  return total;
}

// Total length of the intersection of two covers.
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

void IterationTimer::Add(const TimedSpan& span) {
  Micros length = span.end_us - span.start_us;
  switch (span.kind) {
    case SpanKind::kCompute:
      timing_.compute_us += length;
      Cover(compute_, span.start_us, span.end_us);
      break;
    case SpanKind::kCollective:
      timing_.communication_us += length;
      Cover(communication_, span.start_us, span.end_us);
      break;
    case SpanKind::kCopy:
      timing_.copy_us += length;
      break;
  }
}

IterationTiming IterationTimer::Take(Micros start_us, Micros end_us) {
  IterationTiming timing = timing_;
  timing.iteration_us = end_us - start_us;
  timing.exposed_communication_us = Length(communication_) - Overlap(communication_, compute_);
  timing_ = IterationTiming{};
  compute_.clear();
  communication_.clear();
  return timing;
}

IterationTiming SummarizeIteration(const IterationSpans& spans, std::uint64_t iteration) {
  IterationTimer timer;
  for (const TimedSpan& span : spans.spans) timer.Add(span);
  IterationTiming timing = timer.Take(spans.start_us, spans.end_us);
  timing.iteration = iteration;
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
