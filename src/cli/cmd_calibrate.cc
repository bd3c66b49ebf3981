// mpirun -np N bucketsim calibrate --backend host -o PROFILE: measures reduce-scatter over a size
// sweep through the host backend (the path `run` times) and the copy bandwidth of this machine,
// fits the sim's alpha-beta model to them, and writes a time profile (traces/profiles/README.md)
// marked "measured" with the machine, backend and ranks. One job measures one group size (its
// world); --merge adds that size to an existing profile, so 2, 4 and 8 ranks make one file.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "backend/host/collective_sweep.h"
#include "backend/host/mpi_world.h"
#include "backend/sim/alpha_beta_fit.h"
#include "cli/command.h"
#include "io/time_profile_io.h"

namespace bucketsim {
namespace {

struct CalibrateFlags {
  std::string backend = "host";
  std::string output;
  std::string merge;
  std::string max_bytes = "64MiB";
  int iterations = 10;
};

// Copy bandwidth of this process: memcpy of 1 MiB to 64 MiB, the median of five copies each.
std::vector<TimingSample> MeasureCopies() {
  using Clock = std::chrono::steady_clock;
  std::vector<TimingSample> samples;
  for (Bytes bytes = kMiB; bytes <= 64 * kMiB; bytes *= 4) {
    std::vector<char> src(bytes, 1);
    std::vector<char> dst(bytes, 0);
    std::vector<Micros> times;
    for (int i = 0; i < 6; ++i) {
      auto start = Clock::now();
      std::memcpy(dst.data(), src.data(), bytes);
      Micros us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
      if (i > 0) times.push_back(us);  // the first copy touches the pages
    }
    std::nth_element(times.begin(), times.begin() + 2, times.end());
    samples.push_back({bytes, times[2]});
  }
  return samples;
}

Result<TimeProfile> Calibrate(const CalibrateFlags& flags, MpiWorld& world) {
  if (flags.backend != "host") {
    return NotCompiled("calibrate --backend " + flags.backend +
                       ": only the host backend can be calibrated in this version");
  }
  if (world.size() < 2) {
    return InvalidArgument(
        "calibrate measures collectives: run it under mpirun with 2 or more ranks");
  }
  Result<Bytes> max_bytes = ParseSizeFlag("--max-bytes", flags.max_bytes);
  if (!max_bytes.ok()) return max_bytes.status();
  CollectiveSweepOptions options;
  options.send_bytes = DoublingSizes(kKiB, *max_bytes);
  options.iterations = flags.iterations;
  Result<std::vector<CollectiveSweepPoint>> points = RunCollectiveSweep(world, options);
  if (!points.ok()) return points.status();
  std::vector<TimingSample> samples;
  for (const CollectiveSweepPoint& p : *points) samples.push_back({p.send_bytes, p.backend_us});
  Result<AlphaBeta> fit = FitAlphaBeta(world.size(), samples);
  if (!fit.ok()) return fit.status();
  std::vector<TimingSample> copies = MeasureCopies();
  Result<double> copy = FitCopyBandwidth(copies);
  if (!copy.ok()) return copy.status();

  TimeProfile profile;
  if (!flags.merge.empty()) {
    Result<TimeProfile> existing = ReadTimeProfile(flags.merge);
    if (!existing.ok()) return existing.status();
    profile = *existing;
    std::erase_if(profile.reduce_scatter,
                  [&](const AlphaBeta& e) { return e.group_size == world.size(); });
  } else {
    profile.name = "measured-host-mpi";
    profile.provenance.kind = "measured";
    profile.provenance.description =
        "bucketsim calibrate --backend host: reduce-scatter through the host backend (median "
        "of the slowest rank per size), alpha-beta least-squares fit; memcpy copy bandwidth";
    profile.provenance.backend = "host";
    profile.provenance.tool_version = BUCKETSIM_VERSION;
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) profile.provenance.host = host;
    profile.copy_GBps = *copy;
  }
  profile.provenance.ranks = std::max(profile.provenance.ranks, world.size());
  profile.reduce_scatter.push_back(*fit);
  BUCKETSIM_RETURN_IF_ERROR(profile.Validate());
  if (world.rank() == 0) {
    std::printf("reduce-scatter on %d ranks: alpha %.1f us, busbw %.3f GB/s; copy %.2f GB/s\n",
                world.size(), fit->alpha_us, fit->busbw_GBps, *copy);
    std::printf("%12s %14s %14s\n", "bytes", "measured (us)", "model (us)");
    for (const TimingSample& s : samples) {
      std::printf("%12llu %14.1f %14.1f\n", static_cast<unsigned long long>(s.bytes), s.time_us,
                  AlphaBetaTime(*fit, s.bytes));
    }
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
  command.add_option("--backend", flags->backend, "The backend to measure (host)")
      ->capture_default_str();
  command.add_option("-o,--output", flags->output, "The profile to write")->required();
  command.add_option("--merge", flags->merge,
                     "An existing profile to add this job's group size to (replacing it)");
  command.add_option("--max-bytes", flags->max_bytes, "Largest send buffer of the sweep (SIZE)")
      ->capture_default_str();
  command.add_option("--iterations", flags->iterations, "Timed iterations per size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command.footer(
      "Example (profiles for 2 and 4 ranks in one file):\n"
      "  mpirun -np 2 bucketsim calibrate -o profile.json\n"
      "  mpirun -np 4 bucketsim calibrate --merge profile.json -o profile.json");
  command.callback([flags, &context] { context.exit_code = RunCalibrate(*flags); });
}

}  // namespace bucketsim
