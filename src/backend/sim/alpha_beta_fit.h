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

// How the samples count in a fit. kAbsolute: ordinary least squares, so the largest sizes (the
// largest times) dominate; right for published bandwidth figures, which start at 128 MB.
// kRelative: each sample weighted by 1/time^2, so the line is as close in relative terms at 4 KiB
// as at 64 MiB; right for a calibration sweep, whose sizes span five orders of magnitude and
// whose every size may be a bucket.
enum class FitWeighting { kAbsolute, kRelative };

// The (weighted) least-squares line time = alpha + x / (busbw * 1e3) over x = (n-1)/n * bytes
// (the bus bytes of a reduce-scatter in a group of n). Needs at least two distinct sizes and a
// positive slope. A negative intercept (latency below the noise) is clamped to 0 and the slope
// refitted through the origin, so the model never predicts a negative time.
Result<AlphaBeta> FitAlphaBeta(int group_size, std::span<const TimingSample> samples,
                               FitWeighting weighting = FitWeighting::kAbsolute);

// Copy bandwidth (GB/s) of the least-squares line time = bytes / (GBps * 1e3) through the
// origin: the model has no copy latency. Needs one sample with bytes and time > 0.
Result<double> FitCopyBandwidth(std::span<const TimingSample> samples);

}  // namespace bucketsim
