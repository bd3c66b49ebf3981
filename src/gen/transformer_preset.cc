#include "gen/transformer_preset.h"

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gen/fsdp_emitter.h"
#include "gen/model_program.h"
#include "gen/program_builder.h"

namespace bucketsim {
namespace {

std::uint64_t SaturatingSum(std::uint64_t a, std::uint64_t b) {
  std::uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<std::uint64_t>::max() : sum;
}

struct ModelDims {
  std::uint64_t b, s, h, a, v;  // micro-batch, sequence, hidden, heads, vocab
  std::uint64_t h_kv;           // K/V projection width: kv_heads x (h / a)
  std::uint64_t f;              // MLP hidden
  std::uint64_t tokens() const { return b * s; }
};

ModelDims DimsOf(const TransformerConfig& config) {
  const auto u = [](int x) { return static_cast<std::uint64_t>(x); };
  const std::uint64_t head_dim = u(config.hidden) / u(config.heads);
  return {u(config.micro_batch), u(config.seq),   u(config.hidden),
          u(config.heads),       u(config.vocab), u(config.KvHeads()) * head_dim,
          u(config.FfnHidden())};
}

// FlattenParamsWrapper's flat parameter of `views` (their numels summed, in order).
GenParam FlatOf(std::vector<ParamView> views) {
  Numel total = 0;
  for (const ParamView& view : views) total = SaturatingSum(total, view.numel);
  return {"flat_param_0", total, std::move(views)};
}

// A block's parameters in registration order (nn.Module.named_parameters, the order
// FlattenParamsWrapper concatenates them in): ln1, the Q K V projection (one fused, or three),
// the output projection, ln2, the MLP's two matrices. Q h² + h, K and V h·h_kv + h_kv each,
// output projection h² + h, MLP 2hf + f + h, two layernorms 4h; without GQA and with f = 4h:
// 12h² + 13h.
std::vector<ParamView> BlockViews(const ModelDims& d, AttentionKind attention) {
  // Each with its dim 0, which FSDP2 shards: nn.Linear's weight is (out, in), its bias (out).
  const auto linear = [](std::string name, std::uint64_t in, std::uint64_t out) {
    return std::vector<ParamView>{{name + ".weight", SaturatingProduct({in, out}), out},
                                  {name + ".bias", out, out}};
  };
  std::vector<ParamView> views = {{"ln1.weight", d.h, d.h}, {"ln1.bias", d.h, d.h}};
  const auto add = [&](std::vector<ParamView> more) {
    views.insert(views.end(), more.begin(), more.end());
  };
  if (attention == AttentionKind::kUnfused) {
    add(linear("attn.q", d.h, d.h));
    add(linear("attn.k", d.h, d.h_kv));
    add(linear("attn.v", d.h, d.h_kv));
  } else {
    add(linear("qkv", d.h, d.h + 2 * d.h_kv));
  }
  add(linear("attn.proj", d.h, d.h));
  add({{"ln2.weight", d.h, d.h}, {"ln2.bias", d.h, d.h}});
  add(linear("mlp.fc1", d.h, d.f));
  add(linear("mlp.fc2", d.f, d.h));
  return views;
}

std::string_view AttentionName(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::kMegatron:
      return "megatron";
    case AttentionKind::kUnfused:
      return "unfused";
    case AttentionKind::kFlash:
      return "flash";
  }
  return "?";
}

std::string Describe(const TransformerConfig& config) {
  std::string ffn =
      config.FfnHidden() == 4 * config.hidden ? "" : fmt::format(", ffn {}", config.FfnHidden());
  std::string kv =
      config.KvHeads() == config.heads ? "" : fmt::format(", {} kv heads", config.KvHeads());
  return fmt::format(
      "GPT {} layers, hidden {}{}, {} heads{}, seq {}, micro-batch {}, vocab {}{}, {} attention, "
      "dropout {}{}; {}{}",
      config.layers, config.hidden, ffn, config.heads, kv, config.seq, config.micro_batch,
      config.vocab, config.tied_embeddings ? ", tied embeddings" : "",
      AttentionName(config.attention), config.dropout,
      config.autocast ? fmt::format(", autocast {}", DTypeName(*config.autocast)) : "",
      DescribeGenOptions(config),
      config.activation_checkpointing ? ", activation checkpointing" : "");
}

// The model as a program of runs, one per op of a pre-LN GPT block, with what each saves for
// backward (PyTorch's tools/autograd/derivatives.yaml) and the gradients its backward makes.
// Per block, without autocast (e bytes per activation element; dropout masks one byte: CUDA's
// native_dropout returns a bool mask, where PyTorch 1.13 on the CPU saves its noise in the
// input's dtype (_dropout_impl); LN statistics fp32; h_k = h_kv; the qkv rows are megatron's
// and flash's, unfused has three projections):
//
//   run              reads         makes            saves                 backward makes
//   ln1              x             ln1 e·sbh        x, mean, rstd 8·sb    grad x (new)
//   qkv              ln1           qkv e·sb(h+2hk)  ln1                   grad ln1
//   qkv.split        qkv           q, k, v: views   -                     grad qkv (cat)
//   attention (one of three, below)                                       grad q, k, v
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
// Attention `megatron` (Megatron-LM's core attention: baddbmm of the scaled scores, the fused
// scale-mask-softmax kernel that saves only its output, dropout, bmm with V):
//   attn.scores      q, k          e·as²b           q, k                  grad q, grad k
//   attn.softmax     scores        e·as²b           its output            grad scores
//   attn.dropout     probs         e·as²b           mask as²b             grad probs
//   attn.context     drop, v       e·sbh            drop, v               grad drop, grad v
// What a block keeps from forward to backward is then Korthikanti et al. 2022 ("Reducing
// Activation Recomputation in Large Transformer Models", §4.1): attention sb[(3e + 1)h +
// 2e·h_kv] (QKV input, Q, K, V, projection input, its mask), scores (2e + 1)·as²b (softmax
// output, its mask, dropout output), MLP sb[(e + 1)h + 2e·f] (input, GeLU input and output,
// mask), layernorm inputs 2e·sbh; with e = 2, h_kv = h and f = 4h the paper's sbh(34 + 5as/h).
// The LN statistics (16·sb bytes per block) are what the paper leaves out.
//
// Attention `unfused` (a GPT written with PyTorch ops, tools/examples/tiny_gpt.py: separate
// Q, K, V projections, `q @ k.transpose(-2, -1) * scale`, `masked_fill` with a causal mask made
// in forward, softmax, dropout, `probs @ v`, `.transpose(1, 2).reshape`). at::matmul folds the
// 4-d operands into bmm through expand + reshape, and reshaping a transposed view copies: Q, K
// (transposed), V and the context are copied (CloneBackward passes its gradient on):
//   attn.q/k/v       ln1           e·sbh, e·sbh_k x2 ln1 (one tensor)     grad ln1 each, summed
//   attn.q/k.copy    q, k          e·sbh, e·sbh_k   -                     passes its gradient on
//   attn.scores      q, k copies   e·as²b           both copies           grad of each
//   attn.scale       scores        e·as²b           - (a CPU scalar)      grad scores
//   attn.mask        scaled        e·as²b           causal mask s² (bool) grad scaled
//   attn.softmax, attn.dropout as in megatron
//   attn.v.copy      v             e·sbh_k          -                     passes its gradient on
//   attn.context     drop, v copy  e·sbh            drop, v copy          grad drop, grad v copy
//   attn.context.copy  context     e·sbh            -                     passes its gradient on
// It keeps the same Q, K, V bytes as megatron (copies instead of the projection's output) plus
// the causal mask, and its forward makes two more transient e·as²b tensors (the scaled and the
// masked scores). With grouped-query attention the K and V copies are of the K/V width.
//
// Attention `flash` (FlashAttention-2, Dao 2023, and PyTorch 2's scaled_dot_product_attention on
// its flash backend; `scaled_dot_product_attention` does not exist in PyTorch 1.13): one kernel
// that keeps no s² tensor. flash_attn's autograd function saves q, k, v, its output, the
// softmax log-sum-exp (fp32, a·s·b) and, with dropout, the RNG state (two 64-bit words); its
// backward recomputes the scores (5 matmuls against the forward's 2: 2.5x the forward FLOPs)
// with two fp32 workspaces, dq_accum (s·b·h) and softmax_d (a·s·b), and with grouped-query
// attention dk_expanded and dv_expanded (e·sbh each) (csrc/flash_attn/flash_api.cpp, mha_bwd,
// non-deterministic; the rounding of s to 128 and of the head size left out):
//   attn.flash       q, k, v       e·sbh            q, k, v, output, lse  grad q, grad k, grad v
//
// Measured: `unfused` without dropout against tools/examples/tiny_gpt.py on PyTorch 1.13 (CPU,
// world size 1, tests/tools/oracle_test.py): every mark and phase peak within 0.45%.
//
// The residual adds pass their incoming gradient to both inputs (AddBackward0), so a block
// input's gradient is that pass-through summed with its LN's gradient into a new tensor
// (InputBuffer::accumulate). A dropout of probability 0 is no op at all (nn.Dropout(0) returns
// its input in PyTorch 1.13's _dropout_impl).
//
// Under torch.autocast (CUDA; the op lists in aten/src/ATen/autocast_mode.cpp, the same for these
// ops from 1.10 to 2.x): matmuls (linear, addmm, bmm, matmul, baddbmm, scaled_dot_product_
// attention) run in the autocast dtype, casting an input of another dtype to a copy that they
// save (activations are cast at every use, only fp32 leaf weights are cached: cached_cast); the
// weight copies are saved and their gradients cast back into the parameter's (ToCopyBackward);
// layer_norm and nll_loss run in fp32 ("fp32" policy) and softmax and log_softmax in fp32
// ("fp32_set_opt_dtype": softmax(x, dtype=float); on CUDA an fp16 input goes through the
// half_to_float kernel without a copy, a bf16 one is first cast to an fp32 copy); every other
// op (embedding, GeLU, dropout, the residual adds) runs in its input's dtype, so the residual
// stream stays in the gathered parameters' dtype (fp32 + fp16 promotes to fp32) and a branch's
// gradient is cast back to the branch's dtype where the add's inputs differ (the engine's
// validate_outputs). The loss of a low-precision model without autocast casts the logits to
// fp32 first (cross_entropy(logits.float(), labels)).
class TransformerBuilder {
 public:
  explicit TransformerBuilder(const TransformerConfig& config)
      : config_(config),
        d_(DimsOf(config)),
        act_(config.autocast.value_or(config.compute_dtype)),
        norm_(config.autocast ? DType::kFloat32 : config.compute_dtype),
        program_(Describe(config)) {}

