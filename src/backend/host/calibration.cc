#include "backend/host/calibration.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "core/size_format.h"

namespace bucketsim {
namespace {

std::vector<TimingSample> Samples(const std::vector<CollectiveSweepPoint>& points) {
  std::vector<TimingSample> samples;
  for (const CollectiveSweepPoint& p : points) samples.push_back({p.send_bytes, p.backend_us});
  return samples;
}

}  // namespace

Status CheckCalibration(const MpiWorld& world, const CalibrationOptions& options) {
  if (world.size() < 2) {
    return InvalidArgument(
        "calibrate measures collectives: run it under mpirun with 2 or more ranks");
  }
  if (options.max_bytes < 2 * kKiB) {
    return InvalidArgument("--max-bytes: the sweep needs 2KiB or more");
  }
  if (const TimeProfile* existing = options.merge_into;
      existing != nullptr && (existing->provenance.kind != "measured" ||
                              existing->provenance.backend != options.backend_name)) {
    return InvalidArgument(fmt::format(
        "--merge {}: a {} profile of backend '{}' cannot take figures measured on backend {}",
        options.merge_path, existing->provenance.kind, existing->provenance.backend,
        options.backend_name));
  }
  return Status::Ok();
}

Result<Calibration> Calibrate(MpiWorld& world, Backend& backend, const TraceHeader& header,
                              const CalibrationOptions& options) {
  BUCKETSIM_RETURN_IF_ERROR(CheckCalibration(world, options));
  CollectiveSweepOptions sweep;
  sweep.send_bytes = HalfOctaveSizes(kKiB, options.max_bytes);
  sweep.iterations = options.iterations;
  sweep.passes = options.passes;
  sweep.on_measured = options.on_measured;
  Result<std::vector<CollectiveSweepPoint>> collectives =
      MeasureBackendCollectives(world, backend, header, sweep);
  if (!collectives.ok()) return collectives.status();
  sweep.on_measured = nullptr;
  sweep.send_bytes = DoublingSizes(kMiB, std::max(options.max_bytes, kMiB));
  Result<std::vector<CollectiveSweepPoint>> copies =
      MeasureBackendCopies(world, backend, header, sweep);
  if (!copies.ok()) return copies.status();

  Calibration out;
  out.warmup = sweep.warmup;
  out.passes = sweep.passes;
  out.iterations = sweep.iterations;
  out.samples = Samples(*collectives);
  Result<AlphaBeta> fit = FitAlphaBeta(world.size(), out.samples, FitWeighting::kRelative);
  if (!fit.ok()) return fit.status();
  out.fit = *fit;
  Result<double> copy = FitCopyBandwidth(Samples(*copies));
  if (!copy.ok()) return copy.status();
  out.copy_GBps = *copy;

  TimeProfile& profile = out.profile;
  if (options.merge_into != nullptr) {
    profile = *options.merge_into;
  } else {
    profile.name =
        options.name.empty() ? fmt::format("measured-{}", options.backend_name) : options.name;
    profile.provenance.kind = "measured";
    profile.provenance.description = fmt::format(
        "bucketsim calibrate --backend {}: reduce-scatters of 1 KiB to {} through the backend "
        "(the span a replay times; two sizes per octave; median of {} passes of {} after {} "
        "warm-up, slowest rank, input refilled before each), alpha-beta "
        "fit weighted by relative error; copy bandwidth of contiguous copies through the "
        "backend's Copy, 1 MiB and up",
        options.backend_name, FormatBytes(options.max_bytes), sweep.passes, sweep.iterations,
        sweep.warmup);
    profile.provenance.backend = options.backend_name;
    profile.provenance.tool_version = options.tool_version;
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) profile.provenance.host = host;
    profile.copy_GBps = out.copy_GBps;
  }
  // This world size's entry replaces the profile's own of that size.
  std::erase_if(profile.reduce_scatter,
                [&](const AlphaBeta& e) { return e.group_size == world.size(); });
  profile.provenance.ranks = std::max(profile.provenance.ranks, world.size());
  AlphaBeta entry = out.fit;
  entry.measured = out.samples;
  profile.reduce_scatter.push_back(std::move(entry));
  BUCKETSIM_RETURN_IF_ERROR(profile.Validate());
  return out;
}

}  // namespace bucketsim
