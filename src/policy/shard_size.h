// fairscale's bucket shard size: how many elements of one rank's chunk a bucket holds.
// `ReduceScatterBucketer._get_shard_size` (fairscale/internal/reduce_scatter_bucketer.py):
//   if bucket_cap_mb <= 0: return 0            # bucketing disabled, everything bypasses
//   bucket_size = bucket_cap_mb * 1024 * 1024 / element_size
//   shard_size = int(bucket_size // num_shards)
// "MB" is MiB, the division is a float division and `//` is Python's float floor division,
// reproduced exactly here so that fractional caps (the tests use 0.25) give fairscale's S.
#pragma once

#include "core/units.h"

namespace bucketsim {

Numel BucketShardSize(double bucket_cap_mb, Bytes element_size, int num_shards);

// FSDP's per-rank shard of a parameter or gradient of `numel` elements: fairscale's
// chunk_and_pad pads it to ceil(numel / num_shards) on every rank.
constexpr Numel PaddedShardNumel(Numel numel, Numel num_shards) {
  return numel / num_shards + (numel % num_shards != 0 ? 1 : 0);
}

// Python's `a // b` for floats (CPython float_floor_div), not floor(a / b): the two differ
// when a / b rounds up to an integer.
double PythonFloorDiv(double a, double b);

}  // namespace bucketsim
