// A GPT/Llama-style transformer trained with fairscale FSDP, as a trace generator. One FSDP
// instance per transformer block (one flat parameter each), plus the embedding and the LM head
// as their own instances; one reduce-scatter request per flat parameter in backward. Grouped-
// query attention (kv_heads < heads) shrinks the K and V projections; ffn_hidden sizes the MLP;
// with tied embeddings the LM head reuses the token embedding, which then lives in the
// embedding instance, kept gathered from its forward to its backward like a root's parameters.
// The model is a program of one run per op (layernorms, QKV, attention, dropouts, projections,
// MLP, residual adds, cross-entropy); what each saves, and the gradients its backward makes, are
// in the table in transformer_preset.cc. Attention comes in three forms (`attention`): Megatron-
// LM's (fused scale-mask-softmax; what each layer saves adds up to Korthikanti et al. 2022,
// "Reducing Activation Recomputation in Large Transformer Models", §4.1), plain PyTorch ops on
// transposed head views (`q @ k.transpose(-2, -1)`, masked_fill, softmax: the matmuls save
// contiguous copies of Q, K and V), and a fused kernel (FlashAttention-2, PyTorch 2's
// scaled_dot_product_attention: no s² tensor). With `autocast` the ops run in the dtypes
// torch.autocast gives them on CUDA: matmuls in the autocast dtype (casting their inputs and
// weights, the copies saved), layernorm, softmax and the loss in fp32, other ops in their
// input's dtype, the residual stream in the promoted dtype.
//
// With `activation_checkpointing`, each transformer block is wrapped as
// FSDP(checkpoint_wrapper(block)) (fairscale's checkpoint_wrapper, i.e. torch.utils.checkpoint):
// its forward keeps only the block's input (e·sbh bytes) and its backward recomputes the
// forward before running it (Korthikanti et al. §5, "full activation recomputation").
#pragma once

#include <memory>
#include <optional>

#include "core/event_sink.h"
#include "gen/gen_options.h"
#include "gen/model_program.h"
#include "gen/preset.h"

namespace bucketsim {

// How attention is computed, which decides what it saves (transformer_preset.cc).
enum class AttentionKind { kMegatron, kUnfused, kFlash };

struct TransformerConfig : GenOptions {
  int layers = 24;
  int hidden = 1024;
  int ffn_hidden = 0;  // 0: 4 x hidden
  int heads = 16;
  int kv_heads = 0;  // 0: heads (multi-head attention); fewer: grouped-query attention
  int seq = 2048;
  int micro_batch = 1;
  int vocab = 50304;
  bool tied_embeddings = false;
  AttentionKind attention = AttentionKind::kMegatron;
  // Dropout probability of the attention probabilities and the two residual branches; 0: no
  // dropout ops at all (nn.Dropout(0) returns its input; Llama-style models have none).
  double dropout = 0.1;
  // Activation checkpointing of every transformer block (embedding and head are not wrapped).
  // In forward a block keeps one activation, its input; its internal activations are allocated
  // after its forward compute and freed right away, so one block's transient peak shows. In
  // backward, after the all-gather, a "recompute blockN" span as long as the forward re-creates
  // the internal activations, then the backward span and the full gradient; the hook frees the
  // recomputed activations and the kept input, then the gathered parameters, then reduces.
  bool activation_checkpointing = false;
  // torch.autocast around forward and loss (GenOptions' compute dtype then gathers).
  std::optional<DType> autocast;

  int FfnHidden() const { return ffn_hidden == 0 ? 4 * hidden : ffn_hidden; }
  int KvHeads() const { return kv_heads == 0 ? heads : kv_heads; }
};

// Emits the whole trace (header, then events) into `sink`. Fails on a configuration that does
// not describe a model (non-positive sizes, heads not dividing hidden, rank outside the world).
Status GenerateTransformer(const TransformerConfig& config, EventSink& sink);
// The model program of `config` (the same validation).
Result<ModelProgram> TransformerProgram(const TransformerConfig& config);

std::unique_ptr<Preset> MakeTransformerPreset();

}  // namespace bucketsim
