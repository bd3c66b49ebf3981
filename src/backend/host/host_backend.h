// The host backend: the replay executed for real on CPUs, one MPI rank per process. Every
// buffer the policy creates exists as host memory (bucket data and output, the stack, cat and
// .contiguous() temporaries, bypass outputs); the stacked gradients are filled with the
// verification pattern, the bucket copy-in is a real copy, and every reduce-scatter is a real
// MPI_Reduce_scatter_block (an all-reduce a real MPI_Allreduce) on the communicator of its
// group object. Each trace stream is a
// StreamWorker thread: compute spans run there as timed waits (the device is busy, the host
// core is free) while the post-backward
// stream's worker runs the copies and collectives, so communication overlaps compute as it does
// on fairscale's post-backward CUDA stream.
//
// Memory is taken in host order, when the engine asks (as PyTorch's allocator serves requests
// when the program makes them), and given back once the stream it was released on has run
// everything queued before the release (as the caching allocator reuses a block in stream
// order). Trace allocations are accounted by the memory model; with `materialize_all` they are
// also allocated and touched, so the process's memory follows the trace.
//
// A failure other ranks may be blocked on (an MPI error, a failed allocation, a collective that
// outlives `timeout_s`) goes to `on_fatal`, which must end the job (MpiWorld::Abort). With a
// PeerWatch (peer_watch.h), each collective tells it the event reached, and a collective that
// outlives `timeout_s` while a peer has stopped answering is left to the watch, which names
// that peer; when every peer answers, a collective's timeout says so and names the rank furthest
// behind, if one is behind this rank.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/host/mpi_world.h"
#include "core/status.h"

namespace bucketsim {

class PeerWatch;

struct HostBackendOptions {
  bool materialize_all = false;
  bool verify = true;
  double compute_scale = 1.0;  // compute spans run for dur_us * compute_scale
  double timeout_s = 0;        // 0: no watchdog
  PeerWatch* peers = nullptr;  // the job's lost-rank watch, when there is one (not owned)
  std::function<void(const std::string& message)> on_fatal;
};

// The host backend for this rank of `world`. In a build without MPI (-DBUCKETSIM_MPI=OFF) it is
// NotCompiled, with the reason, so every build has `--backend host`.
Result<std::unique_ptr<Backend>> MakeHostBackend(MpiWorld& world, HostBackendOptions options);

}  // namespace bucketsim
