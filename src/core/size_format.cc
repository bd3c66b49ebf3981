#include "core/size_format.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace bucketsim {
namespace {

struct Unit {
  std::string_view suffix;
  double factor;
};

constexpr std::array<Unit, 10> kUnits = {{
    {"B", 1.0},
    {"KiB", 1024.0},
    {"MiB", 1024.0 * 1024},
    {"GiB", 1024.0 * 1024 * 1024},
    {"TiB", 1024.0 * 1024 * 1024 * 1024},
    {"KB", 1e3},
    {"MB", 1e6},
    {"GB", 1e9},
    {"TB", 1e12},
    {"", 1.0},
}};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<Bytes> ParseSize(std::string_view text) {
  std::string_view s = Trim(text);
  std::size_t digits = 0;
  while (digits < s.size() &&
         (std::isdigit(static_cast<unsigned char>(s[digits])) || s[digits] == '.')) {
    ++digits;
  }
  std::string_view number = s.substr(0, digits);
  std::string_view suffix = Trim(s.substr(digits));
  double value = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (number.empty() || ec != std::errc() || end != number.data() + number.size()) {
    return InvalidArgument(
        fmt::format("'{}' is not a size: expected a non-negative number with an optional unit "
                    "(B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)",
                    text));
  }
  for (const Unit& unit : kUnits) {
    if (suffix != unit.suffix) continue;
    double bytes = value * unit.factor;
    if (!std::isfinite(bytes) || bytes >= 18446744073709551616.0) {
      return InvalidArgument(fmt::format("size '{}' does not fit in 64 bits", text));
    }
    if (bytes != std::floor(bytes)) {
      return InvalidArgument(fmt::format("size '{}' is not a whole number of bytes", text));
    }
    return static_cast<Bytes>(bytes);
  }
  return InvalidArgument(fmt::format(
      "size '{}' has an unknown unit '{}' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", text,
      suffix));
}

std::string FormatBytes(Bytes bytes) {
  if (bytes < kKiB) return fmt::format("{} B", bytes);
  if (bytes < kMiB) return fmt::format("{:.2f} KiB", static_cast<double>(bytes) / kKiB);
  if (bytes < kGiB) return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / kMiB);
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / kGiB);
}

}  // namespace bucketsim
