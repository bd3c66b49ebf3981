#include "backend/sim/alpha_beta_fit.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace bucketsim {
namespace {

Status CheckSamples(std::span<const TimingSample> samples) {
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (!std::isfinite(samples[i].time_us) || samples[i].time_us < 0) {
      return InvalidArgument(
          fmt::format("fit: sample {}: time_us {} is not a duration", i, samples[i].time_us));
    }
  }
  return Status::Ok();
}

// Slope of the weighted least-squares line through the origin: sum(wxy) / sum(wxx).
double SlopeThroughOrigin(std::span<const double> x, std::span<const double> w,
                          std::span<const TimingSample> samples) {
  double xy = 0;
  double xx = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    xy += w[i] * x[i] * samples[i].time_us;
    xx += w[i] * x[i] * x[i];
  }
  return xx > 0 ? xy / xx : 0;
}

}  // namespace

Result<AlphaBeta> FitAlphaBeta(int group_size, std::span<const TimingSample> samples,
                               FitWeighting weighting) {
  if (group_size < 2) {
    return InvalidArgument(fmt::format("fit: group size {} moves no bytes; need >= 2", group_size));
  }
  BUCKETSIM_RETURN_IF_ERROR(CheckSamples(samples));
  if (weighting == FitWeighting::kRelative) {
    for (std::size_t i = 0; i < samples.size(); ++i) {
      if (!(samples[i].time_us > 0)) {
        return InvalidArgument(fmt::format(
            "fit: sample {}: a relative fit needs a time > 0, got {}", i, samples[i].time_us));
      }
    }
  }
  // Weighted least squares of time on bus bytes x: minimise sum w_i (alpha + slope x_i - t_i)^2,
  // with w_i = 1 (absolute) or 1 / t_i^2 (relative: every size counts by its relative error).
  std::vector<double> x;
  std::vector<double> w;
  double factor = static_cast<double>(group_size - 1) / group_size;
  for (const TimingSample& s : samples) {
    x.push_back(static_cast<double>(s.bytes) * factor);
    w.push_back(weighting == FitWeighting::kRelative ? 1.0 / (s.time_us * s.time_us) : 1.0);
  }
  double total_w = 0;
  double mean_x = 0;
  double mean_y = 0;
  for (std::size_t i = 0; i < x.size(); ++i) total_w += w[i];
  for (std::size_t i = 0; i < x.size(); ++i) {
    mean_x += w[i] * x[i] / total_w;
    mean_y += w[i] * samples[i].time_us / total_w;
  }
  double sxx = 0;
  double sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxx += w[i] * (x[i] - mean_x) * (x[i] - mean_x);
    sxy += w[i] * (x[i] - mean_x) * (samples[i].time_us - mean_y);
  }
  if (x.size() < 2 || sxx <= 0) {
    return InvalidArgument("fit: need samples of at least two different sizes");
  }
  double slope = sxy / sxx;  // µs per bus byte
  double alpha = mean_y - slope * mean_x;
  if (alpha < 0) {
    alpha = 0;
    slope = SlopeThroughOrigin(x, w, samples);
  }
  if (!(slope > 0)) {
    return InvalidArgument("fit: time does not grow with size; no bandwidth can be fitted");
  }
  return AlphaBeta{group_size, alpha, 1.0 / (slope * 1e3), {}};
}

Result<double> FitCopyBandwidth(std::span<const TimingSample> samples) {
  BUCKETSIM_RETURN_IF_ERROR(CheckSamples(samples));
  std::vector<double> x;
  for (const TimingSample& s : samples) x.push_back(static_cast<double>(s.bytes));
  std::vector<double> w(x.size(), 1.0);
  double slope = SlopeThroughOrigin(x, w, samples);
  if (!(slope > 0)) {
    return InvalidArgument("fit: copy samples need bytes and time > 0");
  }
  return 1.0 / (slope * 1e3);
}

}  // namespace bucketsim
