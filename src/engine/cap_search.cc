#include "engine/cap_search.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

namespace bucketsim {
namespace {

// `steps` caps strictly between lo and hi, evenly spaced on a log scale, rounded up.
void AddGeometric(double lo, double hi, int steps, std::set<double>& out) {
  for (int k = 1; k <= steps; ++k) {
    out.insert(RoundCapUp(lo * std::pow(hi / lo, static_cast<double>(k) / (steps + 1))));
  }
}

}  // namespace

double RoundCapUp(double cap_mb, int digits) {
  const double step = std::pow(10.0, static_cast<int>(std::floor(std::log10(cap_mb))) - digits + 1);
  // Through text, so that the cap is the double its shortest spelling reads back as.
  auto spelled = [digits](double v) { return std::stod(fmt::format("{:.{}g}", v, digits)); };
  double rounded = spelled(std::ceil(cap_mb / step - 1e-9) * step);
  if (rounded < cap_mb) rounded = spelled(rounded + step);
  return rounded;
}

std::optional<CapRange> AutoCapRange(const CapThresholds& thresholds) {
  std::optional<double> smallest = thresholds.SmallestBucketingCapMb();
  if (!smallest) return std::nullopt;
  return CapRange{RoundCapUp(*smallest), RoundCapUp(thresholds.AllInOneBucketCapMb())};
}

std::vector<double> InitialSearchCaps(const CapThresholds& thresholds, CapRange range) {
  std::set<double> caps = {range.from_mb, range.to_mb};
  std::vector<double> inside;
  for (const RequestSize& size : thresholds.Sizes()) {
    double cap = RoundCapUp(size.ThresholdCapMb());
    if (cap >= range.from_mb && cap <= range.to_mb) inside.push_back(cap);
  }
  inside.erase(std::unique(inside.begin(), inside.end()), inside.end());
  const std::size_t stride =
      (inside.size() + kCapSearchMaxThresholds - 1) / kCapSearchMaxThresholds;
  for (std::size_t i = 0; i < inside.size(); i += std::max<std::size_t>(stride, 1)) {
    caps.insert(inside[i]);
  }
  if (range.to_mb > range.from_mb) {
    AddGeometric(range.from_mb, range.to_mb, kCapSearchGridPoints - 2, caps);
  }
  std::vector<double> sorted;
  for (double cap : caps) {
    if (cap >= range.from_mb && cap <= range.to_mb) sorted.push_back(cap);
  }
  return sorted;
}

std::vector<double> RefineSearchCaps(const std::vector<SweepPoint>& points,
                                     const std::vector<std::size_t>& chosen,
                                     const std::set<double>& tried, CapRange range) {
  std::set<double> caps;
  for (std::size_t c : chosen) {
    const SweepPoint& center = points[c];
    if (center.bucket_cap_mb <= 0) continue;
    const SweepPoint* below = nullptr;
    const SweepPoint* above = nullptr;
    for (const SweepPoint& p : points) {
      if (p.policy != center.policy || p.out_of_memory || p.bucket_cap_mb <= 0) continue;
      if (p.bucket_cap_mb < center.bucket_cap_mb &&
          (!below || p.bucket_cap_mb > below->bucket_cap_mb)) {
        below = &p;
      }
      if (p.bucket_cap_mb > center.bucket_cap_mb &&
          (!above || p.bucket_cap_mb < above->bucket_cap_mb)) {
        above = &p;
      }
    }
    if (below && !SameFigures(*below, center)) {
      AddGeometric(below->bucket_cap_mb, center.bucket_cap_mb, kCapSearchRefinePoints, caps);
    }
    if (above && !SameFigures(*above, center)) {
      AddGeometric(center.bucket_cap_mb, above->bucket_cap_mb, kCapSearchRefinePoints, caps);
    }
  }
  std::vector<double> fresh;
  for (double cap : caps) {
    if (!tried.count(cap) && cap >= range.from_mb && cap <= range.to_mb) fresh.push_back(cap);
  }
  return fresh;
}

}  // namespace bucketsim
