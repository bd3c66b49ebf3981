// The time figures every backend reports, computed in one place from the spans a backend
// measured (host, cuda) or predicted (sim), so that "exposed communication" means the same on
// each of them: the time some collective was running while no compute span was.
#pragma once

#include <cstdint>

#include "backend/backend.h"

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

// nccl-tests' bandwidths of one reduce-scatter (doc/PERFORMANCE.md there): algbw is the whole
// send buffer over the time; busbw scales it by (n-1)/n, the fraction each rank must move.
// GB/s with GB = 1e9 bytes, as nccl-tests prints them; 0 for a zero duration.
double AlgBandwidthGBps(Bytes send_bytes, Micros duration);
double BusBandwidthGBps(Bytes send_bytes, Micros duration, int ranks);

}  // namespace bucketsim
