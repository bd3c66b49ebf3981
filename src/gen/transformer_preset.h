// A GPT-style transformer trained with fairscale FSDP, as a trace generator. One FSDP instance
// per transformer block (one flat parameter each), plus the embedding and the LM head as their
// own instances; one reduce-scatter request per flat parameter in backward; activations per
// layer from the standard formula of Korthikanti et al. 2022 ("Reducing Activation Recomputation
// in Large Transformer Models", §4.1: sbh(34 + 5as/h) bytes per layer with 16-bit activations).
// The allocation pattern around each instance follows reference/fsdp_semantics.md §2.3–§2.7.
//
// With `activation_checkpointing`, each transformer block is wrapped as
// FSDP(checkpoint_wrapper(block)) (fairscale's checkpoint_wrapper, i.e. torch.utils.checkpoint):
// its forward keeps only the block's input (e·sbh bytes) and its backward recomputes the
// forward before running it (Korthikanti et al. §5, "full activation recomputation").
#pragma once

#include <string>

#include "core/dtype.h"
#include "core/event_sink.h"

namespace bucketsim {

// How FSDP instances get their reduce-scatter process group.
enum class GroupLayout {
  kShared,       // one cached group object for every instance (fairscale since #678)
  kPerInstance,  // a new group object per instance, same members (fairscale at #633)
};

enum class OptimizerKind { kSgd, kSgdMomentum, kAdam };

struct TransformerConfig {
  int layers = 24;
  int hidden = 1024;
  int heads = 16;
  int seq = 2048;
  int micro_batch = 1;
  int vocab = 50304;
  int world_size = 8;
  int rank = 0;
  int iterations = 2;
  // Mixed precision: parameters are kept in fp32 shards; compute (all-gather, activations,
  // full gradients) is in `compute_dtype`; gradients are reduced in `reduce_dtype` and cast
  // back to fp32 when that differs (ShardMode::kCast), else kept as views (ShardMode::kView).
  DType compute_dtype = DType::kBFloat16;
  DType reduce_dtype = DType::kBFloat16;
  GroupLayout group_layout = GroupLayout::kPerInstance;
  OptimizerKind optimizer = OptimizerKind::kAdam;
  double bucket_cap_mb = 25.0;
  // Activation checkpointing of every transformer block (embedding and head are not wrapped).
  // In forward a block keeps one activation, its input (e·sbh bytes, e the compute dtype's
  // size); its internal activations are allocated after its forward compute and freed right
  // away, so one block's transient peak shows. In backward, after the all-gather, a
  // "recompute blockN" span as long as the forward re-creates the internal activations, then
  // the backward span and the full gradient; the hook frees the recomputed activations and the
  // kept input, then the gathered parameters, then reduces as without checkpointing.
  bool activation_checkpointing = false;
  // Time model inputs for compute spans: sustained FLOP/s of one device.
  double device_tflops = 400.0;
};

// Emits the whole trace (header, then events) into `sink`. Fails on a configuration that does
// not describe a model (non-positive sizes, heads not dividing hidden, rank outside the world).
Status GenerateTransformer(const TransformerConfig& config, EventSink& sink);

}  // namespace bucketsim