  ModelProgram Build() {
    program_.SetAutocast(config_.autocast);
    const auto tokens = static_cast<double>(d_.tokens());
    // The batch: token ids and labels, int64, made once before the loop.
    program_.AddInput(Tensor("tokens", SaturatingProduct({8, d_.s, d_.b}), "int64"));
    program_.AddInput(Tensor("labels", SaturatingProduct({8, d_.s, d_.b}), "int64"));

    // Token embedding (v x h) plus learned position embedding (s x h). Its forward is a lookup
    // and an add: charged as 2 FLOPs per output element; its backward needs only the ids: the
    // tokens and the positions (arange(s), int64, made in forward and saved by the position
    // lookup's EmbeddingBackward). Not an autocast op: its output is in the gathered dtype. With
    // tied embeddings the head uses its token embedding too, so it is the outermost instance:
    // its forward ends after the head's, and like fairscale's root it is not resharded.
    constexpr std::size_t kEmbedding = 0;
    program_.AddInstance({"embedding",
                          {FlatOf({{"tok.weight", SaturatingProduct({d_.v, d_.h}), d_.v},
                                   {"pos.weight", SaturatingProduct({d_.s, d_.h}), d_.s}})},
                          true,
                          !config_.tied_embeddings});
    program_.Gather(kEmbedding);
    program_
        .Run("embedding", 2 * tokens * static_cast<double>(d_.h), {kEmbedding}, {In("tokens")},
             {New("embedding.out", Tokens(d_.h), config_.compute_dtype)},
             {Keep("tokens"), Fresh(SaturatingProduct({8, d_.s}), "int64", "positions")})
        .param_reads = {{"tok.weight", "pos.weight"}};
    if (!config_.tied_embeddings) program_.EndForward(kEmbedding);

    std::string x = "embedding.out";
    for (int i = 0; i < config_.layers; ++i) x = AddBlock(i, x);

    // Final layernorm (2h) and the LM head (v x h, untied), the last instance: it runs last in
    // forward and first in backward, so like fairscale's root (whose own parameters
    // disable_reshard_on_root keeps) it is not resharded: that saves an all-gather at no peak.
    std::vector<ParamView> head_views = {{"final_norm.weight", d_.h, d_.h},
                                         {"final_norm.bias", d_.h, d_.h}};
    if (!config_.tied_embeddings)
      head_views.push_back({"head.weight", SaturatingProduct({d_.h, d_.v}), d_.v});
    const std::size_t head = program_.AddInstance({"head", {FlatOf(head_views)}, true, false});
    std::vector<std::size_t> head_uses = {head};
    if (config_.tied_embeddings) head_uses.push_back(kEmbedding);
    program_.Gather(head);
    const std::string norm = LayerNorm("final_norm", x, {head});
    Linear("head", norm, d_.h, d_.v, std::move(head_uses), "logits", false,
           config_.tied_embeddings ? "tok.weight" : "head.weight");
    program_.EndForward(head);
    if (config_.tied_embeddings) program_.EndForward(kEmbedding);

    // cross_entropy(logits, labels): log_softmax, which saves its fp32 output, and nll_loss,
    // which saves the labels and its total weight (an fp32 scalar); nll_loss's backward makes
    // the fp32 gradient of the log-probs, log_softmax's that of its (fp32) input, a cast's that
    // of the logits. The fp32 input is the logits themselves in an fp32 model, a cast copy
    // under bf16 autocast or of a low-precision model without autocast, and none under fp16
    // autocast (half_to_float).
    std::string logits = "logits";
    const bool half_to_float = config_.autocast == DType::kFloat16;
    if (!half_to_float) logits = Cast("loss.cast", logits, DType::kFloat32);
    const std::uint64_t logit_numel = Tokens(d_.v);
    program_.Run("loss.log_softmax", 0, {}, Operand(logits, "logits"),
                 {New("log_probs", logit_numel, DType::kFloat32)}, {Keep("log_probs")});
    program_.Run("loss.nll", 0, {}, {In("log_probs"), In("labels", InputGrad::kNone)},
                 {Tensor("loss", kFp32Size, "fp32")},
                 {Keep("labels"), Fresh(kFp32Size, "fp32", "total_weight")});
    program_.SetLoss("loss");
    return program_.Take();
  }

