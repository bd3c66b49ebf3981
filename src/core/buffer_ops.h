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

// The gradient of one reduce request: `rows` chunks (one per group position) of `numel`
// elements. Row r starts at element `offset + r * row_numel` of the buffer (row_numel 0: rows
// packed, row_numel == numel): torch.stack / torch.cat lay a gradient out packed at offset 0; a
// bucket with one column range per gradient (FSDP2's chunk_cat) strides rows by its columns; a
// flat bucket (DDP, ZeRO, Megatron) holds one row of the whole gradient at its offset. Real
// backends fill it with a pattern every rank can compute (backend/verify_pattern.h), standing
// in for the gradient the backward pass produced.
struct GradientFill {
  BufferHandle buffer = 0;
  EventIndex request = 0;  // the rs event: part of the pattern, so requests differ
  int rows = 1;
  Numel numel = 0;  // per row
  DType dtype = DType::kFloat32;
  Numel offset = 0;     // element offset of row 0 in the buffer
  Numel row_numel = 0;  // elements from one row's start to the next; 0: numel

  Numel RowStride() const { return row_numel == 0 ? numel : row_numel; }
};

// Where a request's values are in a collective, by its kind (core/collective_record.h):
//   bypass, bucket_flush: columns [offset, offset + numel) of the output row hold the request's
//                         reduced shard (row = this rank's group position).
//   reduce_scatter, all_reduce: elements [offset, offset + numel) of the flat input hold the
//                         request's gradient as one row; a rank checks the part it receives.
struct ReducedSlice {
  EventIndex request = 0;
  Numel offset = 0;
  Numel numel = 0;
};

// What one collective reads and writes: `input` holds, from element `input_offset` on, the
// record's input_numel elements (group-size rows of output_numel for a reduce-scatter);
// `output` receives what this rank gets. When output == input the collective runs in place, as
// NCCL defines it: a reduce-scatter's shard lands at input_offset + position * output_numel, an
// all-reduce overwrites its input (a bucket inside a larger buffer: Megatron's grad buffer).
//
// `framework`: the framework's own collective on a trace allocation (an all-gather, or an
// all-reduce of a gradient the trace made), in place. A real backend fills this rank's part
// with the pattern of record.event_index (row 0: element j of the rank's part is
// PatternValue(rank, event, 0, j)) before running it and checks every element after; where the
// trace allocation is not materialized, it runs on scratch memory of the same size.
struct CollectiveBuffers {
  BufferHandle input = 0;
  BufferHandle output = 0;
  std::span<const ReducedSlice> slices;
  Numel input_offset = 0;
  bool framework = false;
};

}  // namespace bucketsim
