// Errors as values. A `Status` is OK or carries a named kind and a message; `Result<T>` is a
// value or a non-OK Status. Functions at a boundary (file, trace, device, budget) return these;
// programming errors inside the tool are caught by BUCKETSIM_CHECK, which is always on and
// aborts with the location, because continuing past a broken invariant would produce wrong
// numbers that look right.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <variant>

namespace bucketsim {

enum class StatusCode {
  kOk,
  kInvalidArgument,  // a flag or option the user gave is wrong
  kInvalidTrace,     // the trace is malformed or inconsistent
  kIoError,          // a file could not be read or written
  kNotCompiled,      // the feature needs a component this build does not have
  kDeviceError,      // a CUDA/NCCL/MPI call failed
  kBudgetExceeded,   // a memory or time budget is broken
  kInternal,         // a bug in bucketsim
};

const char* StatusCodeName(StatusCode code);

// An OK Status is one null pointer: every event of a replay passes several through its sinks,
// and building, moving and destroying an empty std::string for each was a measurable part of the
// cost per event. Only an error allocates (its kind and message). (leveldb's Status does the
// same.)
class [[nodiscard]] Status {
 public:
  Status() = default;
  // A kOk `code` makes an OK Status (the message is dropped).
  Status(StatusCode code, std::string message);
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&& other) noexcept = default;
  Status& operator=(Status&& other) noexcept = default;
  ~Status() = default;

  static Status Ok() { return {}; }

  bool ok() const { return error_ == nullptr; }
  StatusCode code() const { return ok() ? StatusCode::kOk : error_->code; }
  // Empty when OK.
  const std::string& message() const;
  // "InvalidTrace: trace.json: event 12: free of unknown allocation id 7"
  std::string ToString() const;

 private:
  struct Error {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<const Error> error_;  // null: OK
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status InvalidTrace(std::string m) { return {StatusCode::kInvalidTrace, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status NotCompiled(std::string m) { return {StatusCode::kNotCompiled, std::move(m)}; }
inline Status DeviceError(std::string m) { return {StatusCode::kDeviceError, std::move(m)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(data_); }
  const Status& status() const;
  T& value() { return std::get<T>(data_); }
  const T& value() const { return std::get<T>(data_); }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<T, Status> data_;
};

template <typename T>
const Status& Result<T>::status() const {
  static const Status kOkStatus;
  return ok() ? kOkStatus : std::get<Status>(data_);
}

[[noreturn]] void CheckFailed(const char* expr, const char* file, int line);

}  // namespace bucketsim

// Always on, also in release builds: a failed check means a bug in bucketsim, never bad input.
#define BUCKETSIM_CHECK(cond)                                         \
  do {                                                                \
    if (!(cond)) ::bucketsim::CheckFailed(#cond, __FILE__, __LINE__); \
  } while (0)

#define BUCKETSIM_RETURN_IF_ERROR(expr)   \
  do {                                    \
    ::bucketsim::Status status_ = (expr); \
    if (!status_.ok()) return status_;    \
  } while (0)
