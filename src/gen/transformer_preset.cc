#include "gen/transformer_preset.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gen/fsdp_program.h"
#include "gen/program_builder.h"

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
  // Activations are in the autocast dtype, else the compute dtype; Korthikanti et al. assume
  // 16-bit (e = 2).
  return {u(config.micro_batch), u(config.seq),
          u(config.hidden),      u(config.heads),
          u(config.vocab),       u(config.KvHeads()) * head_dim,
          u(config.FfnHidden()), ElementSize(config.autocast.value_or(config.compute_dtype))};
}

// Q h² + h, K and V h·h_kv + h_kv each, output projection h² + h, MLP 2hf + f + h, two
// layernorms 4h. Without GQA and with f = 4h: 12h² + 13h.
Numel BlockNumel(const ModelDims& d) {
  return SaturatingSum(
      SaturatingSum(SaturatingProduct({2, d.h, d.h + 1}), SaturatingProduct({2, d.h_kv, d.h + 1})),
      SaturatingSum(SaturatingProduct({d.f, 2 * d.h + 1}), 5 * d.h));
}

std::string Describe(const TransformerConfig& config) {
  std::string ffn =
      config.FfnHidden() == 4 * config.hidden ? "" : fmt::format(", ffn {}", config.FfnHidden());
  std::string kv =
      config.KvHeads() == config.heads ? "" : fmt::format(", {} kv heads", config.KvHeads());
  return fmt::format(
      "GPT {} layers, hidden {}{}, {} heads{}, seq {}, micro-batch {}, vocab {}{}{}; {}{}",
      config.layers, config.hidden, ffn, config.heads, kv, config.seq, config.micro_batch,
      config.vocab, config.tied_embeddings ? ", tied embeddings" : "",
      config.autocast ? fmt::format(", autocast {}", DTypeName(*config.autocast)) : "",
      DescribeGenOptions(config),
      config.activation_checkpointing ? ", activation checkpointing" : "");
}

// The model as a program of runs, one per op of a pre-LN GPT block, with what each saves for
// backward (PyTorch's derivatives.yaml) and the gradients each backward makes. Per block
// (e bytes per activation element, masks one byte, LN statistics fp32):
//
//   run              reads         makes            saves                 backward makes
//   ln1              x             ln1 e·sbh        x, mean, rstd 8·sb    grad x (new)
//   qkv              ln1           qkv e·sb(h+2hk)  ln1                   grad ln1
//   qkv.split        qkv           q, k, v: views   -                     grad qkv (cat)
//   attn.scores      q, k          e·as²b           q, k                  grad q, grad k
//   attn.softmax     scores        e·as²b           its output            grad scores
//   attn.dropout     probs         e·as²b           mask as²b             grad probs
//   attn.context     drop, v       e·sbh            drop, v               grad drop, grad v
//   attn.proj        context       e·sbh            context               grad context
//   attn.proj.drop   proj          e·sbh            mask sbh              grad proj
//   residual1        x, drop       x2 e·sbh         -                     passes its gradient on
//   ln2              x2            e·sbh            x2, mean, rstd        grad x2 (new)
//   mlp.fc1          ln2           e·sbf            ln2                   grad ln2
//   mlp.gelu         fc1           e·sbf            fc1 (its input)       grad fc1
//   mlp.fc2          gelu          e·sbh            gelu                  grad gelu
//   mlp.drop         fc2           e·sbh            mask sbh              grad fc2
//   residual2        x2, drop      e·sbh            -                     passes its gradient on
//
// What a block keeps from forward to backward is Korthikanti et al. 2022 ("Reducing Activation
// Recomputation in Large Transformer Models", §4.1): attention sb[(3e + 1)h + 2e·h_kv] (QKV
// input, Q, K, V, projection input, its mask), scores (2e + 1)·as²b (softmax output, its mask,
// dropout output), MLP sb[(e + 1)h + 2e·f] (input, GeLU input and output, mask), layernorm
// inputs 2e·sbh; with e = 2, h_kv = h and f = 4h the paper's sbh(34 + 5as/h). The LN
// statistics (16·sb bytes per block) are what the paper leaves out. The residual adds pass
// their incoming gradient to both inputs (AddBackward0), so a block input's gradient is that
// pass-through summed with its LN's gradient into a new tensor (InputBuffer::accumulate).
class TransformerBuilder {
 public:
  explicit TransformerBuilder(const TransformerConfig& config)
      : config_(config),
        d_(DimsOf(config)),
        dtype_(DTypeName(config.autocast.value_or(config.compute_dtype))),
        program_(Describe(config)) {}

