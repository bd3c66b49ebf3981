// PyTorch's FSDP1 (torch.distributed.fsdp.FullyShardedDataParallel, torch 2.6) as the program
// emitter sees it: one padded FlatParameter per unit, each rank's fp32 shard kept all run, the
// padded unsharded flat parameter made by the all-gather and freed by the reshard its sharding
// strategy calls for, backward and forward prefetch, one reduce-scatter request per unit (its
// flat gradient) whose output shard the replay's policy allocates, NO_SHARD's all-reduce and
// HYBRID_SHARD's reduce-scatter then all-reduce. The rules, each with the torch 2.6 function it
// follows, are in torch_fsdp1.cc. The implementation owns its units' gathered parameters and
// NO_SHARD's kept gradients; the reduced shards are the policy's.
#pragma once

#include <memory>

#include "gen/fsdp_implementation.h"

namespace bucketsim {

std::unique_ptr<FsdpImplementation> MakeTorchFsdp1(const ModelProgram& model,
                                                   const GenOptions& options, TraceEmitter& trace);

}  // namespace bucketsim
