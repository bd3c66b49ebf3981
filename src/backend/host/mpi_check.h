// The one way MPI return codes become Status values in the host backend (and in the cuda
// backend's MPI bootstrap): BUCKETSIM_MPI_RETURN_IF_ERROR(call) returns a DeviceError naming
// the call and MPI's own error string.
#pragma once

#include <mpi.h>

#include <string>

#include "core/status.h"

namespace bucketsim {

Status MpiStatus(int code, const char* call);

}  // namespace bucketsim

#define BUCKETSIM_MPI_RETURN_IF_ERROR(call)                                 \
  do {                                                                      \
    if (int bucketsim_mpi_code = (call); bucketsim_mpi_code != MPI_SUCCESS) \
      return ::bucketsim::MpiStatus(bucketsim_mpi_code, #call);             \
  } while (false)
