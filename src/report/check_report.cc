#include "report/check_report.h"

#include <cmath>

#include <fmt/format.h>

#include "core/size_format.h"
#include "report/console_table.h"

namespace bucketsim {
namespace {

const char* VerdictWord(Verdict verdict) {
  switch (verdict) {
    case Verdict::kPass:
      return "PASS";
    case Verdict::kFail:
      return "FAIL";
    case Verdict::kSkipped:
      return "SKIP";
  }
  return "?";
}

std::string Value(const CheckOutcome& outcome, const Amount& amount) {
  if (outcome.is_time()) return fmt::format("{:.1f} us", amount.us);
  return fmt::format("{} ({} B)", FormatBytes(amount.bytes), amount.bytes);
}

// "+2.00 MiB (+2097152 B, +50.00%)", "-1.0 us (-0.29%)", "+512 B (+512 B, from 0 B)".
std::string Delta(const CheckOutcome& outcome) {
  double value = outcome.is_time() ? outcome.value.us : static_cast<double>(outcome.value.bytes);
  double base = outcome.is_time() ? outcome.limit.us : static_cast<double>(outcome.limit.bytes);
  char sign = value >= base ? '+' : '-';
  std::string percent = base > 0
                            ? fmt::format("{}{:.2f}%", sign, std::fabs(value - base) / base * 100)
                            : std::string("from 0");
  if (outcome.is_time()) {
    return fmt::format("{}{:.1f} us ({})", sign, std::fabs(value - base), percent);
  }
  Bytes a = outcome.value.bytes;
  Bytes b = outcome.limit.bytes;
  Bytes diff = a >= b ? a - b : b - a;
  return fmt::format("{}{} ({}{} B, {})", sign, FormatBytes(diff), sign, diff, percent);
}

std::string Allowed(const CheckOutcome& outcome) {
  std::string tolerance = outcome.tolerance.empty() ? "0" : outcome.tolerance;
  if (outcome.is_time())
    return fmt::format("tolerance {} (+{:.1f} us)", tolerance, outcome.allowed_growth.us);
  return fmt::format("tolerance {} (+{} B)", tolerance, outcome.allowed_growth.bytes);
}

std::string BaselineText(const CheckOutcome& outcome) {
  std::string head = fmt::format("{} vs baseline {}: ", Value(outcome, outcome.value),
                                 Value(outcome, outcome.limit));
  bool same = outcome.is_time() ? outcome.value.us == outcome.limit.us
                                : outcome.value.bytes == outcome.limit.bytes;
  bool grew = outcome.is_time() ? outcome.value.us > outcome.limit.us
                                : outcome.value.bytes > outcome.limit.bytes;
  if (same) return head + "unchanged";
  if (!grew) return head + Delta(outcome) + ", an improvement";
  return head + fmt::format("{} {} {}", Delta(outcome),
                            outcome.verdict == Verdict::kFail ? "exceeds" : "within",
                            Allowed(outcome));
}

// "fits 80.00 GiB of device memory: peak reserved R + 1.07 GiB outside the caching allocator
// (...) = T (T B), S to spare"; when it did not fit, what the allocator had and where it ran
// out.
std::string DeviceText(const CheckOutcome& outcome) {
  const DeviceBudget& device = *outcome.device;
  const std::string outside =
      DescribeDeviceOverhead(device.overhead) + " outside the caching allocator";
  if (outcome.verdict != Verdict::kPass) {
    std::string where =
        outcome.oom ? DescribeOom(*outcome.oom)
                    : fmt::format("peak reserved + overhead is {}", Value(outcome, outcome.value));
    return fmt::format("does not fit {} of device memory: {} leaves {} ({} B) to it; {}",
                       FormatBytes(outcome.limit.bytes), outside,
                       FormatBytes(device.allocator_capacity_bytes),
                       device.allocator_capacity_bytes, where);
  }
  const Bytes reserved = outcome.value.bytes - device.overhead.total_bytes();
  return fmt::format("fits {} of device memory: peak reserved {} ({} B) + {} = {}, {} to spare",
                     FormatBytes(outcome.limit.bytes), FormatBytes(reserved), reserved, outside,
                     Value(outcome, outcome.value),
                     FormatBytes(outcome.limit.bytes - outcome.value.bytes));
}

}  // namespace

std::string CheckLine(const CheckOutcome& outcome) {
  std::string head = fmt::format("{} {}: ", VerdictWord(outcome.verdict), outcome.policy);
  switch (outcome.kind) {
    case CheckKind::kFitsDevice:
      return head + DeviceText(outcome);
    case CheckKind::kBudget:
      return head + fmt::format("{} {} {} budget {}", FigureName(outcome.figure, outcome.mark),
                                Value(outcome, outcome.value),
                                outcome.verdict == Verdict::kPass ? "within" : "exceeds",
                                Value(outcome, outcome.limit));
    case CheckKind::kBaseline:
      if (outcome.verdict == Verdict::kSkipped) {
        return head + "baseline comparison skipped: " + outcome.skipped_because;
      }
      return head + FigureName(outcome.figure, outcome.mark) + " " + BaselineText(outcome);
  }
  return head;
}

CheckTally Tally(const std::vector<CheckOutcome>& outcomes) {
  CheckTally tally;
  for (const CheckOutcome& outcome : outcomes) {
    switch (outcome.verdict) {
      case Verdict::kPass:
        ++tally.passed;
        break;
      case Verdict::kFail:
        ++tally.failed;
        break;
      case Verdict::kSkipped:
        ++tally.skipped;
        break;
    }
  }
  return tally;
}

std::string VerdictLine(const std::vector<CheckOutcome>& outcomes) {
  CheckTally tally = Tally(outcomes);
  return fmt::format("verdict: {} ({} check{}: {} passed, {} failed, {} skipped)",
                     tally.failed > 0 ? "FAIL" : "PASS", tally.total(),
                     tally.total() == 1 ? "" : "s", tally.passed, tally.failed, tally.skipped);
}

}  // namespace bucketsim
