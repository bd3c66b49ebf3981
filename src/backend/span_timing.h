// The time figures every backend reports, computed in one place from the spans a backend
// measured (host, cuda) or predicted (sim), so that "exposed communication" means the same on
// each of them: the time some collective was running while no compute span was.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "core/collective_record.h"

namespace bucketsim {

struct IterationTiming {
  std::uint64_t iteration = 0;
  Micros iteration_us = 0;      // from the end of the previous iteration to all streams idle
  Micros compute_us = 0;        // sum of compute spans
  Micros communication_us = 0;  // sum of collective spans
  Micros copy_us = 0;           // bucket copy-in and .contiguous() copies
  Micros exposed_communication_us = 0;  // collectives running while no compute ran
};

IterationTiming SummarizeIteration(const IterationSpans& spans, std::uint64_t iteration);

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
