// The time figures every backend reports, computed in one place from the spans a backend
// measured (host, cuda) or predicted (sim), so that "exposed communication" means the same on
// each of them: the time some collective was running while no compute span was.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "core/collective_record.h"

namespace bucketsim {

// IterationTiming (backend.h) from an iteration's spans.
IterationTiming SummarizeIteration(const IterationSpans& spans, std::uint64_t iteration);

// SummarizeIteration's figures, taken span by span as they are issued, so that a backend need
// not keep an iteration's spans to time it: the sums add the same spans in the same order, and
// the cover of each kind (the union of its spans, which the exposed time is measured on) is kept
// merged as spans arrive, so the figures are SummarizeIteration's to the last bit. One stream's
// spans arrive in start order and mostly touch, so a cover stays a few intervals long.
class IterationTimer {
 public:
  void Add(const TimedSpan& span);
  // The figures of the spans added since the last Take, for an iteration from `start_us` to
  // `end_us` (`iteration` left 0); starts over.
  IterationTiming Take(Micros start_us, Micros end_us);

  struct Interval {
    Micros start = 0;
    Micros end = 0;
  };

 private:
  IterationTiming timing_;
  // Sorted, separated (each ends before the next starts) covers of the spans of a kind.
  std::vector<Interval> compute_;
  std::vector<Interval> communication_;
};

// A run's time figures over all its iterations. The step time is the median iteration time
// of the iterations after the first when there are several (the first one creates
// communicators and touches memory for the first time, as a warm-up iteration would), else
// that of the only one.
struct TimingTotals {
  Micros step_time_us = 0;
  Micros iteration_us = 0;  // sums over iterations from here on
  Micros compute_us = 0;
  Micros communication_us = 0;
  Micros copy_us = 0;
  Micros exposed_communication_us = 0;
  // One iteration's figures beside the step time: means over the iterations the step time is
  // taken from (those after the first when there are several). Tables show these, and the
  // totals above only where a sum is what is meant.
  IterationTiming per_iteration;
  Bytes collective_bytes = 0;  // whole send buffers, as nccl-tests counts a reduce-scatter
  double algbw_GBps = 0;       // collective_bytes over communication time
  double busbw_GBps = 0;  // each collective's bytes scaled by its BusFactor, over the same time
};

TimingTotals SumTimings(const std::vector<IterationTiming>& iterations,
                        const CollectiveTotals& collectives);

// nccl-tests' bandwidths of one collective (doc/PERFORMANCE.md there): algbw is the whole
// send buffer over the time; busbw scales it by the bus factor, what each rank must move per
// byte (BusFactor in core/collective_record.h).
// GB/s with GB = 1e9 bytes, as nccl-tests prints them; 0 for a zero duration.
double AlgBandwidthGBps(Bytes send_bytes, Micros duration);
double BusBandwidthGBps(Bytes send_bytes, Micros duration, int ranks,
                        CollectiveKind kind = CollectiveKind::kBucketFlush);

// How far a prediction is from a measurement: predicted / measured - 1 (+0.05: 5% slow, the
// model over-predicts). 0 when nothing was measured.
double PredictionError(Micros predicted, Micros measured);

}  // namespace bucketsim
