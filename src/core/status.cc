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

Status::Status(StatusCode code, std::string message)
    : error_(code == StatusCode::kOk ? nullptr : new Error{code, std::move(message)}) {}

Status::Status(const Status& other) : error_(other.ok() ? nullptr : new Error(*other.error_)) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) error_.reset(other.ok() ? nullptr : new Error(*other.error_));
  return *this;
}

const std::string& Status::message() const {
  static const std::string kNone;
  return ok() ? kNone : error_->message;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code())) + ": " + error_->message;
}

void CheckFailed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "bucketsim: internal error: check failed: %s at %s:%d\n", expr, file, line);
  std::abort();
}

}  // namespace bucketsim
