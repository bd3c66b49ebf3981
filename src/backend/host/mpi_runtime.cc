// The host backend's MPI side. The replay over MPI arrives with the real-execution issue; what
// is here already is the probe of the MPI library the build linked against.
#include <mpi.h>

#include "backend/availability.h"

namespace bucketsim {

BackendAvailability ProbeHostBackend() {
  BackendAvailability result{"host", true, true, ""};
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  // Callable before MPI_Init (MPI 3.0, §8.1.1).
  if (MPI_Get_library_version(version, &length) != MPI_SUCCESS) {
    result.usable = false;
    result.detail = "MPI_Get_library_version failed";
    return result;
  }
  std::string text(version, static_cast<std::size_t>(length));
  result.detail = text.substr(0, text.find_first_of("\n,"));
  return result;
}

}  // namespace bucketsim
