// The reduce-scatter bucketsim's host backend runs, without bucketsim: MPI_Reduce_scatter_block
// in a loop, for the collective sweep's comparison (collective_sweep.h: bucketsim must cost
// nothing measurable on top of MPI). MPI builds only; without MPI it is NotCompiled.
#pragma once

#include <vector>

#include "backend/host/mpi_world.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/trace_header.h"
#include "core/units.h"

namespace bucketsim {

// `warmup + iterations` reduce-scatters of `send_bytes` (float32 or float64) on a communicator of
// `group` made as the host backend makes its own (MPI may pick other algorithms for
// MPI_COMM_WORLD), each after a barrier and a refill of its input, as the backend's are timed;
// the slowest rank's time of each timed call, in µs.
Result<std::vector<Micros>> TimeBareReduceScatter(MpiWorld& world, const ProcessGroup& group,
                                                  DType dtype, Bytes send_bytes, int warmup,
                                                  int iterations);

}  // namespace bucketsim