 private:
  struct TensorInfo {
    std::uint64_t numel;
    DType dtype;
  };

  // The parameter name of a run's module in its instance's views: the run's name without its
  // block's prefix ("block3.mlp.fc1" -> "mlp.fc1").
  static std::string ParamName(const std::string& run) {
    return run.rfind("block", 0) == 0 ? run.substr(run.find('.') + 1) : run;
  }

  // Elements of an activation of s x b tokens x `width`.
  std::uint64_t Tokens(std::uint64_t width) const { return SaturatingProduct({d_.s, d_.b, width}); }

  // A run output of `numel` elements of `dtype`, remembered for the casts and copies below.
  ProgramTensor New(const std::string& id, std::uint64_t numel, DType dtype,
                    std::string alias = "") {
    info_[id] = {numel, dtype};
    return Tensor(id, SaturatingProduct({ElementSize(dtype), numel}), DTypeName(dtype),
                  std::move(alias));
  }
  const TensorInfo& Info(const std::string& id) const {
    const auto it = info_.find(id);
    BUCKETSIM_CHECK(it != info_.end());  // every id is made by New before it is read
    return it->second;
  }

  // `x` in `dtype`: itself, or a cast copy (a run `name`; ToCopyBackward gives `x` a new
  // gradient in its own dtype).
  std::string Cast(const std::string& name, const std::string& x, DType dtype) {
    if (Info(x).dtype == dtype) return x;
    // Named after the run: each matmul casts its operand itself (three projections reading one
    // layernorm output make three copies).
    const std::string id = name + ".out";
    program_.Run(name, 0, {}, {In(x)}, {New(id, Info(x).numel, dtype)});
    return id;
  }
  // The inputs of a run that reads `operand`, a cast copy of `original` (or `original`
  // itself): the cast happens inside the op (autocast's wrapper, softmax(x, dtype)), whose
  // caller holds `original` until the op returns, so the run reads it too (no gradient through
  // it: that flows through the copy's cast run).
  static std::vector<RunInput> Operand(const std::string& operand, const std::string& original) {
    std::vector<RunInput> inputs = {In(operand)};
    if (operand != original) inputs.push_back(In(original, InputGrad::kNone));
    return inputs;
  }
  // The operand of an autocast matmul: cast to the autocast dtype where it is not in it.
  std::string MatmulOperand(const std::string& name, const std::string& x) {
    return config_.autocast ? Cast(name + ".cast", x, *config_.autocast) : x;
  }
  // A copy of `x` (clone, .contiguous(), a reshape of a transposed view): CloneBackward passes
  // its gradient on.
  std::string Copy(const std::string& name, const std::string& x) {
    program_.Run(name, 0, {}, {In(x, InputGrad::kPass)},
                 {New(name + ".out", Info(x).numel, Info(x).dtype)});
    return name + ".out";
  }

