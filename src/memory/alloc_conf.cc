#include "memory/alloc_conf.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <string>

#include <fmt/format.h>

namespace bucketsim {
namespace {

constexpr int kRoundupFirstLog2 = 20;          // the first interval starts at 1 MiB
constexpr std::uint64_t kMinSplitSizeMb = 20;  // kLargeBuffer in MiB

std::string_view Trim(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

Result<std::uint64_t> ParseUnsigned(std::string_view key, std::string_view value) {
  std::uint64_t parsed = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size()) {
    return InvalidArgument(
        fmt::format("alloc conf: {}: '{}' is not a non-negative integer", key, value));
  }
  return parsed;
}

Result<Bytes> ParseMegabytesAtLeast20(std::string_view key, std::string_view value) {
  Result<std::uint64_t> mb = ParseUnsigned(key, value);
  if (!mb.ok()) return mb.status();
  if (*mb < kMinSplitSizeMb) {
    return InvalidArgument(
        fmt::format("alloc conf: {}: {} is too small, must be >= {}", key, *mb, kMinSplitSizeMb));
  }
  // Larger values saturate to "unlimited", as PyTorch clamps them.
  return *mb >= AllocConf::kUnlimited / kMiB ? AllocConf::kUnlimited : *mb * kMiB;
}

Result<double> ParseThreshold(std::string_view key, std::string_view value) {
  double parsed = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() ||
      !(parsed > 0 && parsed < 1)) {
    return InvalidArgument(
        fmt::format("alloc conf: {}: '{}' is not a number in (0, 1)", key, value));
  }
  return parsed;
}

Result<bool> ParseBool(std::string_view key, std::string_view value) {
  if (value == "True") return true;
  if (value == "False") return false;
  return InvalidArgument(fmt::format("alloc conf: {}: '{}' is not True or False", key, value));
}

Result<std::uint64_t> ParseDivisions(std::string_view value, bool allow_zero) {
  Result<std::uint64_t> divisions = ParseUnsigned("roundup_power2_divisions", value);
  if (!divisions.ok()) return divisions.status();
  if (!std::has_single_bit(*divisions) && !(allow_zero && *divisions == 0)) {
    return InvalidArgument(
        fmt::format("alloc conf: roundup_power2_divisions: {} is not a power of two{}", *divisions,
                    allow_zero ? " or 0" : ""));
  }
  return *divisions;
}

// "[256:1,512:2,>:8]": each boundary is a power of two in MiB naming its interval; the first
// pair also fills every interval below it, ">" fills every interval after the last named one.
Status ParseDivisionsList(std::string_view list, AllocConf& conf) {
  auto& table = conf.roundup_power2_divisions;
  bool first = true;
  std::size_t last_index = 0;
  while (!list.empty()) {
    std::size_t comma = list.find(',');
    std::string_view pair = Trim(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    std::size_t colon = pair.find(':');
    if (colon == std::string_view::npos) {
      return InvalidArgument(fmt::format(
          "alloc conf: roundup_power2_divisions: '{}' is not boundary_mb:divisions", pair));
    }
    std::string_view boundary_text = Trim(pair.substr(0, colon));
    Result<std::uint64_t> divisions = ParseDivisions(Trim(pair.substr(colon + 1)), true);
    if (!divisions.ok()) return divisions.status();
    if (boundary_text == ">") {
      std::fill(table.begin() + static_cast<std::ptrdiff_t>(std::min(last_index + 1, table.size())),
                table.end(), *divisions);
      continue;
    }
    Result<std::uint64_t> boundary = ParseUnsigned("roundup_power2_divisions", boundary_text);
    if (!boundary.ok()) return boundary.status();
    if (!std::has_single_bit(*boundary)) {
      return InvalidArgument(fmt::format(
          "alloc conf: roundup_power2_divisions: boundary {} MB is not a power of two", *boundary));
    }
    std::size_t index = std::min<std::size_t>(std::bit_width(*boundary) - 1, table.size() - 1);
    if (first)
      std::fill(table.begin(), table.begin() + static_cast<std::ptrdiff_t>(index), *divisions);
    first = false;
    table[index] = *divisions;
    last_index = index;
  }
  return Status::Ok();
}

Status ParseRoundup(std::string_view value, AllocConf& conf) {
  if (value.starts_with('[')) {
    if (!value.ends_with(']')) {
      return InvalidArgument("alloc conf: roundup_power2_divisions: missing closing ']'");
    }
    return ParseDivisionsList(value.substr(1, value.size() - 2), conf);
  }
  Result<std::uint64_t> divisions = ParseDivisions(value, false);
  if (!divisions.ok()) return divisions.status();
  conf.roundup_power2_divisions.fill(*divisions);
  return Status::Ok();
}

template <typename T>
Status Assign(Result<T> parsed, T& field) {
  if (!parsed.ok()) return parsed.status();
  field = *parsed;
  return Status::Ok();
}

Status SetOption(std::string_view key, std::string_view value, AllocConf& conf) {
  if (key == "max_split_size_mb") {
    return Assign(ParseMegabytesAtLeast20(key, value), conf.max_split_size);
  }
  if (key == "max_non_split_rounding_mb") {
    return Assign(ParseMegabytesAtLeast20(key, value), conf.max_non_split_rounding);
  }
  if (key == "garbage_collection_threshold") {
    return Assign(ParseThreshold(key, value), conf.garbage_collection_threshold);
  }
  if (key == "expandable_segments") return Assign(ParseBool(key, value), conf.expandable_segments);
  if (key == "roundup_power2_divisions") return ParseRoundup(value, conf);
  if (key == "backend") {
    if (value == "native") return Status::Ok();
    if (value == "cudaMallocAsync") {
      return InvalidArgument(
          "alloc conf: backend:cudaMallocAsync is not modelled (only the native caching "
          "allocator is)");
    }
    return InvalidArgument(
        fmt::format("alloc conf: backend: '{}' is not native or cudaMallocAsync", value));
  }
  if (key == "release_lock_on_cudamalloc") return ParseBool(key, value).status();
  if (key.starts_with("pinned_")) return Status::Ok();  // the host allocator, not device memory
  if (key == "large_segment_size_mb" || key == "per_process_memory_fraction" ||
      key == "graph_capture_record_stream_reuse") {
    return InvalidArgument(fmt::format(
        "alloc conf: {} is not modelled (it changes device memory; the device capacity is a "
        "separate setting)",
        key));
  }
  return InvalidArgument(fmt::format("alloc conf: unknown key '{}'", key));
}

// The next top-level "key:value" entry: commas inside [...] belong to the value.
std::string_view NextEntry(std::string_view& rest) {
  std::size_t depth = 0;
  std::size_t i = 0;
  for (; i < rest.size(); ++i) {
    if (rest[i] == '[') ++depth;
    if (rest[i] == ']' && depth > 0) --depth;
    if (rest[i] == ',' && depth == 0) break;
  }
  std::string_view entry = rest.substr(0, i);
  rest = i == rest.size() ? std::string_view() : rest.substr(i + 1);
  return Trim(entry);
}

}  // namespace

std::uint64_t AllocConf::RoundupDivisions(Bytes size) const {
  int log2_size = std::bit_width(size) - 1;
  int index = std::clamp(log2_size - kRoundupFirstLog2, 0, int{kRoundupIntervals} - 1);
  return roundup_power2_divisions[static_cast<std::size_t>(index)];
}

Result<AllocConf> ParseAllocConf(std::string_view text) {
  AllocConf conf;
  std::string_view rest = Trim(text);
  while (!rest.empty()) {
    std::string_view entry = NextEntry(rest);
    std::size_t colon = entry.find(':');
    if (colon == std::string_view::npos) {
      return InvalidArgument(fmt::format("alloc conf: '{}' is not key:value", entry));
    }
    BUCKETSIM_RETURN_IF_ERROR(
        SetOption(Trim(entry.substr(0, colon)), Trim(entry.substr(colon + 1)), conf));
  }
  return conf;
}

}  // namespace bucketsim