  FsdpModel Build() {
    program_.SetAutocast(config_.autocast);
    const auto tokens = static_cast<double>(d_.tokens());
    // The batch: token ids and labels, int64, made once before the loop.
    program_.AddInput(Tensor("tokens", SaturatingProduct({8, d_.s, d_.b}), "int64"));
    program_.AddInput(Tensor("labels", SaturatingProduct({8, d_.s, d_.b}), "int64"));

    // Token embedding (v x h) plus learned position embedding (s x h). Its forward is a lookup
    // and an add: charged as 2 FLOPs per output element; its backward needs only the ids. With
    // tied embeddings the head uses its token embedding too, so it is the outermost instance:
    // its forward ends after the head's, and like fairscale's root it is not resharded.
    constexpr std::size_t kEmbedding = 0;
    program_.AddInstance({"embedding",
                          {{"flat_param_0", SaturatingProduct({d_.v + d_.s, d_.h})}},
                          true,
                          !config_.tied_embeddings});
    program_.Gather(kEmbedding);
    program_.Run("embedding", 2 * tokens * static_cast<double>(d_.h), {kEmbedding}, {In("tokens")},
                 {Hidden("embedding.out")}, {Keep("tokens")});
    if (!config_.tied_embeddings) program_.EndForward(kEmbedding);

    std::string x = "embedding.out";
    for (int i = 0; i < config_.layers; ++i) x = AddBlock(i, x);

    // Final layernorm (2h) and the LM head (v x h, untied), the last instance: it runs last in
    // forward and first in backward, so like fairscale's root (whose own parameters
    // disable_reshard_on_root keeps) it is not resharded: that saves an all-gather at no peak.
    const std::size_t head = program_.AddInstance(
        {"head",
         {{"flat_param_0",
           config_.tied_embeddings ? 2 * d_.h : SaturatingProduct({d_.h, d_.v + 2})}},
         true,
         false});
    std::vector<std::size_t> head_uses = {head};
    if (config_.tied_embeddings) head_uses.push_back(kEmbedding);
    program_.Gather(head);
    LayerNorm("final_norm", x, {head});
    ForwardOp& lm_head =
        program_.Run("head", 2 * tokens * static_cast<double>(SaturatingProduct({d_.h, d_.v})),
                     std::move(head_uses), {In("final_norm.out")},
                     {Tensor("logits", Act(d_.v), dtype_)}, {Keep("final_norm.out")});
    Linear(lm_head, SaturatingProduct({d_.h, d_.v}), SaturatingProduct({d_.h, d_.v}));
    program_.EndForward(head);
    if (config_.tied_embeddings) program_.EndForward(kEmbedding);

    // cross_entropy(logits.float(), labels): the cast (skipped when the logits are fp32
    // already: .float() returns them), log_softmax, which saves its fp32 output, and nll_loss,
    // which saves the labels; nll_loss's backward makes the fp32 gradient of the log-probs,
    // log_softmax's that of the fp32 logits, the cast's that of the logits.
    std::string logits = "logits";
    const Bytes fp32_logits = SaturatingProduct({kFp32Size, d_.s, d_.b, d_.v});
    if (dtype_ != "fp32") {
      program_.Run("loss.cast", 0, {}, {In(logits)}, {Tensor("logits.fp32", fp32_logits, "fp32")});
      logits = "logits.fp32";
    }
    program_.Run("loss.log_softmax", 0, {}, {In(logits)},
                 {Tensor("log_probs", fp32_logits, "fp32")}, {Keep("log_probs")});
    program_.Run("loss.nll", 0, {}, {In("log_probs"), In("labels", InputGrad::kNone)},
                 {Tensor("loss", kFp32Size, "fp32")}, {Keep("labels")});
    program_.SetLoss("loss");
    return program_.Take();
  }

