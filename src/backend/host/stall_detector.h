// A watcher thread's own stalls. The host backend's two watchers (PeerWatch, which names a peer
// silent for --timeout, and the watchdog, which ends a span running longer than --timeout) judge
// by the wall clock, ticking every few milliseconds. When this rank's process does not run (a
// SIGSTOP, a paused job or VM, a host too loaded to schedule it), neither does the watcher: its
// next tick comes late, and what it would measure then includes the pause, which no peer and no
// span caused. A paused job resumed after more than --timeout would otherwise abort on waking,
// every rank blaming another (or its own span) for a pause they all shared.
//
// So each watcher asks, at each tick, whether the gap since its previous tick exceeds a limit
// (a quarter of --timeout, many ticks): if so, the process was stalled, and the watcher counts
// from now: a peer's silence and a span's running time are measured only over time this rank was
// running and watching. A genuine hang is still caught, at most the stall later.
#pragma once

#include <chrono>

namespace bucketsim {

class StallDetector {
 public:
  using Clock = std::chrono::steady_clock;

  // `limit`: the longest gap between two ticks that is not a stall.
  explicit StallDetector(Clock::duration limit) : limit_(limit) {}

  // A quarter of `timeout_s`, the rule of both watchers.
  static Clock::duration LimitFor(double timeout_s) {
    return std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(timeout_s / 4));
  }

  // Call once per tick: whether more than the limit has passed since the previous call (or since
  // construction).
  bool Stalled(Clock::time_point now) {
    const bool stalled = now - last_tick_ > limit_;
    last_tick_ = now;
    return stalled;
  }

 private:
  Clock::duration limit_;
  Clock::time_point last_tick_ = Clock::now();
};

}  // namespace bucketsim
