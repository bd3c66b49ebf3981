// What a real backend checks of one request's values after a collective: which elements of its
// output, against which expectation (backend/verify_pattern.h). The layouts differ by kind
// (core/buffer_ops.h ReducedSlice): a fairscale or FSDP2 bucket's output row holds each
// request's shard in its own columns; a flat bucket (DDP, ZeRO, Megatron) holds each request's
// whole gradient as one row at its offset, and a rank checks the part of it that it receives:
// all of it after an all-reduce, its group position's range after a reduce-scatter.
#pragma once

#include <algorithm>

#include "backend/verify_pattern.h"
#include "core/buffer_ops.h"
#include "core/collective_record.h"

namespace bucketsim {

struct SliceCheck {
  ReducedSlice output;        // elements [offset, offset + numel) of the output; numel 0: nothing
  std::uint64_t first_j = 0;  // the request's element at output.offset
  PatternExpectation expectation;
};

// `group` is the expectation of a reduce-scatter row at this rank's position (or emulated).
inline SliceCheck CheckOfSlice(const CollectiveRecord& record, const ReducedSlice& slice,
                               const PatternExpectation& group) {
  if (record.kind == CollectiveKind::kBypass || record.kind == CollectiveKind::kBucketFlush) {
    return {slice, 0, group};
  }
  // A flat gradient is row 0 of its request's pattern.
  PatternExpectation row0 = group;
  row0.position = 0;
  if (record.kind == CollectiveKind::kAllReduce) {
    if (group.emulated) {
      // An all-reduce on a world of one returns its own input.
      row0 = {1, 0, group.rank, PatternRankTerm(group.rank), false};
    }
    return {slice, 0, row0};
  }
  // reduce_scatter: this rank receives [position * n, (position + 1) * n) of the flat input.
  // Emulated, the n ranges are summed locally, mixing requests: not checked.
  if (group.emulated) return {{slice.request, 0, 0}, 0, row0};
  const Numel lo = static_cast<Numel>(group.position) * record.output_numel;
  const Numel hi = lo + record.output_numel;
  const Numel begin = std::max(slice.offset, lo);
  const Numel end = std::min(slice.offset + slice.numel, hi);
  if (begin >= end) return {{slice.request, 0, 0}, 0, row0};
  return {{slice.request, begin - lo, end - begin}, begin - slice.offset, row0};
}

}  // namespace bucketsim
