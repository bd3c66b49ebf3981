#include "backend/cuda/spin_calibration.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace bucketsim {

Result<double> CyclesPerMicro(const SpinSample& short_sample, const SpinSample& long_sample) {
  if (long_sample.cycles <= short_sample.cycles) {
    return DeviceError(fmt::format(
        "spin calibration: the long sample ({} cycles) must spin longer than the short one ({})",
        long_sample.cycles, short_sample.cycles));
  }
  double extra_us = (long_sample.elapsed_ms - short_sample.elapsed_ms) * 1000.0;
  if (!(extra_us > 0) || !std::isfinite(extra_us)) {
    return DeviceError(fmt::format(
        "spin calibration: {} cycles took {} ms and {} cycles took {} ms; the longer spin must "
        "take longer (is another process using this GPU?)",
        short_sample.cycles, short_sample.elapsed_ms, long_sample.cycles, long_sample.elapsed_ms));
  }
  return static_cast<double>(long_sample.cycles - short_sample.cycles) / extra_us;
}

std::uint64_t SpinCyclesFor(Micros duration, double compute_scale, double cycles_per_us) {
  double cycles = duration * compute_scale * cycles_per_us;
  if (!(cycles > 0)) return 0;  // also NaN
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  if (cycles >= static_cast<double>(kMax)) return kMax;
  return static_cast<std::uint64_t>(std::llround(cycles));
}

}  // namespace bucketsim
