// `bucketsim calibrate`'s measurement and fit, in the library so that the command only parses,
// prints and writes: reduce-scatters over a size sweep and contiguous copies through a started
// backend (the spans a replay times), the sim's alpha-beta model fitted to the first (weighted
// by relative error, so that small buckets count as much as large ones) and a copy bandwidth to
// the second, as a time profile (traces/profiles/README.md) marked "measured". One job measures
// one group size (its world); merged into an existing measured profile of the same backend, it
// replaces that size's entry, so 2, 4 and 8 ranks make one file.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/host/collective_sweep.h"
#include "backend/host/mpi_world.h"
#include "backend/sim/alpha_beta_fit.h"
#include "backend/sim/time_profile.h"
#include "core/status.h"
#include "core/trace_header.h"

namespace bucketsim {

struct CalibrationOptions {
  std::string backend_name;       // "host", "cuda": the provenance's backend
  Bytes max_bytes = 64ull << 20;  // the sweep's largest send buffer, 2 KiB or more
  int iterations = 10;
  int passes = 3;
  // A new profile's name (empty: "measured-BACKEND") and the tool's version, for its provenance.
  std::string name;
  std::string tool_version;
  // The measured profile to add this world size to, or none: a new profile.
  const TimeProfile* merge_into = nullptr;
  std::string merge_path;  // for the message that refuses it
  // Each size of the collective sweep as it is measured (CollectiveSweepOptions::on_measured).
  std::function<void(const CollectiveSweepPoint& point, int pass)> on_measured;
};

struct Calibration {
  TimeProfile profile;                // validated
  AlphaBeta fit;                      // this world size's entry
  double copy_GBps = 0;               // what this job measured
  std::vector<TimingSample> samples;  // the collective sweep's medians, by size
  int warmup = 0;
  int passes = 0;
  int iterations = 0;
};

// Fails before measuring on a world of one rank, a sweep under 2 KiB, or a profile to merge into
// that is not a measured one of this backend. Collective over the world: every rank calls it,
// with `backend` started on `header` (SweepHeader).
Result<Calibration> Calibrate(MpiWorld& world, Backend& backend, const TraceHeader& header,
                              const CalibrationOptions& options);
// What the command checks before it starts a backend (the same as Calibrate's first checks).
Status CheckCalibration(const MpiWorld& world, const CalibrationOptions& options);

}  // namespace bucketsim
