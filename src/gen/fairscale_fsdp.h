// fairscale's FullyShardedDataParallel (2021), as reference/fsdp_semantics.md §2 describes it
// byte by byte: fp32 shards padded per parameter (flat or not), the all-gather with the mixed-
// precision cast shard, resharding after forward (never the outermost instance), one
// reduce-scatter request per parameter to the bucket policy (chunk_and_pad's padding, the fp32
// copy of fp32_reduce_scatter), the final flush, and at world size 1 no sharding at all.
#pragma once

#include <memory>

#include "gen/fsdp_implementation.h"

namespace bucketsim {

std::unique_ptr<FsdpImplementation> MakeFairscaleFsdp(const ModelProgram& model,
                                                      const GenOptions& options,
                                                      TraceEmitter& trace);

}  // namespace bucketsim
