// Units of the model. Every quantity carries its unit in its type or its name: bytes are
// `Bytes`, durations are `Micros`, element counts are called `numel`. Keeping them as named
// aliases (not bare integers) makes a signature such as `Allocate(Bytes, StreamId)` read as
// what it means.
#pragma once

#include <cstdint>

namespace bucketsim {

using Bytes = std::uint64_t;
using Micros = double;
using Numel = std::uint64_t;

using StreamId = std::uint32_t;
using GroupId = std::uint64_t;
using EventIndex = std::uint64_t;

inline constexpr Bytes kKiB = 1024;
inline constexpr Bytes kMiB = 1024 * kKiB;
inline constexpr Bytes kGiB = 1024 * kMiB;

// Anything larger than this in one request is taken as a corrupt trace, not a real tensor:
// 1 PiB is beyond every accelerator's memory by three orders of magnitude.
inline constexpr Bytes kMaxSaneBytes = Bytes{1} << 50;

}  // namespace bucketsim