  // A linear layer `name` (in x out weights, with a bias unless !bias; its parameters the views
  // named after it, ParamName) on `x`: saves its
  // operand; returns its output `out_id`. Under autocast it casts its weight to the autocast
  // dtype and saves the copy; its backward makes the copy's gradient and the bias's in that
  // dtype before ToCopyBackward casts them into the parameter's gradient.
  std::string Linear(const std::string& name, const std::string& x, std::uint64_t in,
                     std::uint64_t out, std::vector<std::size_t> uses, const std::string& out_id,
                     bool bias = true, std::string weight = "") {
    const std::string operand = MatmulOperand(name, x);
    const std::uint64_t param_numel = SaturatingProduct({in + (bias ? 1 : 0), out});
    ForwardOp& op = program_.Run(
        name, 2 * static_cast<double>(d_.tokens()) * static_cast<double>(param_numel),
        std::move(uses), Operand(operand, x), {New(out_id, Tokens(out), act_)}, {Keep(operand)});
    // Its backward makes the weight's gradient (`weight`: a weight it shares, tied embeddings)
    // and the bias's.
    const std::string param = ParamName(name);
    op.param_reads = std::vector<std::string>{weight.empty() ? param + ".weight" : weight};
    if (bias) op.param_reads->push_back(param + ".bias");
    if (config_.autocast) {
      const Bytes e = ElementSize(*config_.autocast);
      const std::string_view dtype = DTypeName(*config_.autocast);
      op.saves.push_back(Fresh(SaturatingProduct({e, in, out}), dtype, "weight cast"));
      op.workspace.push_back(
          Workspace(SaturatingProduct({e, param_numel}), dtype, "weight cast grad"));
    }
    return out_id;
  }

