// The CUDA backend's availability in builds without nvcc or NCCL: every build has the
// same commands and `--backend cuda` can say clearly why it cannot run.
#include "backend/availability.h"

namespace bucketsim {

BackendAvailability ProbeCudaBackend() {
  return {"cuda", false, false,
          "not compiled: this build found no CUDA toolkit with NCCL (nvcc on PATH, nccl.h and "
          "libnccl beside the toolkit); reconfigure with CUDA installed"};
}

}  // namespace bucketsim
