// FSDP1's own options (torch.distributed.fsdp.FullyShardedDataParallel, torch 2.6): its
// arguments as PyTorch names them, with PyTorch's defaults. GenOptions::fsdp1 holds them; their
// flags, rules and setting text are this implementation's entry of the table
// (gen/fsdp_impl_options.h), in torch_fsdp1_options.cc.
#pragma once

#include <string_view>

namespace bucketsim {

// ShardingStrategy (torch/distributed/fsdp/api.py).
enum class ShardingStrategy { kFullShard, kShardGradOp, kNoShard, kHybridShard };
// BackwardPrefetch (api.py): BACKWARD_PRE, BACKWARD_POST, or None.
enum class BackwardPrefetch { kPre, kPost, kNone };

struct Fsdp1Options {
  // HYBRID_SHARD takes its shard group from GenOptions::hsdp_shard_size (--hsdp-shape R,S).
  ShardingStrategy sharding_strategy = ShardingStrategy::kFullShard;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::kPre;
  bool forward_prefetch = false;
  bool limit_all_gathers = true;
  bool use_orig_params = false;

  friend bool operator==(const Fsdp1Options&, const Fsdp1Options&) = default;
};

// "FULL_SHARD", ...: the CLI's and PyTorch's spelling.
std::string_view ShardingStrategyName(ShardingStrategy strategy);
// PyTorch's spelling of a value, as a user writes it: "BackwardPrefetch.BACKWARD_PRE", "None".
std::string_view TorchBackwardPrefetch(BackwardPrefetch prefetch);

}  // namespace bucketsim
