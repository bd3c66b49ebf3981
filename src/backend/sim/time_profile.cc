#include "backend/sim/time_profile.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace bucketsim {

Status TimeProfile::Validate() {
  if (reduce_scatter.empty()) {
    return InvalidArgument("profile: reduce_scatter needs at least one group size");
  }
  std::sort(reduce_scatter.begin(), reduce_scatter.end(),
            [](const AlphaBeta& a, const AlphaBeta& b) { return a.group_size < b.group_size; });
  for (std::size_t i = 0; i < reduce_scatter.size(); ++i) {
    const AlphaBeta& entry = reduce_scatter[i];
    if (entry.group_size < 1) {
      return InvalidArgument(
          fmt::format("profile: reduce_scatter group_size {} must be >= 1", entry.group_size));
    }
    if (i > 0 && reduce_scatter[i - 1].group_size == entry.group_size) {
      return InvalidArgument(
          fmt::format("profile: reduce_scatter group_size {} given twice", entry.group_size));
    }
    if (!std::isfinite(entry.alpha_us) || entry.alpha_us < 0) {
      return InvalidArgument(fmt::format(
          "profile: reduce_scatter group_size {}: alpha_us must be >= 0", entry.group_size));
    }
    if (!std::isfinite(entry.busbw_GBps) || entry.busbw_GBps <= 0) {
      return InvalidArgument(fmt::format(
          "profile: reduce_scatter group_size {}: busbw_GBps must be > 0", entry.group_size));
    }
    std::vector<TimingSample>& measured = reduce_scatter[i].measured;
    std::sort(measured.begin(), measured.end(),
              [](const TimingSample& a, const TimingSample& b) { return a.bytes < b.bytes; });
    for (std::size_t m = 0; m < measured.size(); ++m) {
      if (measured[m].bytes == 0 || (m > 0 && measured[m - 1].bytes == measured[m].bytes)) {
        return InvalidArgument(fmt::format(
            "profile: reduce_scatter group_size {}: measured send_bytes {} must be > 0 and "
            "distinct",
            entry.group_size, measured[m].bytes));
      }
      if (!std::isfinite(measured[m].time_us) || measured[m].time_us < 0) {
        return InvalidArgument(fmt::format(
            "profile: reduce_scatter group_size {}: measured time_us at {} bytes must be >= 0",
            entry.group_size, measured[m].bytes));
      }
    }
  }
  if (!std::isfinite(copy_GBps) || copy_GBps <= 0) {
    return InvalidArgument("profile: copy_GBps must be > 0");
  }
  return Status::Ok();
}

AlphaBeta TimeProfile::ReduceScatterAt(int group_size) const {
  BUCKETSIM_CHECK(!reduce_scatter.empty());
  auto upper =
      std::lower_bound(reduce_scatter.begin(), reduce_scatter.end(), group_size,
                       [](const AlphaBeta& entry, int size) { return entry.group_size < size; });
  // The figures of the nearest entry outside the listed sizes; the group size stays the asked
  // one, which the (n-1)/n factor needs.
  if (upper == reduce_scatter.end()) {
    return {group_size, reduce_scatter.back().alpha_us, reduce_scatter.back().busbw_GBps, {}};
  }
  if (upper->group_size == group_size || upper == reduce_scatter.begin()) {
    return {group_size, upper->alpha_us, upper->busbw_GBps, {}};
  }
  const AlphaBeta& lower = *(upper - 1);
  double t = (std::log2(group_size) - std::log2(lower.group_size)) /
             (std::log2(upper->group_size) - std::log2(lower.group_size));
  return {group_size,
          lower.alpha_us + t * (upper->alpha_us - lower.alpha_us),
          lower.busbw_GBps + t * (upper->busbw_GBps - lower.busbw_GBps),
          {}};
}

Micros AlphaBetaTime(const AlphaBeta& model, Bytes send_bytes) {
  int n = std::max(model.group_size, 1);
  double bus_bytes = static_cast<double>(send_bytes) * (n - 1) / n;
  return model.alpha_us + bus_bytes / (model.busbw_GBps * 1e3);
}

