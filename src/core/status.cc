#include "core/status.h"

namespace bucketsim {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kInvalidTrace:
      return "InvalidTrace";
    case StatusCode::kIoError:
      return "IoError";
    case StatusCode::kNotCompiled:
      return "NotCompiled";
    case StatusCode::kDeviceError:
      return "DeviceError";
    case StatusCode::kBudgetExceeded:
      return "BudgetExceeded";
    case StatusCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

void CheckFailed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "bucketsim: internal error: check failed: %s at %s:%d\n", expr, file, line);
  std::abort();
}

}  // namespace bucketsim
