// A host stand-in for a CUDA stream: one thread that runs the operations queued on it, in
// order. The engine's thread only enqueues; a wait between streams is an operation that blocks
// its worker until another worker has completed a given number of operations, as
// stream.wait_stream() blocks a stream on another's work. Each worker says what it is running
// and since when, for the watchdog.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace bucketsim {

class StreamWorker {
 public:
  using Clock = std::chrono::steady_clock;
  struct Busy {
    std::string what;
    Clock::time_point since;
  };

  explicit StreamWorker(std::string name);
  ~StreamWorker();  // finishes the queued operations, then joins
  StreamWorker(const StreamWorker&) = delete;
  StreamWorker& operator=(const StreamWorker&) = delete;

  // Queues `run`; returns its ticket: the number of operations issued so far, this one included.
  std::uint64_t Enqueue(std::string what, std::function<void()> run);
  std::uint64_t issued() const { return issued_; }  // engine thread only
  // Blocks the caller until the operation with `ticket` (and all before it) has completed.
  void WaitFor(std::uint64_t ticket);
  // What the worker is running now, if anything.
  std::optional<Busy> busy() const;
  const std::string& name() const { return name_; }

 private:
  struct Operation {
    std::string what;
    std::function<void()> run;
  };
  void Loop();

  std::string name_;
  std::uint64_t issued_ = 0;
  mutable std::mutex mutex_;
  std::condition_variable queued_;
  std::condition_variable completed_cv_;
  std::deque<Operation> queue_;
  std::uint64_t completed_ = 0;
  std::optional<Busy> busy_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace bucketsim