  // A LayerNorm run (fp32 under autocast: its input cast to fp32 if it is not): saves its input
  // and its per-token mean and rstd (fp32). Returns its output.
  std::string LayerNorm(const std::string& name, const std::string& x,
                        std::vector<std::size_t> uses) {
    const std::string input = config_.autocast ? Cast(name + ".cast", x, DType::kFloat32) : x;
    const Bytes stats = SaturatingProduct({kFp32Size, d_.s, d_.b});
    const std::string param = ParamName(name);
    program_
        .Run(name, 2 * static_cast<double>(d_.tokens()) * 2 * static_cast<double>(d_.h),
             std::move(uses), Operand(input, x), {New(name + ".out", Tokens(d_.h), norm_)},
             {Keep(input), Fresh(stats, "fp32", "mean"), Fresh(stats, "fp32", "rstd")})
        .param_reads = {{param + ".weight", param + ".bias"}};
    return name + ".out";
  }

  // Softmax over the scores: fp32 under autocast (a bf16 input through an fp32 copy); saves its
  // output.
  std::string Softmax(const std::string& name, const std::string& scores,
                      const std::string& out_id) {
    std::string input = scores;
    DType out = Info(scores).dtype;
    if (config_.autocast) {
      out = DType::kFloat32;
      if (*config_.autocast != DType::kFloat16) input = Cast(name + ".cast", scores, out);
    }
    program_.Run(name, 0, {}, Operand(input, scores), {New(out_id, Info(scores).numel, out)},
                 {Keep(out_id)});
    return out_id;
  }

