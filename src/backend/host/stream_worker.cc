#include "backend/host/stream_worker.h"

#include <sys/prctl.h>

namespace bucketsim {

StreamWorker::StreamWorker(std::string name)
    : name_(std::move(name)), thread_([this] { Loop(); }) {}

StreamWorker::~StreamWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  thread_.join();
}

std::uint64_t StreamWorker::Enqueue(std::string what, std::function<void()> run) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({std::move(what), std::move(run)});
  }
  queued_.notify_one();
  return ++issued_;
}

void StreamWorker::WaitFor(std::uint64_t ticket) {
  std::unique_lock lock(mutex_);
  completed_cv_.wait(lock, [&] { return completed_ >= ticket; });
}

std::optional<StreamWorker::Busy> StreamWorker::busy() const {
  std::lock_guard lock(mutex_);
  return busy_;
}

void StreamWorker::Loop() {
  // Sleeps end within a microsecond or two of their deadline rather than the default 50 us timer
  // slack later (prctl(2) PR_SET_TIMERSLACK; per thread).
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  std::unique_lock lock(mutex_);
  while (true) {
    queued_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued has run
    Operation operation = std::move(queue_.front());
    queue_.pop_front();
    busy_ = Busy{std::move(operation.what), Clock::now()};
    lock.unlock();
    operation.run();
    lock.lock();
    busy_.reset();
    ++completed_;
    completed_cv_.notify_all();
  }
}

}  // namespace bucketsim
