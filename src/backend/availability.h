// What a build can run on: whether each real backend was compiled in and, if so, whether it is
// usable on this machine right now (an MPI library present; a CUDA driver and device present).
// `bucketsim version` prints it; commands that need a backend check it before they start.
#pragma once

#include <string>

namespace bucketsim {

struct BackendAvailability {
  std::string name;
  bool compiled = false;
  bool usable = false;
  std::string detail;  // library versions, or why it is not usable
};

BackendAvailability ProbeHostBackend();
BackendAvailability ProbeCudaBackend();

}  // namespace bucketsim
