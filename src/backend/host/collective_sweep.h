// Timing sweeps over a range of sizes, run in an MPI job through a Backend: the path a replay's
// collectives and copies take (a stream worker or CUDA stream, the group's communicator, the span
// the report times). `calibrate` fits the sim's time model to these figures, for any backend.
// RunCollectiveSweep adds a bare MPI_Reduce_scatter_block loop in the same job, for the bench's
// comparison (bucketsim must cost nothing measurable on top of MPI).
#pragma once

#include <functional>
#include <vector>

#include "backend/backend.h"
#include "backend/host/mpi_world.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/trace_header.h"
#include "core/units.h"

namespace bucketsim {

// One size. Times are medians over the iterations (of every pass) of the slowest rank's time.
struct CollectiveSweepPoint {
  Bytes send_bytes = 0;
  int ranks = 1;
  Micros bare_us = 0;        // MPI_Reduce_scatter_block alone (RunCollectiveSweep only)
  Micros backend_us = 0;     // the backend's collective span (what a report shows)
  Micros end_to_end_us = 0;  // issue to completion through the backend
};

struct CollectiveSweepOptions {
  std::vector<Bytes> send_bytes;  // whole send buffers, as nccl-tests sizes a reduce-scatter
  int warmup = 3;
  int iterations = 20;
  int passes = 1;  // sweeps over every size; a size's figure is the median of all its samples
  DType dtype = DType::kFloat32;
  // Called on every rank after each size of each pass with the figures so far (medians of the
  // passes up to `pass`, 0-based): calibrate prints them as they come, as nccl-tests does.
  std::function<void(const CollectiveSweepPoint& point, int pass)> on_measured;
};

// The header of a one-group trace over the whole world (streams default and post_backward), for
// a backend that runs a sweep: pass it to Backend::Start.
Result<TraceHeader> SweepHeader(int world_size, int rank);

// Reduce-scatters over the world's group through `backend` (started with SweepHeader), each size
// `warmup + iterations` times. Collective over the world: every rank calls it with the same
// options.
Result<std::vector<CollectiveSweepPoint>> MeasureBackendCollectives(
    MpiWorld& world, Backend& backend, const TraceHeader& header,
    const CollectiveSweepOptions& options);

// Contiguous copies of `bytes` through `backend`'s Copy on the post-backward stream (the bucket
// copy-in's path): the median copy span per size, slowest rank. Collective over the world.
Result<std::vector<CollectiveSweepPoint>> MeasureBackendCopies(
    MpiWorld& world, Backend& backend, const TraceHeader& header,
    const CollectiveSweepOptions& options);

// MeasureBackendCollectives on a host backend, plus the bare MPI loop on a communicator made as
// the backend makes its own.
Result<std::vector<CollectiveSweepPoint>> RunCollectiveSweep(MpiWorld& world,
                                                             const CollectiveSweepOptions& options);

// from, 2*from, 4*from, ... up to `to` (both included when `to` is on the way).
std::vector<Bytes> DoublingSizes(Bytes from, Bytes to);
// DoublingSizes with 1.5x each size in between: two points per octave, for a curve with bends.
std::vector<Bytes> HalfOctaveSizes(Bytes from, Bytes to);

}  // namespace bucketsim
