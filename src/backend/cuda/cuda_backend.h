// The cuda backend: replays a trace on one GPU per MPI rank. Buffers the policy creates live in
// device memory (cudaMallocAsync, stream-ordered), each trace stream runs on its own CUDA
// stream, reduce-scatters are ncclReduceScatter on one NCCL communicator per process-group
// object (bootstrapped over MPI), compute spans are calibrated spin kernels, waits between
// streams are CUDA events, and every span is timed with events read back at the iteration's end.
// In a build without CUDA the factory answers NotCompiled, so every build has `--backend cuda`.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "core/status.h"

namespace bucketsim {

class MpiWorld;

struct CudaBackendOptions {
  bool verify = true;            // check every reduced element against the analytic sum
  double compute_scale = 1.0;    // compute spans spin for dur_us * compute_scale
  double timeout_s = 0;          // watchdog; 0: none
  bool materialize_all = false;  // also allocate and touch the trace's own allocations
  // Called with the rank and cause of a failure other ranks may be blocked on (a timeout: the
  // watchdog calls it from its thread after aborting the NCCL communicators); must end the job
  // (MpiWorld::Abort), as HostBackendOptions::on_fatal.
  std::function<void(const std::string& message)> on_fatal;
};

// Selects this rank's GPU (its rank among the processes of its node; one rank per GPU). An
// error when the build has no CUDA (NotCompiled) or the machine no usable device (DeviceError
// with the runtime's reason, e.g. "CUDA driver version is insufficient for CUDA runtime
// version").
Result<std::unique_ptr<Backend>> MakeCudaBackend(MpiWorld& world,
                                                 const CudaBackendOptions& options);

}  // namespace bucketsim