 private:
  // Bytes of an activation of sb x `width` elements in the activation dtype.
  Bytes Act(std::uint64_t width) const { return SaturatingProduct({d_.e, d_.s, d_.b, width}); }
  ProgramTensor Hidden(std::string id) const { return Tensor(std::move(id), Act(d_.h), dtype_); }

  // Under autocast a matmul casts its weight (weight_numel) to the autocast dtype and saves the
  // copy; its backward makes the copy's gradient and the bias's (param_numel in all) in that
  // dtype before ToCopyBackward casts them into the parameter's gradient.
  void Linear(ForwardOp& op, Numel weight_numel, Numel param_numel) const {
    if (!config_.autocast) return;
    const Bytes e = ElementSize(*config_.autocast);
    op.saves.push_back(Fresh(SaturatingProduct({e, weight_numel}), dtype_, "weight cast"));
    op.workspace.push_back(
        Workspace(SaturatingProduct({e, param_numel}), dtype_, "weight cast grad"));
  }

  // A LayerNorm run: saves its input and its per-token mean and rstd (fp32).
  void LayerNorm(const std::string& name, const std::string& x, std::vector<std::size_t> uses) {
    const Bytes stats = SaturatingProduct({kFp32Size, d_.s, d_.b});
    program_.Run(name, 2 * static_cast<double>(d_.tokens()) * 2 * static_cast<double>(d_.h),
                 std::move(uses), {In(x)}, {Hidden(name + ".out")},
                 {Keep(x), Fresh(stats, "fp32", "mean"), Fresh(stats, "fp32", "rstd")});
  }

  // A dropout run: saves its mask (one byte per element).
  void Dropout(const std::string& name, const std::string& x, Bytes bytes, Bytes mask_bytes) {
    program_.Run(name, 0, {}, {In(x)}, {Tensor(name + ".out", bytes, dtype_)},
                 {Fresh(mask_bytes, "bool", "mask")});
  }

