#include "cli/progress_reporter.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "core/size_format.h"

namespace bucketsim {
namespace {

// A log gets a line every few seconds; a terminal a few times a second.
constexpr std::chrono::milliseconds kTerminalInterval{250};
constexpr std::chrono::milliseconds kLogInterval{5000};

std::string Count(std::uint64_t n) {
  if (n >= 10'000'000) return fmt::format("{:.0f}M", n / 1e6);
  if (n >= 1'000'000) return fmt::format("{:.1f}M", n / 1e6);
  if (n >= 10'000) return fmt::format("{:.0f}k", n / 1e3);
  return fmt::format("{}", n);
}

std::string Seconds(double s) {
  if (s < 60) return fmt::format("{:.0f} s", s);
  return fmt::format("{}m{:02.0f}s", static_cast<long long>(s / 60),
                     s - 60 * static_cast<long long>(s / 60));
}

// BUCKETSIM_PROGRESS_DELAY_MS shortens the delay: the test that runs a short trace under a
// pseudo-terminal sets it to 0.
std::chrono::milliseconds ProgressDelay() {
  if (const char* env = std::getenv("BUCKETSIM_PROGRESS_DELAY_MS"); env && *env) {
    return std::chrono::milliseconds(std::strtoll(env, nullptr, 10));
  }
  return kProgressDelay;
}

}  // namespace

ProgressMode ProgressModeOf(bool progress_flag, bool quiet_flag) {
  if (quiet_flag) return ProgressMode::kNever;
  return progress_flag ? ProgressMode::kAlways : ProgressMode::kAuto;
}

ProgressReporter::ProgressReporter(ProgressMode mode, std::string what, std::string detail)
    : terminal_(isatty(STDERR_FILENO) == 1),
      what_(std::move(what)),
      detail_(std::move(detail)),
      started_(Clock::now()),
      next_(started_ + ProgressDelay()) {
  enabled_ = mode == ProgressMode::kAlways || (mode == ProgressMode::kAuto && terminal_);
}

ProgressReporter::~ProgressReporter() {
  if (shown_ && terminal_) std::fprintf(stderr, "\r\033[K");
}

std::string ProgressReporter::Line(std::string_view what, std::string_view detail,
                                   std::uint64_t done_bytes, std::uint64_t total_bytes,
                                   std::uint64_t events, std::chrono::duration<double> elapsed) {
  const double seconds = std::max(elapsed.count(), 1e-9);
  std::string line = fmt::format("{}: {}", what, FormatBytes(done_bytes));
  if (total_bytes > 0) {
    line += fmt::format(" of {} ({:.0f}%)", FormatBytes(total_bytes),
                        100.0 * static_cast<double>(done_bytes) / static_cast<double>(total_bytes));
  }
  line += fmt::format(", {} events, {}/s", Count(events),
                      FormatBytes(static_cast<Bytes>(static_cast<double>(done_bytes) / seconds)));
  if (total_bytes > 0 && done_bytes > 0 && done_bytes <= total_bytes) {
    double left =
        seconds * static_cast<double>(total_bytes - done_bytes) / static_cast<double>(done_bytes);
    line += fmt::format(", ETA {}", Seconds(left));
  }
  if (!detail.empty()) line += fmt::format("; {}", detail);
  return line;
}

void ProgressReporter::Update(std::uint64_t done_bytes, std::uint64_t total_bytes,
                              std::uint64_t events) {
  if (!enabled_) return;
  const Clock::time_point now = Clock::now();
  if (now < next_) return;
  next_ = now + (terminal_ ? kTerminalInterval : kLogInterval);
  std::string line = Line(what_, detail_, done_bytes, total_bytes, events, now - started_);
  if (terminal_) {
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
  shown_ = true;
}

}  // namespace bucketsim