namespace {

Micros Interpolate(const AlphaBeta& entry, Bytes send_bytes) {
  const std::vector<TimingSample>& points = entry.measured;
  if (send_bytes <= points.front().bytes) return points.front().time_us;
  auto upper =
      std::lower_bound(points.begin(), points.end(), send_bytes,
                       [](const TimingSample& point, Bytes bytes) { return point.bytes < bytes; });
  if (upper != points.end()) {
    const TimingSample& lower = *(upper - 1);
    double t = static_cast<double>(send_bytes - lower.bytes) /
               static_cast<double>(upper->bytes - lower.bytes);
    return lower.time_us + t * (upper->time_us - lower.time_us);
  }
  const TimingSample& last = points.back();
  const Bytes extra = send_bytes - last.bytes;
  if (points.size() >= 2) {
    const TimingSample& before = points[points.size() - 2];
    double slope = (last.time_us - before.time_us) / static_cast<double>(last.bytes - before.bytes);
    if (slope > 0) return last.time_us + slope * static_cast<double>(extra);
  }
  return last.time_us + AlphaBetaTime({entry.group_size, 0, entry.busbw_GBps, {}}, extra);
}

}  // namespace

Micros TimeProfile::ReduceScatterTime(Bytes send_bytes, int group_size) const {
  for (const AlphaBeta& entry : reduce_scatter) {
    if (entry.group_size == group_size && !entry.measured.empty()) {
      return Interpolate(entry, send_bytes);
    }
  }
  return AlphaBetaTime(ReduceScatterAt(group_size), send_bytes);
}

Micros TimeProfile::AllReduceTime(Bytes bytes, int group_size) const {
  return 2 * ReduceScatterTime(bytes, group_size);
}

Micros TimeProfile::AllGatherTime(Bytes bytes, int group_size) const {
  return ReduceScatterTime(bytes, group_size);
}

Micros TimeProfile::CopyTime(Bytes bytes) const {
  return static_cast<double>(bytes) / (copy_GBps * 1e3);
}

TimeProfile EstimateTimeProfile(const GpuSpec& gpu, const GpuEfficiency& efficiency) {
  TimeProfile profile;
  profile.name = fmt::format("{}-estimate", gpu.name);
  profile.provenance.kind = "estimate";
  profile.provenance.description = fmt::format(
      "{} from its published rates (core/gpu_catalog.cc): reduce-scatter alpha {} us, busbw "
      "{} at efficiency {:.4g}; copies at half of {} GB/s device memory x {:.4g}. An estimate, "
      "not a measurement",
      gpu.description, kEstimateAlphaUs,
      gpu.nvlink_ranks >= 2 ? fmt::format("NVLink {} GB/s per direction (groups up to {}), host "
                                          "link {} GB/s above",
                                          gpu.nvlink_GBps, gpu.nvlink_ranks, gpu.host_link_GBps)
                            : fmt::format("host link {} GB/s per direction", gpu.host_link_GBps),
      efficiency.link, gpu.hbm_GBps, efficiency.memory);
  profile.provenance.sources = {"bucketsim src/core/gpu_catalog.cc (vendor datasheets)",
                                "traces/profiles/h100-8gpu-nvlink.json (alpha, link efficiency)"};
  if (gpu.nvlink_ranks >= 2) {
    profile.reduce_scatter.push_back(
        {gpu.nvlink_ranks, kEstimateAlphaUs, gpu.nvlink_GBps * efficiency.link, {}});
  }
  const int host_group = gpu.nvlink_ranks >= 2 ? 2 * gpu.nvlink_ranks : 2;
  if (gpu.nvlink_ranks < 8) {
    profile.reduce_scatter.push_back(
        {host_group, kEstimateAlphaUs, gpu.host_link_GBps * efficiency.link, {}});
  }
  profile.copy_GBps = gpu.hbm_GBps / 2 * efficiency.memory;
  BUCKETSIM_CHECK(profile.Validate().ok());
  return profile;
}

}  // namespace bucketsim
