// How long a compute span spins on the GPU. The cuda backend stands in for a trace's compute
// span with a one-thread kernel that spins on clock64() for a number of SM cycles; the number
// comes from a calibration done once at start: spin kernels of two lengths are timed with CUDA
// events and the cycles per microsecond are the slope between them, so the fixed cost of a
// launch cancels out. The arithmetic lives here, apart from CUDA, so it is tested without a GPU.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "core/units.h"

namespace bucketsim {

// One timed spin kernel: it spun `cycles` clock64() cycles and the events around it measured
// `elapsed_ms` (cudaEventElapsedTime's unit).
struct SpinSample {
  std::uint64_t cycles = 0;
  double elapsed_ms = 0;
};

// Cycles per µs from a short and a long sample: (long.cycles - short.cycles) over the
// difference of their times. An error when the samples cannot give a rate (equal lengths, a
// long sample that did not take longer): the clock or the timer is not what we think.
Result<double> CyclesPerMicro(const SpinSample& short_sample, const SpinSample& long_sample);

// The cycles that spin for `duration` scaled by `compute_scale` (--compute-scale); 0 for a
// non-positive product. Saturates instead of overflowing for absurd durations.
std::uint64_t SpinCyclesFor(Micros duration, double compute_scale, double cycles_per_us);

}  // namespace bucketsim