  // A dropout run: saves its mask (bool, one byte per element); none without dropout.
  std::string Dropout(const std::string& name, const std::string& x) {
    if (config_.dropout <= 0) return x;
    program_.Run(name, 0, {}, {In(x)}, {New(name + ".out", Info(x).numel, Info(x).dtype)},
                 {Fresh(Info(x).numel, "bool", "mask")});
    return name + ".out";
  }

  // x + y in the promoted dtype; an input of that dtype gets the incoming gradient itself, one
  // of another dtype a cast of it.
  std::string Residual(const std::string& name, const std::string& x, const std::string& y,
                       const std::string& out) {
    const DType dtype = Info(x).dtype == Info(y).dtype ? Info(x).dtype : DType::kFloat32;
    const auto grad = [&](const std::string& id) {
      return Info(id).dtype == dtype ? InputGrad::kPass : InputGrad::kNew;
    };
    program_.Run(name, 0, {}, {In(x, grad(x)), In(y, grad(y))}, {New(out, Tokens(d_.h), dtype)});
    return out;
  }

  // The attention of a block from the layernormed input; returns the context (s x b x h).
  std::string Attention(const std::string& p, const std::string& ln, std::size_t f) {
    const std::uint64_t scores = SaturatingProduct({d_.a, d_.s, d_.s, d_.b});
    // QK^T and scores x V: 2bs²h FLOPs each (per query head, so GQA does not change them).
    const double matmul_flops = 2.0 * static_cast<double>(d_.b) * static_cast<double>(d_.s) *
                                static_cast<double>(d_.s) * static_cast<double>(d_.h);
    std::string q, k, v;
    if (config_.attention == AttentionKind::kUnfused) {
      q = Linear(p + "attn.q", ln, d_.h, d_.h, {f}, p + "q");
      k = Linear(p + "attn.k", ln, d_.h, d_.h_kv, {f}, p + "k");
      v = Linear(p + "attn.v", ln, d_.h, d_.h_kv, {f}, p + "v");
    } else {
      const std::string qkv = Linear(p + "qkv", ln, d_.h, d_.h + 2 * d_.h_kv, {f}, p + "qkv.out");
      program_.Run(p + "qkv.split", 0, {}, {In(qkv)},
                   {New(p + "q", Tokens(d_.h), act_, qkv), New(p + "k", Tokens(d_.h_kv), act_, qkv),
                    New(p + "v", Tokens(d_.h_kv), act_, qkv)});
      q = p + "q", k = p + "k", v = p + "v";
    }
    if (config_.attention == AttentionKind::kFlash) {
      std::vector<SavedTensor> saves = {
          Keep(q), Keep(k), Keep(v), Keep(p + "attn.flash.out"),
          Fresh(SaturatingProduct({kFp32Size, d_.a, d_.s, d_.b}), "fp32", "softmax_lse")};
      if (config_.dropout > 0) saves.push_back(Fresh(16, "int64", "rng_state"));
      ForwardOp& flash = program_.Run(p + "attn.flash", 2 * matmul_flops, {}, {In(q), In(k), In(v)},
                                      {New(p + "attn.flash.out", Tokens(d_.h), act_)}, saves);
      flash.backward_flops = 2.5 * flash.flops;
      flash.workspace = {
          Workspace(SaturatingProduct({kFp32Size, d_.s, d_.b, d_.h}), "fp32", "dq_accum"),
          Workspace(SaturatingProduct({kFp32Size, d_.a, d_.s, d_.b}), "fp32", "softmax_d")};
      // With grouped-query attention the kernel writes dK and dV per query head first
      // (dk_expanded, dv_expanded) and sums them into the K/V heads' gradients.
      if (d_.h_kv != d_.h) {
        for (const char* name : {"dk_expanded", "dv_expanded"}) {
          flash.workspace.push_back(Workspace(
              SaturatingProduct({ElementSize(act_), d_.s, d_.b, d_.h}), DTypeName(act_), name));
        }
      }
      return p + "attn.flash.out";
    }
    const bool unfused = config_.attention == AttentionKind::kUnfused;
    if (unfused) q = Copy(p + "attn.q.copy", q), k = Copy(p + "attn.k.copy", k);
    program_.Run(p + "attn.scores", matmul_flops, {}, {In(q), In(k)},
                 {New(p + "scores", scores, act_)}, {Keep(q), Keep(k)});
    std::string s = p + "scores";
    if (unfused) {
      program_.Run(p + "attn.scale", 0, {}, {In(s)}, {New(p + "attn.scale.out", scores, act_)});
      program_.Run(p + "attn.mask", 0, {}, {In(p + "attn.scale.out")},
                   {New(p + "attn.mask.out", scores, act_)},
                   {Fresh(SaturatingProduct({d_.s, d_.s}), "bool", "causal mask")});
      s = p + "attn.mask.out";
    }
    const std::string dropped =
        Dropout(p + "attn.dropout", Softmax(p + "attn.softmax", s, p + "probs"));
    const std::string probs = MatmulOperand(p + "attn.context", dropped);
    if (unfused) v = Copy(p + "attn.v.copy", v);
    std::vector<RunInput> context_inputs = Operand(probs, dropped);
    context_inputs.insert(context_inputs.begin() + 1, In(v));
    program_.Run(p + "attn.context", matmul_flops, {}, std::move(context_inputs),
                 {New(p + "context", Tokens(d_.h), act_)}, {Keep(probs), Keep(v)});
    return unfused ? Copy(p + "attn.context.copy", p + "context") : p + "context";
  }

