// `--backend cuda` in a build without CUDA: the same command, answered with the reason.
#include "backend/cuda/cuda_backend.h"

namespace bucketsim {

Result<std::unique_ptr<Backend>> MakeCudaBackend(MpiWorld& /*world*/,
                                                 const CudaBackendOptions& /*options*/) {
  return NotCompiled(
      "the cuda backend is not available: this bucketsim was built without CUDA (no nvcc with "
      "NCCL at configure time); rebuild where the CUDA toolkit and NCCL are installed");
}

}  // namespace bucketsim
