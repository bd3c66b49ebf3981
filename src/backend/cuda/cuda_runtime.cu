// The CUDA backend's device side. The NCCL replay arrives with the real-execution issue; what
// is here already is the probe: is there a driver and a device, and which NCCL is linked.
// Without a GPU the runtime answers "CUDA driver version is insufficient" or "no CUDA-capable
// device": that is reported, never fatal.
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "backend/availability.h"

namespace bucketsim {

BackendAvailability ProbeCudaBackend() {
  BackendAvailability result{"cuda", true, false, ""};
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  int runtime_version = 0;
  cudaRuntimeGetVersion(&runtime_version);
  // NCCL_VERSION_CODE since 2.9: major * 10000 + minor * 100 + patch.
  std::string libraries = "CUDA runtime " + std::to_string(runtime_version / 1000) + "." +
                          std::to_string(runtime_version % 1000 / 10) + ", NCCL " +
                          std::to_string(nccl_version / 10000) + "." +
                          std::to_string(nccl_version % 10000 / 100) + "." +
                          std::to_string(nccl_version % 100);
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error
    result.detail = libraries + "; no usable device: " + cudaGetErrorString(err);
    return result;
  }
  if (devices == 0) {
    result.detail = libraries + "; no CUDA device";
    return result;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  result.usable = true;
  result.detail = libraries + "; " + std::to_string(devices) + " device(s), device 0: " + prop.name;
  return result;
}

}  // namespace bucketsim