  std::string AddBlock(int i, const std::string& x) {
    const std::size_t f = program_.AddInstance(
        {fmt::format("block{}", i), {FlatOf(BlockViews(d_, config_.attention))}, true, true});
    const std::string p = fmt::format("block{}.", i);
    program_.Gather(f);
    // The block's forward, inside its FSDP unit's hooks: `gen program --checkpoint Block`
    // places a region exactly where --activation-checkpointing does.
    program_.BeginCall(fmt::format("block{}", i), "Block");
    // torch.utils.checkpoint saves the block's input (e per sbh element) and nothing else:
    // L blocks keep e·sbh·L, Korthikanti et al. §5's 2sbhL with 16-bit activations.
    if (config_.activation_checkpointing) program_.CheckpointBegin({Keep(x)});
    const std::string context = Attention(p, LayerNorm(p + "ln1", x, {f}), f);
    const std::string proj = Dropout(p + "attn.proj.drop",
                                     Linear(p + "attn.proj", context, d_.h, d_.h, {f}, p + "proj"));
    const std::string x2 = Residual(p + "residual1", x, proj, p + "x2");
    const std::string fc1 =
        Linear(p + "mlp.fc1", LayerNorm(p + "ln2", x2, {f}), d_.h, d_.f, {f}, p + "fc1");
    // GeLU (not an autocast op) saves its input.
    program_.Run(p + "mlp.gelu", 0, {}, {In(fc1)},
                 {New(p + "gelu", Info(fc1).numel, Info(fc1).dtype)}, {Keep(fc1)});
    const std::string fc2 =
        Dropout(p + "mlp.drop", Linear(p + "mlp.fc2", p + "gelu", d_.f, d_.h, {f}, p + "fc2"));
    const std::string out = Residual(p + "residual2", x2, fc2, p + "out");
    if (config_.activation_checkpointing) program_.CheckpointEnd();
    program_.EndCall();
    program_.EndForward(f);
    return out;
  }

