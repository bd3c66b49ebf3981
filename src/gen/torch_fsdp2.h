// PyTorch FSDP2 (`torch.distributed.fsdp.fully_shard`, torch 2.6) as the emitter's
// FsdpImplementation, each rule following the 2.6 source under
// torch/distributed/fsdp/_fully_shard/ (cited per rule in torch_fsdp2.cc): one parameter group
// per FSDP unit whose parameters are the original parameters (a flat GenParam's views each on
// their own), each sharded on dim 0 with padding; the all-gather output buffer and the
// per-parameter unsharded outputs; reshard after forward (True, False, or to N ranks), never
// for the root; implicit backward prefetch in reverse post-forward order; one reduce-scatter
// per group (its input and output made by the `fsdp2` replay policy from the requests, in the
// order policy/group_reduce_scatter.h describes); mixed precision and parameter offload.
//
// The program gives each parameter's numel, not its shape: dim-0 padding is computed as if
// every parameter were 1-D (exact wherever dim 0 divides by the shard group size, or the
// parameter is 1-D). The header declares each parameter with its padded numel (group size x
// padded shard), so that a request's per-rank numel is its padded shard.
#pragma once

#include <memory>

#include "gen/fsdp_implementation.h"

namespace bucketsim {

std::unique_ptr<FsdpImplementation> MakeTorchFsdp2(const ModelProgram& model,
                                                   const GenOptions& options, TraceEmitter& trace);

}  // namespace bucketsim
