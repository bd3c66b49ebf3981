#include "gen/transformer_preset.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gen/fsdp_program.h"

namespace bucketsim {
namespace {

constexpr Bytes kFp32Size = 4;
// Dropout masks are bool tensors: one byte per element whatever the compute dtype.
constexpr Bytes kMaskSize = 1;

std::uint64_t SaturatingSum(std::uint64_t a, std::uint64_t b) {
  std::uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<std::uint64_t>::max() : sum;
}

struct ModelDims {
  std::uint64_t b, s, h, a, v;  // micro-batch, sequence, hidden, heads, vocab
  std::uint64_t h_kv;           // K/V projection width: kv_heads x (h / a)
  std::uint64_t f;              // MLP hidden
  Bytes e;                      // bytes per activation element (the compute dtype)
  std::uint64_t tokens() const { return b * s; }
};

ModelDims DimsOf(const TransformerConfig& config) {
  const auto u = [](int x) { return static_cast<std::uint64_t>(x); };
  const std::uint64_t head_dim = u(config.hidden) / u(config.heads);
  // Activations are in the compute dtype; Korthikanti et al. assume 16-bit (e = 2).
  return {u(config.micro_batch), u(config.seq),
          u(config.hidden),      u(config.heads),
          u(config.vocab),       u(config.KvHeads()) * head_dim,
          u(config.FfnHidden()), ElementSize(config.compute_dtype)};
}

// Per transformer layer, Korthikanti et al. 2022 §4.1 (e bytes per activation element, masks
// one byte), as four allocations:
//   attention  sb[(3e + 1)h + 2e·h_kv]: QKV input e·h, Q e·h, K and V e·h_kv each, projection
//              input e·h, projection dropout mask h;
//   scores     (2e + 1)·as²b: softmax output e, its dropout mask 1, dropout output e per score;
//   MLP        sb[(e + 1)h + 2e·f]: input e·h, GeLU input e·f, GeLU output e·f, dropout mask h;
//   layernorms 2e·sbh: the inputs of the two layernorms.
// Total sb[(6e + 2)h + 2e·h_kv + 2e·f] + (2e + 1)as²b. With e = 2, h_kv = h (no GQA) and
// f = 4h this is the paper's sbh(34 + 5as/h).
std::vector<Bytes> BlockActivationBytes(const ModelDims& d) {
  const Bytes e = d.e;
  return {
      SaturatingSum(SaturatingProduct({3 * e + kMaskSize, d.s, d.b, d.h}),
                    SaturatingProduct({2 * e, d.s, d.b, d.h_kv})),
      SaturatingProduct({2 * e + kMaskSize, d.a, d.s, d.s, d.b}),
      SaturatingSum(SaturatingProduct({e + kMaskSize, d.s, d.b, d.h}),
                    SaturatingProduct({2 * e, d.s, d.b, d.f})),
      SaturatingProduct({2 * e, d.s, d.b, d.h}),
  };
}

// Q h² + h, K and V h·h_kv + h_kv each, output projection h² + h, MLP 2hf + f + h, two
// layernorms 4h. Without GQA and with f = 4h: 12h² + 13h.
Numel BlockNumel(const ModelDims& d) {
  return SaturatingSum(
      SaturatingSum(SaturatingProduct({2, d.h, d.h + 1}), SaturatingProduct({2, d.h_kv, d.h + 1})),
      SaturatingSum(SaturatingProduct({d.f, 2 * d.h + 1}), 5 * d.h));
}

ForwardOp Op(OpKind kind, std::size_t instance) {
  ForwardOp op;
  op.kind = kind;
  op.instance = instance;
  return op;
}

ForwardOp RunOp(std::string name, double flops, std::vector<Bytes> activations,
                std::vector<std::size_t> uses) {
  ForwardOp op;
  op.kind = OpKind::kRun;
  op.name = std::move(name);
  op.flops = flops;
  op.activations = std::move(activations);
  op.uses = std::move(uses);
  return op;
}

std::string Describe(const TransformerConfig& config) {
  std::string ffn =
      config.FfnHidden() == 4 * config.hidden ? "" : fmt::format(", ffn {}", config.FfnHidden());
  std::string kv =
      config.KvHeads() == config.heads ? "" : fmt::format(", {} kv heads", config.KvHeads());
  return fmt::format(
      "GPT {} layers, hidden {}{}, {} heads{}, seq {}, micro-batch {}, vocab {}{}; {}{}",
      config.layers, config.hidden, ffn, config.heads, kv, config.seq, config.micro_batch,
      config.vocab, config.tied_embeddings ? ", tied embeddings" : "", DescribeGenOptions(config),
      config.activation_checkpointing ? ", activation checkpointing" : "");
}

FsdpModel BuildModel(const TransformerConfig& config) {
  const ModelDims d = DimsOf(config);
  const auto tokens = static_cast<double>(d.tokens());
  FsdpModel model;
  model.description = Describe(config);
  const Bytes hidden_activation = SaturatingProduct({d.e, d.s, d.b, d.h});

  // Token embedding (v x h) plus learned position embedding (s x h). Its forward is a lookup
  // and an add: charged as 2 FLOPs per output element. It keeps its output for backward. With
  // tied embeddings the head uses its token embedding too, so it is the outermost instance:
  // its forward ends after the head's, and like fairscale's root it is not resharded.
  constexpr std::size_t kEmbedding = 0;
  model.instances.push_back({"embedding",
                             {{"flat_param_0", SaturatingProduct({d.v + d.s, d.h})}},
                             true,
                             !config.tied_embeddings});
  model.forward.push_back(Op(OpKind::kGather, kEmbedding));
  model.forward.push_back(
      RunOp("embedding", 2 * tokens * static_cast<double>(d.h), {hidden_activation}, {kEmbedding}));
  if (!config.tied_embeddings) model.forward.push_back(Op(OpKind::kEndForward, kEmbedding));

  // Forward FLOPs of a block: 2 per parameter per token for the matmuls, plus 4bs²h for QK^T
  // and scores x V (per query head, so GQA does not change it).
  const Numel block_numel = BlockNumel(d);
  const double block_flops = 2 * tokens * static_cast<double>(block_numel) +
                             4.0 * static_cast<double>(d.b) * static_cast<double>(d.s) *
                                 static_cast<double>(d.s) * static_cast<double>(d.h);
  for (int i = 0; i < config.layers; ++i) {
    const std::size_t f = model.instances.size();
    std::string name = fmt::format("block{}", i);
    model.instances.push_back({name, {{"flat_param_0", block_numel}}, true, true});
    model.forward.push_back(Op(OpKind::kGather, f));
    // torch.utils.checkpoint saves the block's input (e per sbh element) and nothing else:
    // L blocks keep e·sbh·L, Korthikanti et al. §5's 2sbhL with 16-bit activations.
    if (config.activation_checkpointing) {
      ForwardOp begin = Op(OpKind::kCheckpointBegin, f);
      begin.activations = {hidden_activation};
      model.forward.push_back(std::move(begin));
    }
    model.forward.push_back(RunOp(std::move(name), block_flops, BlockActivationBytes(d), {f}));
    if (config.activation_checkpointing) model.forward.push_back(Op(OpKind::kCheckpointEnd, f));
    model.forward.push_back(Op(OpKind::kEndForward, f));
  }

  // Final layernorm (2h) and the LM head (v x h, untied). It keeps the logits (e per element)
  // and the fp32 copy of them the loss is computed from (cross-entropy upcasts its input). It
  // runs last in forward and first in backward, so like fairscale's root (whose own parameters
  // disable_reshard_on_root keeps) it is not resharded: that saves an all-gather at no peak.
  const std::size_t head = model.instances.size();
  const Numel head_numel = config.tied_embeddings ? 2 * d.h : SaturatingProduct({d.h, d.v + 2});
  model.instances.push_back({"head", {{"flat_param_0", head_numel}}, true, false});
  std::vector<std::size_t> head_uses = {head};
  if (config.tied_embeddings) head_uses.push_back(kEmbedding);
  model.forward.push_back(Op(OpKind::kGather, head));
  model.forward.push_back(RunOp(
      "head", 2 * tokens * static_cast<double>(SaturatingProduct({d.h, d.v + 2})),
      {SaturatingProduct({d.e, d.s, d.b, d.v}), SaturatingProduct({kFp32Size, d.s, d.b, d.v})},
      std::move(head_uses)));
  model.forward.push_back(Op(OpKind::kEndForward, head));
  if (config.tied_embeddings) model.forward.push_back(Op(OpKind::kEndForward, kEmbedding));
  return model;
}

Status ValidateConfig(const TransformerConfig& config) {
  const std::pair<const char*, int> positive[] = {
      {"layers", config.layers}, {"hidden", config.hidden},           {"heads", config.heads},
      {"seq", config.seq},       {"micro_batch", config.micro_batch}, {"vocab", config.vocab},
  };
  for (const auto& [field, value] : positive) {
    if (value < 1) {
      return InvalidArgument(fmt::format("{} must be at least 1 (got {})", field, value));
    }
  }
  if (config.ffn_hidden < 0) {
    return InvalidArgument(fmt::format(
        "ffn_hidden must be at least 1, or 0 for 4 x hidden (got {})", config.ffn_hidden));
  }
  // Each layer is an FSDP instance in the header; far beyond any real model is a typo.
  if (config.layers > (1 << 16)) {
    return InvalidArgument(fmt::format("layers {} is beyond 2^16", config.layers));
  }
  if (config.hidden % config.heads != 0) {
    return InvalidArgument(
        fmt::format("heads ({}) must divide hidden ({})", config.heads, config.hidden));
  }
  // Grouped-query attention: each K/V head serves heads / kv_heads query heads.
  if (config.kv_heads < 0 || config.heads % config.KvHeads() != 0) {
    return InvalidArgument(fmt::format("kv_heads ({}) must divide heads ({}), or be 0 for heads",
                                       config.kv_heads, config.heads));
  }
  return ValidateGenOptions(config);
}

class TransformerPreset : public Preset {
 public:
  std::string_view name() const override { return "transformer"; }
  std::string_view summary() const override {
    return "GPT/Llama-style transformer under fairscale FSDP: embedding, one instance per block, "
           "LM head";
  }
  std::string_view example() const override {
    return "bucketsim gen transformer --layers 24 --hidden 1024 --heads 16 --seq 2048 "
           "--world-size 8 --activation-checkpointing -o gpt.json";
  }
  std::vector<PresetParam> Params() override {
    TransformerConfig& c = config_;
    std::vector<PresetParam> params;
    params.push_back(IntParam("layers", "Transformer blocks, one FSDP instance each", c.layers));
    params.push_back(IntParam("hidden", "Hidden size h", c.hidden));
    params.push_back(IntParam("ffn-hidden", "MLP hidden size f (0: 4 x hidden)", c.ffn_hidden));
    params.push_back(IntParam("heads", "Attention (query) heads a", c.heads));
    params.push_back(
        IntParam("kv-heads", "Key/value heads (grouped-query attention; 0: heads)", c.kv_heads));
    params.push_back(IntParam("vocab", "Vocabulary size v", c.vocab));
    params.push_back(IntParam("seq", "Sequence length s", c.seq));
    params.push_back(IntParam("micro-batch", "Micro-batch size b", c.micro_batch));
    params.push_back(BoolParam("tied-embeddings",
                               "The LM head reuses the token embedding (one shared weight in "
                               "the embedding instance)",
                               c.tied_embeddings));
    params.push_back(BoolParam("activation-checkpointing",
                               "Checkpoint every block: keep its input in forward, recompute its "
                               "activations in backward",
                               c.activation_checkpointing));
    for (PresetParam& param : GenOptionParams(c)) params.push_back(std::move(param));
    return params;
  }
  Status Generate(EventSink& sink) const override { return GenerateTransformer(config_, sink); }

 private:
  TransformerConfig config_;
};

}  // namespace

Status GenerateTransformer(const TransformerConfig& config, EventSink& sink) {
  BUCKETSIM_RETURN_IF_ERROR(ValidateConfig(config));
  return EmitFsdpTrace(BuildModel(config), config, sink);
}

std::unique_ptr<Preset> MakeTransformerPreset() { return std::make_unique<TransformerPreset>(); }

}  // namespace bucketsim