  const TransformerConfig& config_;
  const ModelDims d_;
  const DType act_;   // the matmuls' output dtype: the autocast dtype, else the compute dtype
  const DType norm_;  // the layernorms' output dtype: fp32 under autocast
  std::map<std::string, TensorInfo> info_;
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
  if (!(config.dropout >= 0 && config.dropout < 1)) {
    return InvalidArgument(
        fmt::format("dropout must be at least 0 and below 1 (got {})", config.dropout));
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
    params.push_back(ChoiceParam(
        "attention",
        "What attention saves: megatron (fused scale-mask-softmax, Korthikanti et al.), unfused "
        "(PyTorch ops on transposed head views: copies of Q, K, V, a causal mask), flash "
        "(FlashAttention-2 / scaled_dot_product_attention: no s x s tensor)",
        c.attention,
        {{"megatron", AttentionKind::kMegatron},
         {"unfused", AttentionKind::kUnfused},
         {"flash", AttentionKind::kFlash}}));
    params.push_back(NumberParam(
        "dropout", "Dropout probability (attention and residual branches; 0: no dropout ops)",
        c.dropout));
    params.push_back(BoolParam("activation-checkpointing",
                               "Checkpoint every block: keep its input in forward, recompute its "
                               "activations in backward",
                               c.activation_checkpointing));
    params.push_back(AutocastParam(c.autocast));
    for (PresetParam& param : GenOptionParams(c)) params.push_back(std::move(param));
    return params;
  }
  Result<ModelProgram> Program() const override { return TransformerProgram(config_); }
  const GenOptions& options() const override { return config_; }

 private:
  TransformerConfig config_;
};

}  // namespace

Result<ModelProgram> TransformerProgram(const TransformerConfig& config) {
  BUCKETSIM_RETURN_IF_ERROR(ValidateConfig(config));
  return TransformerBuilder(config).Build();
}

Status GenerateTransformer(const TransformerConfig& config, EventSink& sink) {
  Result<ModelProgram> program = TransformerProgram(config);
  if (!program.ok()) return program.status();
  return EmitFsdpTrace(*program, config, sink);
}

std::unique_ptr<Preset> MakeTransformerPreset() { return std::make_unique<TransformerPreset>(); }

}  // namespace bucketsim
