#include "core/size_format.h"

#include <array>
#include <cctype>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

namespace bucketsim {
namespace {

struct Unit {
  std::string_view suffix;
  std::uint64_t factor;
};

constexpr std::array<Unit, 10> kUnits = {{
    {"B", 1},
    {"KiB", 1ull << 10},
    {"MiB", 1ull << 20},
    {"GiB", 1ull << 30},
    {"TiB", 1ull << 40},
    {"KB", 1'000},
    {"MB", 1'000'000},
    {"GB", 1'000'000'000},
    {"TB", 1'000'000'000'000},
    {"", 1},
}};

// Exact arithmetic: a size is read as the integer of its digits over a power of ten, never
// through a double, which rounds integers above 2^53 (libFuzzer found "9007199254740993").
__extension__ typedef unsigned __int128 Wide;
constexpr Wide kWideMax = ~Wide{0};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// "12.50" -> digits 1250 over 10^2; false when it is not digits with at most one point, or when
// it has more significant digits than 128 bits hold (38: far beyond any 64-bit size).
bool ReadDecimal(std::string_view number, Wide& digits, Wide& scale) {
  std::size_t point = number.find('.');
  std::string_view whole = number.substr(0, point);
  std::string_view fraction =
      point == std::string_view::npos ? std::string_view() : number.substr(point + 1);
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  if (number.find_first_of("0123456789") == std::string_view::npos) return false;
  digits = 0;
  scale = 1;
  for (std::string_view part : {whole, fraction}) {
    for (char c : part) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
      Wide digit = static_cast<Wide>(c - '0');
      if (digits > (kWideMax - digit) / 10) return false;
      digits = digits * 10 + digit;
    }
  }
  for (std::size_t i = 0; i < fraction.size(); ++i) {
    if (scale > kWideMax / 10) return false;
    scale *= 10;
  }
  return true;
}

}  // namespace

Result<Bytes> ParseSize(std::string_view text) {
  std::string_view s = Trim(text);
  std::size_t digits_end = 0;
  while (digits_end < s.size() &&
         (std::isdigit(static_cast<unsigned char>(s[digits_end])) || s[digits_end] == '.')) {
    ++digits_end;
  }
  std::string_view number = s.substr(0, digits_end);
  std::string_view suffix = Trim(s.substr(digits_end));
  Wide digits = 0;
  Wide scale = 1;
  if (number.empty() || !ReadDecimal(number, digits, scale)) {
    return InvalidArgument(
        fmt::format("'{}' is not a size: expected a non-negative number with an optional unit "
                    "(B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)",
                    text));
  }
  for (const Unit& unit : kUnits) {
    if (suffix != unit.suffix) continue;
    if (digits > kWideMax / unit.factor) {
      return InvalidArgument(fmt::format("size '{}' does not fit in 64 bits", text));
    }
    Wide scaled = digits * unit.factor;
    if (scaled % scale != 0) {
      return InvalidArgument(fmt::format("size '{}' is not a whole number of bytes", text));
    }
    Wide bytes = scaled / scale;
    if (bytes > std::numeric_limits<Bytes>::max()) {
      return InvalidArgument(fmt::format("size '{}' does not fit in 64 bits", text));
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
