// The data movement a bucket policy performs on its buffers, as values: which bytes a gradient
// is stacked into, which columns are copied into or out of a bucket, which buffers a collective
// reads and writes and which request each reduced column belongs to. The sim backend only
// times them; the real backends (host/MPI, cuda/NCCL) execute them on real memory, which is
// how a replay proves that the policy's bookkeeping moves the right bytes.
#pragma once

#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "core/units.h"

namespace bucketsim {

// A buffer as the backend knows it: a policy buffer's id, or a trace allocation's slot with
// kTraceBufferBit set.
using BufferHandle = std::uint64_t;
inline constexpr BufferHandle kTraceBufferBit = BufferHandle{1} << 63;

// A 2-D column copy between row-major buffers of `dtype` elements:
//   dst[r][dst_col + i] = src[r][src_col + i]   for r < rows, i < cols.
// fairscale's bucket fill (`data[:, offset:offset + n].copy_(stacked)`) and the flush's
// `.contiguous()` of `data[:, :offset]` are both this (reference/fsdp_semantics.md §1).
struct BufferCopy {
  BufferHandle dst = 0;
  Numel dst_row_numel = 0;
  Numel dst_col = 0;
  BufferHandle src = 0;
  Numel src_row_numel = 0;
  Numel src_col = 0;
  int rows = 1;
  Numel cols = 0;
  DType dtype = DType::kFloat32;
};

// The stacked gradient of one reduce-scatter request: `rows` chunks (one per group position)
// of `numel` elements, as torch.stack / torch.cat lay them out. Real backends fill it with a
// pattern every rank can compute (backend/verify_pattern.h), standing in for the gradient the
// backward pass produced.
struct GradientFill {
  BufferHandle buffer = 0;
  EventIndex request = 0;  // the rs event: part of the pattern, so requests differ
  int rows = 1;
  Numel numel = 0;  // per row
  DType dtype = DType::kFloat32;
};

// Columns [offset, offset + numel) of a collective's output hold request `request`'s shard.
struct ReducedSlice {
  EventIndex request = 0;
  Numel offset = 0;
  Numel numel = 0;
};

// What one reduce-scatter reads and writes: `input` holds group-size rows of the record's
// output_numel elements, contiguous; `output` receives this rank's reduced row.
struct CollectiveBuffers {
  BufferHandle input = 0;
  BufferHandle output = 0;
  std::span<const ReducedSlice> slices;
};

}  // namespace bucketsim
