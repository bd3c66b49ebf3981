#include "backend/cuda/cuda_check.h"

#include <fmt/format.h>

namespace bucketsim {

Status CudaStatus(cudaError_t code, const char* call) {
  (void)cudaGetLastError();  // clear a non-sticky error so later calls report their own
  return DeviceError(
      fmt::format("{} failed: {} ({})", call, cudaGetErrorString(code), cudaGetErrorName(code)));
}

Status NcclStatus(ncclResult_t code, const char* call) {
  const char* detail = ncclGetLastError(nullptr);
  return DeviceError(fmt::format("{} failed: {}{}{}", call, ncclGetErrorString(code),
                                 detail != nullptr && *detail != '\0' ? ": " : "",
                                 detail != nullptr ? detail : ""));
}

}  // namespace bucketsim
