// Fitting the time model to measurements: `calibrate` times reduce-scatters over a sweep of
// sizes and copies over a sweep of sizes, and these functions turn the (bytes, time) samples
// into a profile's figures. Pure arithmetic (ordinary least squares), so the measurement loop of
// any backend plugs in and the fit is tested on its own.
#pragma once

#include <span>

#include "backend/sim/time_profile.h"
#include "core/status.h"
#include "core/units.h"

namespace bucketsim {

// One timed operation: its bytes (a collective's whole send buffer, as nccl-tests counts it;
// a copy's bytes copied) and how long it took (a median over repetitions, by the caller).
struct TimingSample {
  Bytes bytes = 0;
  Micros time_us = 0;
};

// The least-squares line time = alpha + x / (busbw * 1e3) over x = (n-1)/n * bytes (the bus
// bytes of a reduce-scatter in a group of n). Needs at least two distinct sizes and a positive
// slope. A negative intercept (latency below the noise) is clamped to 0 and the slope refitted
// through the origin, so the model never predicts a negative time.
Result<AlphaBeta> FitAlphaBeta(int group_size, std::span<const TimingSample> samples);

// Copy bandwidth (GB/s) of the least-squares line time = bytes / (GBps * 1e3) through the
// origin: the model has no copy latency. Needs one sample with bytes and time > 0.
Result<double> FitCopyBandwidth(std::span<const TimingSample> samples);

}  // namespace bucketsim
