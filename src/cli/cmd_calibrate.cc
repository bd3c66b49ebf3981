// mpirun -np N bucketsim calibrate --backend host|cuda -o PROFILE: measures reduce-scatter over a
// size sweep and contiguous copies through the backend (the spans `run` times), fits the sim's
// alpha-beta model to them (weighted by relative error, so that small buckets count as much as
// large ones), and writes a time profile (traces/profiles/README.md)
// marked "measured" with the machine, backend and ranks. One job measures one group size (its
// world); --merge adds that size to an existing profile, so 2, 4 and 8 ranks make one file.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/cuda_backend.h"
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

std::vector<TimingSample> Samples(const std::vector<CollectiveSweepPoint>& points) {
  std::vector<TimingSample> samples;
  for (const CollectiveSweepPoint& p : points) samples.push_back({p.send_bytes, p.backend_us});
  return samples;
}

Result<TimeProfile> Calibrate(const CalibrateFlags& flags, MpiWorld& world) {
  if (world.size() < 2) {
    return InvalidArgument(
        "calibrate measures collectives: run it under mpirun with 2 or more ranks");
  }
  Result<Bytes> max_bytes = ParseSizeFlag("--max-bytes", flags.max_bytes);
  if (!max_bytes.ok()) return max_bytes.status();
  if (*max_bytes < 2 * kKiB) return InvalidArgument("--max-bytes: the sweep needs 2KiB or more");
  TimeProfile profile;
  if (!flags.merge.empty()) {
    Result<TimeProfile> existing = ReadTimeProfile(flags.merge);
    if (!existing.ok()) return existing.status();
    profile = *existing;
    if (profile.provenance.kind != "measured" || profile.provenance.backend != flags.backend) {
      return InvalidArgument(fmt::format(
          "--merge {}: a {} profile of backend '{}' cannot take figures measured on backend {}",
          flags.merge, profile.provenance.kind, profile.provenance.backend, flags.backend));
    }
  }
  Result<std::unique_ptr<Backend>> backend = MakeBackend(flags, world);
  // A backend that cannot start here (no GPU) fails every rank alike, before any collective.
  BUCKETSIM_RETURN_IF_ERROR(world.Agree(backend.status()));
  Result<TraceHeader> header = SweepHeader(world.size(), world.rank());
  if (!header.ok()) return header.status();
  BUCKETSIM_RETURN_IF_ERROR((*backend)->Start(*header));

  CollectiveSweepOptions options;
  options.send_bytes = HalfOctaveSizes(kKiB, *max_bytes);
  options.iterations = flags.iterations;
  options.passes = flags.passes;
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
  Result<std::vector<CollectiveSweepPoint>> collectives =
      MeasureBackendCollectives(world, **backend, *header, options);
  if (!collectives.ok()) return collectives.status();
  options.on_measured = nullptr;
  options.send_bytes = DoublingSizes(kMiB, std::max(*max_bytes, kMiB));
  Result<std::vector<CollectiveSweepPoint>> copies =
      MeasureBackendCopies(world, **backend, *header, options);
  if (!copies.ok()) return copies.status();

  std::vector<TimingSample> samples = Samples(*collectives);
  Result<AlphaBeta> fit = FitAlphaBeta(world.size(), samples, FitWeighting::kRelative);
  if (!fit.ok()) return fit.status();
  Result<double> copy = FitCopyBandwidth(Samples(*copies));
  if (!copy.ok()) return copy.status();

  if (flags.merge.empty()) {
    profile.name = flags.name.empty() ? fmt::format("measured-{}", flags.backend) : flags.name;
    profile.provenance.kind = "measured";
    profile.provenance.description = fmt::format(
        "bucketsim calibrate --backend {}: reduce-scatters of 1 KiB to {} through the backend "
        "(the span a replay times; two sizes per octave; median of {} passes of {} after {} "
        "warm-up, slowest rank, input refilled before each), alpha-beta "
        "fit weighted by relative error; copy bandwidth of contiguous copies through the "
        "backend's Copy, 1 MiB and up",
        flags.backend, FormatBytes(*max_bytes), options.passes, options.iterations, options.warmup);
    profile.provenance.backend = flags.backend;
    profile.provenance.tool_version = BUCKETSIM_VERSION;
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) profile.provenance.host = host;
    profile.copy_GBps = *copy;
  }
  std::erase_if(profile.reduce_scatter,
                [&](const AlphaBeta& e) { return e.group_size == world.size(); });
  profile.provenance.ranks = std::max(profile.provenance.ranks, world.size());
  AlphaBeta entry = *fit;
  entry.measured = samples;
  profile.reduce_scatter.push_back(std::move(entry));
  BUCKETSIM_RETURN_IF_ERROR(profile.Validate());
  if (world.rank() == 0) {
    std::printf("reduce-scatter on %d ranks: alpha %.1f us, busbw %.3f GB/s; copy %.2f GB/s\n",
                world.size(), fit->alpha_us, fit->busbw_GBps, *copy);
    std::printf(
        "%12s %14s %14s %8s  (the profile keeps the measurements; the line prices\n"
        "%12s %14s %14s %8s   sizes beyond them and summarises the machine)\n",
        "bytes", "measured (us)", "alpha-beta", "error", "", "", "(us)", "");
    double worst = 0;
    for (const TimingSample& s : samples) {
      Micros model = AlphaBetaTime(*fit, s.bytes);
      double error = s.time_us > 0 ? model / s.time_us - 1 : 0;
      worst = std::max(worst, std::abs(error));
      std::printf("%12llu %14.1f %14.1f %+7.1f%%\n", static_cast<unsigned long long>(s.bytes),
                  s.time_us, model, 100 * error);
    }
    std::printf("largest alpha-beta error over the sweep: %.1f%%\n", 100 * worst);
  }
  return profile;
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
