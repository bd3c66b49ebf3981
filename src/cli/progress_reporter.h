// Progress of long work on stderr: "reading gpt.json: 412.0 MiB of 1.20 GiB (34%), 2.1M
// events, 96.3 MiB/s, ETA 8 s; 4 policies". The reader and the engine never print: they call
// back (io/trace_reader.h's ReadProgress, an event count) and this reporter decides what
// reaches the terminal.
//
// Shown only when stderr is a terminal, so pipes and CI logs stay clean, or when --progress asks
// for it anyway; --quiet silences it. Nothing appears before the work has run for
// kProgressDelay (about 2 s; BUCKETSIM_PROGRESS_DELAY_MS overrides it, for tests): a short
// command prints nothing. On a terminal the line is
// rewritten in place and erased at the end; elsewhere (--progress into a log) one line is
// written every few seconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace bucketsim {

enum class ProgressMode { kAuto, kAlways, kNever };

// --progress wins over the terminal test, --quiet over both.
ProgressMode ProgressModeOf(bool progress_flag, bool quiet_flag);

inline constexpr std::chrono::milliseconds kProgressDelay{2000};

class ProgressReporter {
 public:
  using Clock = std::chrono::steady_clock;

  // `what`: the work ("reading gpt.json"); `detail`: what it is done for ("4 policies").
  ProgressReporter(ProgressMode mode, std::string what, std::string detail);
  ~ProgressReporter();  // erases a line left on a terminal
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  // The work so far: `done_bytes` of `total_bytes` (0: unknown, no percentage or ETA) and the
  // events handed on. Cheap when nothing is due: call it as often as convenient.
  void Update(std::uint64_t done_bytes, std::uint64_t total_bytes, std::uint64_t events);

  // The line Update would print at `elapsed` (tests pin the format with it).
  static std::string Line(std::string_view what, std::string_view detail, std::uint64_t done_bytes,
                          std::uint64_t total_bytes, std::uint64_t events,
                          std::chrono::duration<double> elapsed);

  bool enabled() const { return enabled_; }

 private:
  bool enabled_ = false;
  bool terminal_ = false;
  bool shown_ = false;
  std::string what_;
  std::string detail_;
  Clock::time_point started_;
  Clock::time_point next_;
};

}  // namespace bucketsim