  std::string AddBlock(int i, const std::string& x) {
    const std::size_t f = program_.AddInstance(
        {fmt::format("block{}", i), {{"flat_param_0", BlockNumel(d_)}}, true, true});
    const std::string p = fmt::format("block{}.", i);
    const auto tokens = static_cast<double>(d_.tokens());
    const auto flops = [&](std::uint64_t params) {
      return 2 * tokens * static_cast<double>(params);
    };
    const std::uint64_t qkv_width = d_.h + 2 * d_.h_kv;
    const Bytes scores = SaturatingProduct({d_.e, d_.a, d_.s, d_.s, d_.b});
    const Bytes score_mask = SaturatingProduct({kMaskSize, d_.a, d_.s, d_.s, d_.b});
    // QK^T and scores x V: 2bs²h FLOPs each (per query head, so GQA does not change them).
    const double attention_flops = 2.0 * static_cast<double>(d_.b) * static_cast<double>(d_.s) *
                                   static_cast<double>(d_.s) * static_cast<double>(d_.h);

    program_.Gather(f);
    // torch.utils.checkpoint saves the block's input (e per sbh element) and nothing else:
    // L blocks keep e·sbh·L, Korthikanti et al. §5's 2sbhL with 16-bit activations.
    if (config_.activation_checkpointing) program_.CheckpointBegin({Keep(x)});
    LayerNorm(p + "ln1", x, {f});
    ForwardOp& qkv =
        program_.Run(p + "qkv", flops((d_.h + 1) * qkv_width), {f}, {In(p + "ln1.out")},
                     {Tensor(p + "qkv.out", Act(qkv_width), dtype_)}, {Keep(p + "ln1.out")});
    Linear(qkv, d_.h * qkv_width, (d_.h + 1) * qkv_width);
    program_.Run(p + "qkv.split", 0, {}, {In(p + "qkv.out")},
                 {Tensor(p + "q", Act(d_.h), dtype_, p + "qkv.out"),
                  Tensor(p + "k", Act(d_.h_kv), dtype_, p + "qkv.out"),
                  Tensor(p + "v", Act(d_.h_kv), dtype_, p + "qkv.out")});
    program_.Run(p + "attn.scores", attention_flops, {}, {In(p + "q"), In(p + "k")},
                 {Tensor(p + "scores", scores, dtype_)}, {Keep(p + "q"), Keep(p + "k")});
    program_.Run(p + "attn.softmax", 0, {}, {In(p + "scores")},
                 {Tensor(p + "probs", scores, dtype_)}, {Keep(p + "probs")});
    Dropout(p + "attn.dropout", p + "probs", scores, score_mask);
    program_.Run(p + "attn.context", attention_flops, {}, {In(p + "attn.dropout.out"), In(p + "v")},
                 {Hidden(p + "context")}, {Keep(p + "attn.dropout.out"), Keep(p + "v")});
    ForwardOp& proj =
        program_.Run(p + "attn.proj", flops((d_.h + 1) * d_.h), {f}, {In(p + "context")},
                     {Hidden(p + "proj")}, {Keep(p + "context")});
    Linear(proj, d_.h * d_.h, (d_.h + 1) * d_.h);
    Dropout(p + "attn.proj.drop", p + "proj", Act(d_.h),
            SaturatingProduct({kMaskSize, d_.s, d_.b, d_.h}));
    program_.Run(p + "residual1", 0, {},
                 {In(x, InputGrad::kPass), In(p + "attn.proj.drop.out", InputGrad::kPass)},
                 {Hidden(p + "x2")});
    LayerNorm(p + "ln2", p + "x2", {f});
    ForwardOp& fc1 = program_.Run(p + "mlp.fc1", flops((d_.h + 1) * d_.f), {f}, {In(p + "ln2.out")},
                                  {Tensor(p + "fc1", Act(d_.f), dtype_)}, {Keep(p + "ln2.out")});
    Linear(fc1, d_.h * d_.f, (d_.h + 1) * d_.f);
    program_.Run(p + "mlp.gelu", 0, {}, {In(p + "fc1")}, {Tensor(p + "gelu", Act(d_.f), dtype_)},
                 {Keep(p + "fc1")});
    ForwardOp& fc2 = program_.Run(p + "mlp.fc2", flops((d_.f + 1) * d_.h), {f}, {In(p + "gelu")},
                                  {Hidden(p + "fc2")}, {Keep(p + "gelu")});
    Linear(fc2, d_.f * d_.h, (d_.f + 1) * d_.h);
    Dropout(p + "mlp.drop", p + "fc2", Act(d_.h), SaturatingProduct({kMaskSize, d_.s, d_.b, d_.h}));
    program_.Run(p + "residual2", 0, {},
                 {In(p + "x2", InputGrad::kPass), In(p + "mlp.drop.out", InputGrad::kPass)},
                 {Hidden(p + "out")});
    if (config_.activation_checkpointing) program_.CheckpointEnd();
    program_.EndForward(f);
    return p + "out";
  }

  const TransformerConfig& config_;
  const ModelDims d_;
  const std::string dtype_;
  ProgramBuilder program_;
};

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
  BUCKETSIM_RETURN_IF_ERROR(ValidateAutocast(config.autocast));
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
    params.push_back(AutocastParam(c.autocast));
    for (PresetParam& param : GenOptionParams(c)) params.push_back(std::move(param));
    return params;
  }
  Result<FsdpModel> Program() const override { return TransformerProgram(config_); }
  const GenOptions& options() const override { return config_; }

 private:
  TransformerConfig config_;
};

}  // namespace

Result<FsdpModel> TransformerProgram(const TransformerConfig& config) {
  BUCKETSIM_RETURN_IF_ERROR(ValidateConfig(config));
  return TransformerBuilder(config).Build();
}

Status GenerateTransformer(const TransformerConfig& config, EventSink& sink) {
  Result<FsdpModel> program = TransformerProgram(config);
  if (!program.ok()) return program.status();
  return EmitFsdpTrace(*program, config, sink);
}

std::unique_ptr<Preset> MakeTransformerPreset() { return std::make_unique<TransformerPreset>(); }

}  // namespace bucketsim
