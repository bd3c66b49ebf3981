// The settings of PyTorch's CUDA caching allocator that change how much memory it holds, parsed
// from a PYTORCH_CUDA_ALLOC_CONF string such as "expandable_segments:True,max_split_size_mb:128"
// (reference/caching_allocator.md §1.5). The parser follows the 2.9+ AcceleratorAllocatorConfig:
// in the list form of roundup_power2_divisions, ">" fills the intervals after the last named one.
// Options that change device memory but are not modelled (backend:cudaMallocAsync,
// large_segment_size_mb, per_process_memory_fraction, graph_capture_record_stream_reuse) are
// rejected rather than ignored, so a replay never silently answers for a different allocator;
// options that cannot change device memory (release_lock_on_cudamalloc, pinned_*) are accepted.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string_view>

#include "core/status.h"
#include "core/units.h"

namespace bucketsim {

struct AllocConf {
  static constexpr Bytes kUnlimited = std::numeric_limits<Bytes>::max();
  // One roundup interval per power of two from 1 MiB (index 0, also every smaller size) to
  // 32 GiB and above (index 15).
  static constexpr std::size_t kRoundupIntervals = 16;

  Bytes max_split_size = kUnlimited;         // max_split_size_mb
  Bytes max_non_split_rounding = 20 * kMiB;  // max_non_split_rounding_mb
  std::array<std::uint64_t, kRoundupIntervals> roundup_power2_divisions{};  // 0: off
  double garbage_collection_threshold = 0;  // 0: off, else in (0, 1)
  bool expandable_segments = false;

  // The divisions that apply to a request of `size` bytes (§1.2).
  std::uint64_t RoundupDivisions(Bytes size) const;
};

// Empty text gives the defaults. Errors are InvalidArgument naming the offending key.
Result<AllocConf> ParseAllocConf(std::string_view text);

}  // namespace bucketsim
