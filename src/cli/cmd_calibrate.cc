// mpirun -np N bucketsim calibrate --backend host|cuda -o PROFILE: measures reduce-scatter over a
// size sweep and contiguous copies through the backend (the spans `run` times), fits the sim's
// alpha-beta model to them, and writes a time profile (traces/profiles/README.md) marked
// "measured" with the machine, backend and ranks; --merge adds this world size to an existing
// profile. The measurement and fit are backend/host/calibration.h's; this file parses, makes
// the backend, prints as nccl-tests does and writes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/host/calibration.h"
#include "backend/host/collective_sweep.h"
#include "backend/host/host_backend.h"
#include "backend/host/mpi_world.h"
#include "backend/sim/alpha_beta_fit.h"
#include "backend/span_timing.h"
#include "cli/command.h"
#include "core/size_format.h"
#include "io/time_profile_io.h"

namespace bucketsim {
namespace {

struct CalibrateFlags {
  std::string backend = "host";
  std::string output;
  std::string merge;
  std::string name;
  std::string max_bytes = "64MiB";
  int iterations = 10;
  int passes = 3;
  double timeout_s = 300;
};

// The backend to measure, made as `run` makes it (without verification: timing only).
Result<std::unique_ptr<Backend>> MakeBackend(const CalibrateFlags& flags, MpiWorld& world) {
  auto on_fatal = AbortEveryRank(world);
  if (flags.backend == "cuda") {
    CudaBackendOptions options;
    options.verify = false;
    options.timeout_s = flags.timeout_s;
    options.on_fatal = on_fatal;
    Result<std::unique_ptr<Backend>> backend = MakeCudaBackend(world, options);
    if (!backend.ok()) {
      return Status(backend.status().code(),
                    fmt::format("--backend cuda: {}", backend.status().message()));
    }
    return backend;
  }
  HostBackendOptions options;
  options.verify = false;
  options.timeout_s = flags.timeout_s;
  options.on_fatal = on_fatal;
  Result<std::unique_ptr<Backend>> backend = MakeHostBackend(world, options);
  if (!backend.ok()) {
    return Status(backend.status().code(),
                  fmt::format("--backend host: {}", backend.status().message()));
  }
  return backend;
}

Result<TimeProfile> Calibrate(const CalibrateFlags& flags, MpiWorld& world) {
  Result<Bytes> max_bytes = ParseSizeFlag("--max-bytes", flags.max_bytes);
  if (!max_bytes.ok()) return max_bytes.status();
  CalibrationOptions options;
  options.backend_name = flags.backend;
  options.max_bytes = *max_bytes;
  options.iterations = flags.iterations;
  options.passes = flags.passes;
  options.name = flags.name;
  options.tool_version = BUCKETSIM_VERSION;
  options.merge_path = flags.merge;
  TimeProfile existing;
  if (!flags.merge.empty()) {
    Result<TimeProfile> read = ReadTimeProfile(flags.merge);
    if (!read.ok()) return read.status();
    existing = *read;
    options.merge_into = &existing;
  }
  BUCKETSIM_RETURN_IF_ERROR(CheckCalibration(world, options));
  Result<std::unique_ptr<Backend>> backend = MakeBackend(flags, world);
  // A backend that cannot start here (no GPU) fails every rank alike, before any collective.
  BUCKETSIM_RETURN_IF_ERROR(world.Agree(backend.status()));
  Result<TraceHeader> header = SweepHeader(world.size(), world.rank());
  if (!header.ok()) return header.status();
  BUCKETSIM_RETURN_IF_ERROR((*backend)->Start(*header));

  // Each size as it is measured, as nccl-tests prints them (its doc/PERFORMANCE.md: algbw is
  // the send buffer over the time, busbw that times (n-1)/n); the medians so far of each pass.
  if (world.rank() == 0) {
    std::printf("# reduce-scatter on %d ranks, %s, %d pass(es) of %d iterations\n", world.size(),
                flags.backend.c_str(), options.passes, options.iterations);
    std::printf("# %10s %6s %12s %12s %12s\n", "size (B)", "pass", "time (us)", "algbw (GB/s)",
                "busbw (GB/s)");
    std::fflush(stdout);
    options.on_measured = [&world](const CollectiveSweepPoint& point, int pass) {
      std::printf("  %10llu %6d %12.1f %12.3f %12.3f\n",
                  static_cast<unsigned long long>(point.send_bytes), pass + 1, point.backend_us,
                  AlgBandwidthGBps(point.send_bytes, point.backend_us),
                  BusBandwidthGBps(point.send_bytes, point.backend_us, world.size()));
      std::fflush(stdout);
    };
  }
  Result<Calibration> calibration = bucketsim::Calibrate(world, **backend, *header, options);
  if (!calibration.ok()) return calibration.status();
  if (world.rank() == 0) {
    const AlphaBeta& fit = calibration->fit;
    std::printf("reduce-scatter on %d ranks: alpha %.1f us, busbw %.3f GB/s; copy %.2f GB/s\n",
                world.size(), fit.alpha_us, fit.busbw_GBps, calibration->copy_GBps);
    std::printf(
        "%12s %14s %14s %8s  (the profile keeps the measurements; the line prices\n"
        "%12s %14s %14s %8s   sizes beyond them and summarises the machine)\n",
        "bytes", "measured (us)", "alpha-beta", "error", "", "", "(us)", "");
    double worst = 0;
    for (const TimingSample& s : calibration->samples) {
      Micros model = AlphaBetaTime(fit, s.bytes);
      double error = s.time_us > 0 ? model / s.time_us - 1 : 0;
      worst = std::max(worst, std::abs(error));
      std::printf("%12llu %14.1f %14.1f %+7.1f%%\n", static_cast<unsigned long long>(s.bytes),
                  s.time_us, model, 100 * error);
    }
    std::printf("largest alpha-beta error over the sweep: %.1f%%\n", 100 * worst);
  }
  return std::move(calibration->profile);
}

int RunCalibrate(const CalibrateFlags& flags) {
  Result<std::unique_ptr<MpiWorld>> world = MpiWorld::Init();
  if (!world.ok()) return ReportError(world.status());
  Result<TimeProfile> profile = Calibrate(flags, **world);
  Status agreed = (*world)->Agree(profile.status());
  if (!agreed.ok()) return (*world)->rank() == 0 ? ReportError(agreed) : kExitError;
  if ((*world)->rank() == 0) {
    Status written = WriteTimeProfile(flags.output, *profile);
    if (!written.ok()) return ReportError(written);
    std::printf("profile: %s\n", flags.output.c_str());
  }
  return kExitOk;
}

}  // namespace

void AddCalibrateCommand(CLI::App& command, CommandContext& context) {
  auto flags = std::make_shared<CalibrateFlags>();
  command
      .add_option("--backend", flags->backend, "The backend to measure: host (MPI), cuda (NCCL)")
      ->check(CLI::IsMember({"host", "cuda"}))
      ->capture_default_str();
  command.add_option("-o,--output", flags->output, "The profile to write")->required();
  command.add_option("--name", flags->name,
                     "The profile's name, quoted by reports (default measured-BACKEND; kept by "
                     "--merge)");
  command.add_option("--merge", flags->merge,
                     "An existing profile to add this job's group size to (replacing it)");
  command.add_option("--max-bytes", flags->max_bytes, "Largest send buffer of the sweep (SIZE)")
      ->capture_default_str();
  command.add_option("--iterations", flags->iterations, "Timed iterations per size and pass")
      ->check(NumberFlag({"--iterations", "", "10", NumberKind::kPositiveInteger}))
      ->capture_default_str();
  command
      .add_option("--passes", flags->passes,
                  "Sweeps over every size; each size's figure is the median of all its samples")
      ->check(NumberFlag({"--passes", "", "3", NumberKind::kPositiveInteger}))
      ->capture_default_str();
  AddTimeoutFlag(command, flags->timeout_s);
  command.footer(
      "Example (profiles for 2 and 4 ranks in one file):\n"
      "  mpirun -np 2 bucketsim calibrate -o profile.json\n"
      "  mpirun -np 4 bucketsim calibrate --merge profile.json -o profile.json");
  command.callback([flags, &context] { context.exit_code = RunCalibrate(*flags); });
}

}  // namespace bucketsim
