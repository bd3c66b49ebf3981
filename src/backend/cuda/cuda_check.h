// The one way CUDA and NCCL return codes become Status values in the cuda backend:
// BUCKETSIM_CUDA_RETURN_IF_ERROR(call) and BUCKETSIM_NCCL_RETURN_IF_ERROR(call) return a
// DeviceError naming the call and the library's own error string (and NCCL's last error
// message, which says which peer or transport failed). The style of NCCL's checks.h.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "core/status.h"

namespace bucketsim {

Status CudaStatus(cudaError_t code, const char* call);
Status NcclStatus(ncclResult_t code, const char* call);

}  // namespace bucketsim

#define BUCKETSIM_CUDA_RETURN_IF_ERROR(call)                                          \
  do {                                                                                \
    if (cudaError_t bucketsim_cuda_code = (call); bucketsim_cuda_code != cudaSuccess) \
      return ::bucketsim::CudaStatus(bucketsim_cuda_code, #call);                     \
  } while (false)

#define BUCKETSIM_NCCL_RETURN_IF_ERROR(call)                                           \
  do {                                                                                 \
    if (ncclResult_t bucketsim_nccl_code = (call); bucketsim_nccl_code != ncclSuccess) \
      return ::bucketsim::NcclStatus(bucketsim_nccl_code, #call);                      \
  } while (false)
