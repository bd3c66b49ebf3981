// Reduce-scatter over a range of sizes, measured twice in the same job: through the host
// backend (the path a replay's collectives take: a stream worker, the group's communicator,
// the span the report times) and as a bare MPI_Reduce_scatter_block loop. The bench compares
// the two (bucketsim must cost nothing measurable on top of MPI); `calibrate` fits its time
// model to the backend's figures.
#pragma once

#include <vector>

#include "backend/host/mpi_world.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/units.h"

namespace bucketsim {

struct CollectiveSweepOptions {
  std::vector<Bytes> send_bytes;  // whole send buffers, as nccl-tests sizes a reduce-scatter
  int warmup = 2;
  int iterations = 10;
  DType dtype = DType::kFloat32;
};

// One size. Times are medians over the iterations of the slowest rank's time.
struct CollectiveSweepPoint {
  Bytes send_bytes = 0;
  int ranks = 1;
  Micros bare_us = 0;        // MPI_Reduce_scatter_block alone
  Micros backend_us = 0;     // the backend's collective span (what a report shows)
  Micros end_to_end_us = 0;  // issue to completion through the backend's worker
};

// Collective over the world: every rank must call it with the same options.
Result<std::vector<CollectiveSweepPoint>> RunCollectiveSweep(MpiWorld& world,
                                                             const CollectiveSweepOptions& options);

// from, 2*from, 4*from, ... up to `to` (both included when `to` is on the way).
std::vector<Bytes> DoublingSizes(Bytes from, Bytes to);

}  // namespace bucketsim
