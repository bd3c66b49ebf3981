#include "gen/transformer_preset.h"

#include "policy/shard_size.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace bucketsim {
namespace {

// The three streams of fairscale FSDP that matter to memory. fairscale also has an
// `fp32_to_fp16` stream for the `_fp16_shard` cast; the cast runs inside `_rebuild_full_params`
// under the all-gather stream's ordering, so it is put on `all_gather` here.
constexpr StreamId kDefaultStream = 0;
constexpr StreamId kAllGatherStream = 1;
constexpr StreamId kPostBackwardStream = 2;

constexpr Bytes kFp32Size = 4;
// Dropout masks are bool tensors: one byte per element whatever the compute dtype.
constexpr Bytes kMaskSize = 1;

// The step is an elementwise, memory-bound pass over the fp32 shards; its span is charged as
// this many FLOPs per shard element (an order of magnitude: read/write param, grad and state).
// It is tiny next to forward and backward, which is all the time model needs.
double StepFlopsPerElement(OptimizerKind optimizer) {
  switch (optimizer) {
    case OptimizerKind::kSgd:
      return 2;
    case OptimizerKind::kSgdMomentum:
      return 4;
    case OptimizerKind::kAdam:
      return 12;
  }
  return 0;
}

// fp32 tensors of optimizer state per parameter element, created lazily at the first step:
// SGD none, SGD momentum the momentum buffer, Adam exp_avg and exp_avg_sq (§2.6).
int OptimizerStateTensors(OptimizerKind optimizer) {
  switch (optimizer) {
    case OptimizerKind::kSgd:
      return 0;
    case OptimizerKind::kSgdMomentum:
      return 1;
    case OptimizerKind::kAdam:
      return 2;
  }
  return 0;
}

std::string_view OptimizerName(OptimizerKind optimizer) {
  switch (optimizer) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kSgdMomentum:
      return "sgd-momentum";
    case OptimizerKind::kAdam:
      return "adam";
  }
  return "?";
}

// A product that saturates instead of wrapping, so an absurd configuration shows up as a size
// beyond kMaxSaneBytes (and is rejected) rather than as a small wrapped-around number.
std::uint64_t SaturatingProduct(std::initializer_list<std::uint64_t> factors) {
  std::uint64_t product = 1;
  for (std::uint64_t factor : factors) {
    if (__builtin_mul_overflow(product, factor, &product)) {
      return std::numeric_limits<std::uint64_t>::max();
    }
  }
  return product;
}

// One FSDP instance of the model: one flat parameter, the activations its forward keeps for
// backward, and its forward cost.
struct InstanceModel {
  std::string name;
  Numel numel = 0;        // unsharded
  Numel shard_numel = 0;  // s = ceil(numel / ws), the padded shard
  // Allocated in forward in this order, freed in backward in reverse order. Under activation
  // checkpointing they are transient in forward and allocated again by the recompute.
  std::vector<Bytes> activation_bytes;
  double forward_flops = 0;
  // Non-zero when the instance is activation-checkpointed: the one activation its forward
  // keeps for backward, the block's input.
  Bytes checkpointed_input_bytes = 0;

  bool checkpointed() const { return checkpointed_input_bytes != 0; }
};

struct ModelDims {
  std::uint64_t b, s, h, a, v;  // micro-batch, sequence, hidden, heads, vocab
  Bytes e;                      // bytes per activation element (the compute dtype)
  std::uint64_t tokens() const { return b * s; }
};

// Per transformer layer, Korthikanti et al. 2022 §4.1, as four allocations. With e = 2 they sum
// to sbh(34 + 5as/h).
std::vector<Bytes> BlockActivationBytes(const ModelDims& d) {
  const Bytes e = d.e;
  return {
      // QKV input e, Q and K 2e, V e, projection input e, projection dropout mask 1 (per sbh).
      SaturatingProduct({5 * e + kMaskSize, d.s, d.b, d.h}),
      // Attention scores: softmax output e, its dropout mask 1, dropout output e (per as^2b).
      SaturatingProduct({2 * e + kMaskSize, d.a, d.s, d.s, d.b}),
      // MLP: input e, GeLU input 4e, GeLU output 4e, dropout mask 1 (per sbh).
      SaturatingProduct({9 * e + kMaskSize, d.s, d.b, d.h}),
      // The inputs of the two layernorms (per sbh).
      SaturatingProduct({2 * e, d.s, d.b, d.h}),
  };
}

std::vector<InstanceModel> BuildModel(const TransformerConfig& config) {
  const ModelDims d{
      static_cast<std::uint64_t>(config.micro_batch), static_cast<std::uint64_t>(config.seq),
      static_cast<std::uint64_t>(config.hidden),      static_cast<std::uint64_t>(config.heads),
      static_cast<std::uint64_t>(config.vocab),       ElementSize(config.compute_dtype)};
  const auto tokens = static_cast<double>(d.tokens());
  std::vector<InstanceModel> model;

  // Token embedding (v x h) plus learned position embedding (s x h). Its forward is a lookup
  // and an add: charged as 2 FLOPs per output element. It keeps its output for backward.
  model.push_back({"embedding",
                   SaturatingProduct({d.v + d.s, d.h}),
                   0,
                   {SaturatingProduct({d.e, d.s, d.b, d.h})},
                   2 * tokens * static_cast<double>(d.h)});

  // QKV 3h^2+3h, out proj h^2+h, MLP 8h^2+5h, two layernorms 4h: 12h^2 + 13h. Forward FLOPs:
  // 2 per parameter per token for the matmuls, plus 4bs^2h for QK^T and scores x V.
  const Numel block_numel = SaturatingProduct({d.h, 12 * d.h + 13});
  const double block_flops = 2 * tokens * static_cast<double>(block_numel) +
                             4.0 * static_cast<double>(d.b) * static_cast<double>(d.s) *
                                 static_cast<double>(d.s) * static_cast<double>(d.h);
  for (int i = 0; i < config.layers; ++i) {
    InstanceModel block{fmt::format("block{}", i), block_numel, 0, BlockActivationBytes(d),
                        block_flops};
    // torch.utils.checkpoint saves the block's input (e per sbh element) and nothing else:
    // L blocks keep e·sbh·L, Korthikanti et al. §5's 2sbhL with 16-bit activations.
    if (config.activation_checkpointing) {
      block.checkpointed_input_bytes = SaturatingProduct({d.e, d.s, d.b, d.h});
    }
    model.push_back(std::move(block));
  }

  // Final layernorm (2h) and the untied LM head (v x h). It keeps the logits (e per element)
  // and the fp32 copy of them the loss is computed from (cross-entropy upcasts its input).
  const Numel head_numel = SaturatingProduct({d.h, d.v + 2});
  model.push_back(
      {"head",
       head_numel,
       0,
       {SaturatingProduct({d.e, d.s, d.b, d.v}), SaturatingProduct({kFp32Size, d.s, d.b, d.v})},
       2 * tokens * static_cast<double>(head_numel)});

  const auto ws = static_cast<Numel>(config.world_size);
  for (InstanceModel& instance : model) instance.shard_numel = PaddedShardNumel(instance.numel, ws);
  return model;
}

Status ValidateConfig(const TransformerConfig& config) {
  const std::pair<const char*, int> positive[] = {
      {"layers", config.layers},
      {"hidden", config.hidden},
      {"heads", config.heads},
      {"seq", config.seq},
      {"micro_batch", config.micro_batch},
      {"vocab", config.vocab},
      {"iterations", config.iterations},
  };
  for (const auto& [field, value] : positive) {
    if (value < 1) {
      return InvalidArgument(fmt::format("{} must be at least 1 (got {})", field, value));
    }
  }
  // Each layer is an FSDP instance in the header; far beyond any real model is a typo.
  if (config.layers > (1 << 16)) {
    return InvalidArgument(fmt::format("layers {} is beyond 2^16", config.layers));
  }
  if (config.hidden % config.heads != 0) {
    return InvalidArgument(
        fmt::format("heads ({}) must divide hidden ({})", config.heads, config.hidden));
  }
  // With one rank fairscale does not shard: no all-gather, no reduce-scatter, the full
  // gradient is the gradient. That is a different trace, not this preset.
  if (config.world_size < 2) {
    return InvalidArgument(
        fmt::format("world_size must be at least 2 (got {}): a single rank is not sharded by FSDP",
                    config.world_size));
  }
  // The header lists every member rank; TraceHeader::Finalize rejects more than 2^20 anyway,
  // but only after the list is built.
  if (config.world_size > (1 << 20)) {
    return InvalidArgument(fmt::format("world_size {} is beyond 2^20 ranks", config.world_size));
  }
  if (config.rank < 0 || config.rank >= config.world_size) {
    return InvalidArgument(
        fmt::format("rank {} is outside [0, world_size {})", config.rank, config.world_size));
  }
  const DType compute = config.compute_dtype;
  if (compute != DType::kFloat32 && compute != DType::kFloat16 && compute != DType::kBFloat16) {
    return InvalidArgument(
        fmt::format("compute_dtype must be fp32, fp16 or bf16 (got {})", DTypeName(compute)));
  }
  // fairscale reduces in the compute dtype, or in fp32 with fp32_reduce_scatter.
  if (config.reduce_dtype != compute && config.reduce_dtype != DType::kFloat32) {
    return InvalidArgument(fmt::format("reduce_dtype must be compute_dtype ({}) or fp32 (got {})",
                                       DTypeName(compute), DTypeName(config.reduce_dtype)));
  }
  if (!std::isfinite(config.bucket_cap_mb)) {
    return InvalidArgument("bucket_cap_mb must be a finite number");
  }
  if (!std::isfinite(config.device_tflops) || config.device_tflops <= 0) {
    return InvalidArgument(
        fmt::format("device_tflops must be a positive number (got {})", config.device_tflops));
  }
  return Status::Ok();
}

// Every allocation the trace makes is a parameter-sized tensor (at most numel x 4 bytes, the
// fp32 grad copy) or an activation; none may exceed what a trace reader accepts.
Status ValidateSizes(const std::vector<InstanceModel>& model) {
  for (const InstanceModel& instance : model) {
    Bytes largest = SaturatingProduct({instance.numel, kFp32Size});
    for (Bytes bytes : instance.activation_bytes) largest = std::max(largest, bytes);
    largest = std::max(largest, instance.checkpointed_input_bytes);
    if (largest > kMaxSaneBytes) {
      return InvalidArgument(fmt::format(
          "'{}' would need an allocation of more than 1 PiB: hidden, seq, heads, micro_batch or "
          "vocab is too large",
          instance.name));
    }
  }
  return Status::Ok();
}

std::string Describe(const TransformerConfig& config) {
  return fmt::format(
      "GPT {} layers, hidden {}, {} heads, seq {}, micro-batch {}, vocab {}; fairscale FSDP rank "
      "{} of {}, compute {}, reduce {}, {} groups, {}, {} iterations{}",
      config.layers, config.hidden, config.heads, config.seq, config.micro_batch, config.vocab,
      config.rank, config.world_size, DTypeName(config.compute_dtype),
      DTypeName(config.reduce_dtype),
      config.group_layout == GroupLayout::kShared ? "shared" : "per-instance",
      OptimizerName(config.optimizer), config.iterations,
      config.activation_checkpointing ? ", activation checkpointing" : "");
}

Status BuildHeader(const TransformerConfig& config, const std::vector<InstanceModel>& model,
                   TraceHeader& header) {
  header.world_size = config.world_size;
  header.rank = config.rank;
  header.bucket_cap_mb = config.bucket_cap_mb;
  header.description = Describe(config);
  header.streams = {{"default"}, {"all_gather"}, {"post_backward"}};

  std::vector<int> ranks(static_cast<std::size_t>(config.world_size));
  for (int r = 0; r < config.world_size; ++r) ranks[static_cast<std::size_t>(r)] = r;
  if (config.group_layout == GroupLayout::kShared) {
    // get_process_group_cached(ProcessGroupName.reduce_scatter): one object for all.
    header.groups.push_back({1, ranks, "reduce_scatter"});
  } else {
    // dist.new_group() inside each FSDP constructor: same members, distinct objects.
    for (std::size_t f = 0; f < model.size(); ++f) {
      header.groups.push_back({f + 1, ranks, model[f].name + ".process_group"});
    }
  }
  for (const InstanceModel& instance : model) {
    header.fsdp.push_back({instance.name, {{"flat_param_0", instance.numel, DType::kFloat32}}});
  }
  return header.Finalize();
}

// Emits the events of the whole run, in order, with allocation ids from 1.
class TransformerTrace {
 public:
  TransformerTrace(const TransformerConfig& config, std::vector<InstanceModel> model,
                   TraceHeader& header, EventSink& sink)
      : config_(config),
        model_(std::move(model)),
        header_(header),
        sink_(sink),
        compute_size_(ElementSize(config.compute_dtype)),
        reduce_size_(ElementSize(config.reduce_dtype)),
        mixed_precision_(config.compute_dtype != DType::kFloat32),
        fp32_reduce_scatter_(mixed_precision_ && config.reduce_dtype == DType::kFloat32),
        full_param_ids_(model_.size(), 0),
        activation_ids_(model_.size()) {}

  Status Run() {
    // Model construction: each rank keeps its fp32 shard for the whole run.
    for (const InstanceModel& instance : model_) {
      std::uint64_t id = 0;
      BUCKETSIM_RETURN_IF_ERROR(
          Alloc(instance.shard_numel * kFp32Size, kDefaultStream, Category::kParam, id));
    }
    for (int i = 0; i < config_.iterations; ++i) BUCKETSIM_RETURN_IF_ERROR(Iteration(i));
    return Status::Ok();
  }

 private:
  Status Iteration(int iteration) {
    BUCKETSIM_RETURN_IF_ERROR(Emit(IterationEvent(static_cast<std::uint64_t>(iteration))));

    BUCKETSIM_RETURN_IF_ERROR(EnterPhase(Phase::kForward));
    for (std::size_t f = 0; f < model_.size(); ++f) BUCKETSIM_RETURN_IF_ERROR(Forward(f));
    BUCKETSIM_RETURN_IF_ERROR(Mark("after fwd"));

    BUCKETSIM_RETURN_IF_ERROR(EnterPhase(Phase::kBackward));
    for (std::size_t f = model_.size(); f-- > 0;) BUCKETSIM_RETURN_IF_ERROR(Backward(f));
    BUCKETSIM_RETURN_IF_ERROR(Emit(FlushEvent()));
    BUCKETSIM_RETURN_IF_ERROR(Mark("after bwd"));

    BUCKETSIM_RETURN_IF_ERROR(EnterPhase(Phase::kStep));
    if (iteration == 0) BUCKETSIM_RETURN_IF_ERROR(AllocOptimizerState());
    BUCKETSIM_RETURN_IF_ERROR(Compute("optimizer step", StepFlops()));
    BUCKETSIM_RETURN_IF_ERROR(Mark("after step"));

    // set_to_none=True drops every gradient shard, so the next backward's reduced shards are
    // fresh (view or cast), never accumulated.
    BUCKETSIM_RETURN_IF_ERROR(EnterPhase(Phase::kZeroGrad));
    return Emit(ZeroGradEvent(/*set_to_none=*/true));
  }

  // §2.3: gather, run, keep activations, reshard. A checkpointed block is wrapped inside its
  // FSDP instance, so it runs with the parameters gathered; it keeps its input and runs under
  // no_grad, its internal activations dying before the next block starts.
  Status Forward(std::size_t f) {
    const InstanceModel& instance = model_[f];
    BUCKETSIM_RETURN_IF_ERROR(AllGather(f));
    if (instance.checkpointed()) {
      // The checkpointed block input, kept until this block's backward.
      std::uint64_t input = 0;
      BUCKETSIM_RETURN_IF_ERROR(
          Alloc(instance.checkpointed_input_bytes, kDefaultStream, Category::kActivation, input));
      activation_ids_[f].push_back(input);
    }
    BUCKETSIM_RETURN_IF_ERROR(Compute("forward " + instance.name, instance.forward_flops));
    if (instance.checkpointed()) {
      std::vector<std::uint64_t> transient;
      BUCKETSIM_RETURN_IF_ERROR(AllocActivations(f, transient));
      BUCKETSIM_RETURN_IF_ERROR(FreeActivations(transient));
    } else {
      BUCKETSIM_RETURN_IF_ERROR(AllocActivations(f, activation_ids_[f]));
    }
    if (ReshardsAfterForward(f)) BUCKETSIM_RETURN_IF_ERROR(FreeFullParam(f));
    return Status::Ok();
  }

  // §2.4: pre-backward re-gather, autograd, then the post-backward hook. A checkpointed block's
  // backward reruns its forward first (with the parameters just gathered), which brings its
  // activations back for the backward proper.
  Status Backward(std::size_t f) {
    const InstanceModel& instance = model_[f];
    if (full_param_ids_[f] == 0) BUCKETSIM_RETURN_IF_ERROR(AllGather(f));
    if (instance.checkpointed()) {
      BUCKETSIM_RETURN_IF_ERROR(Compute("recompute " + instance.name, instance.forward_flops));
      BUCKETSIM_RETURN_IF_ERROR(AllocActivations(f, activation_ids_[f]));
    }
    BUCKETSIM_RETURN_IF_ERROR(Compute("backward " + instance.name, 2 * instance.forward_flops));
    std::uint64_t full_grad = 0;
    BUCKETSIM_RETURN_IF_ERROR(
        Alloc(instance.numel * compute_size_, kDefaultStream, Category::kGrad, full_grad));
    // Under checkpointing this frees the recomputed activations, then the kept input.
    BUCKETSIM_RETURN_IF_ERROR(FreeActivations(activation_ids_[f]));
    BUCKETSIM_RETURN_IF_ERROR(FreeFullParam(f));
    BUCKETSIM_RETURN_IF_ERROR(ReduceScatter(f));
    // HEAD (#784): param.grad = None before the reduce is queued, so the full gradient dies
    // when the hook returns, whether the reduce was bucketed or bypassed.
    return Free(full_grad);
  }

  // The activations the instance's forward creates, in order, their ids appended to `ids`.
  Status AllocActivations(std::size_t f, std::vector<std::uint64_t>& ids) {
    for (Bytes bytes : model_[f].activation_bytes) {
      std::uint64_t id = 0;
      BUCKETSIM_RETURN_IF_ERROR(Alloc(bytes, kDefaultStream, Category::kActivation, id));
      ids.push_back(id);
    }
    return Status::Ok();
  }

  // Frees `ids` newest first (autograd releases saved tensors from the last op backwards).
  Status FreeActivations(std::vector<std::uint64_t>& ids) {
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) BUCKETSIM_RETURN_IF_ERROR(Free(*it));
    ids.clear();
    return Status::Ok();
  }

  // The post_backward-stream part of the hook: fp32 copy, chunk_and_pad, the request.
  Status ReduceScatter(std::size_t f) {
    const InstanceModel& instance = model_[f];
    std::uint64_t fp32_copy = 0;
    if (fp32_reduce_scatter_) {
      BUCKETSIM_RETURN_IF_ERROR(
          Alloc(instance.numel * kFp32Size, kPostBackwardStream, Category::kGrad, fp32_copy));
    }
    // chunk_and_pad: ws chunks of s elements are views of the gradient, except a short last
    // chunk (padded into a new tensor) and missing chunks (new zero tensors).
    const auto ws = static_cast<Numel>(config_.world_size);
    const Numel new_chunks = ws - instance.numel / instance.shard_numel;
    std::uint64_t padding = 0;
    if (new_chunks > 0) {
      BUCKETSIM_RETURN_IF_ERROR(Alloc(new_chunks * instance.shard_numel * reduce_size_,
                                      kPostBackwardStream, Category::kGrad, padding));
    }

    // A reduced fp32 shard is kept as the gradient (a view); a 16-bit one is cast to the fp32
    // parameter dtype in the post-reduction hook (§2.4).
    const bool reduced_in_fp32 = config_.reduce_dtype == DType::kFloat32;
    BUCKETSIM_RETURN_IF_ERROR(Emit(ReduceScatterEvent(
        static_cast<std::uint32_t>(f), /*param=*/0, GroupOf(f), config_.reduce_dtype,
        instance.shard_numel, reduced_in_fp32 ? ShardMode::kView : ShardMode::kCast,
        DType::kFloat32)));

    if (padding != 0) BUCKETSIM_RETURN_IF_ERROR(Free(padding));
    if (fp32_copy != 0) BUCKETSIM_RETURN_IF_ERROR(Free(fp32_copy));
    return Status::Ok();
  }

  // _rebuild_full_params: with mixed precision the fp32 shard is cast into `_fp16_shard`
  // first, which is freed right after the all-gather that reads it.
  Status AllGather(std::size_t f) {
    const InstanceModel& instance = model_[f];
    std::uint64_t cast_shard = 0;
    if (mixed_precision_) {
      BUCKETSIM_RETURN_IF_ERROR(Alloc(instance.shard_numel * compute_size_, kAllGatherStream,
                                      Category::kAllGather, cast_shard));
    }
    const auto ws = static_cast<Numel>(config_.world_size);
    BUCKETSIM_RETURN_IF_ERROR(Alloc(ws * instance.shard_numel * compute_size_, kAllGatherStream,
                                    Category::kAllGather, full_param_ids_[f]));
    if (cast_shard != 0) BUCKETSIM_RETURN_IF_ERROR(Free(cast_shard));
    return Status::Ok();
  }

  Status FreeFullParam(std::size_t f) {
    const std::uint64_t id = full_param_ids_[f];
    full_param_ids_[f] = 0;
    return Free(id);
  }

  // fairscale forces reshard_after_forward=False on the root (disable_reshard_on_root). Here
  // the root owns no parameters of its own; "head" plays its part: it runs last in forward and
  // first in backward, so keeping its full parameters saves an all-gather at no extra peak.
  bool ReshardsAfterForward(std::size_t f) const { return f + 1 != model_.size(); }

  GroupId GroupOf(std::size_t f) const {
    return config_.group_layout == GroupLayout::kShared ? 1 : static_cast<GroupId>(f) + 1;
  }

  // Created lazily by the first optimizer.step() and kept for the rest of the run; one fp32
  // tensor of s elements per state buffer (Adam: exp_avg and exp_avg_sq).
  Status AllocOptimizerState() {
    const int tensors = OptimizerStateTensors(config_.optimizer);
    for (const InstanceModel& instance : model_) {
      for (int t = 0; t < tensors; ++t) {
        std::uint64_t id = 0;
        BUCKETSIM_RETURN_IF_ERROR(
            Alloc(instance.shard_numel * kFp32Size, kDefaultStream, Category::kOptimizerState, id));
      }
    }
    return Status::Ok();
  }

  double StepFlops() const {
    Numel shard_numel = 0;
    for (const InstanceModel& instance : model_) shard_numel += instance.shard_numel;
    return StepFlopsPerElement(config_.optimizer) * static_cast<double>(shard_numel);
  }

  Status Emit(Event event) {
    event.index = next_index_++;
    return sink_.OnEvent(event);
  }

  Status EnterPhase(Phase phase) { return Emit(PhaseEvent(phase)); }

  Status Alloc(Bytes bytes, StreamId stream, Category category, std::uint64_t& id) {
    id = next_alloc_id_++;
    return Emit(AllocEvent(id, bytes, category, stream));
  }

  Status Free(std::uint64_t id) {
    BUCKETSIM_CHECK(id != 0);
    return Emit(FreeEvent(id));
  }

  // Span on the default stream; FLOPs at the device's sustained rate.
  Status Compute(std::string_view name, double flops) {
    return Emit(
        ComputeEvent(kDefaultStream, flops / (config_.device_tflops * 1e6), header_.Intern(name)));
  }

  Status Mark(std::string_view name) { return Emit(MarkEvent(header_.Intern(name))); }

  const TransformerConfig& config_;
  const std::vector<InstanceModel> model_;
  TraceHeader& header_;
  EventSink& sink_;
  const Bytes compute_size_;
  const Bytes reduce_size_;
  const bool mixed_precision_;
  // Mixed precision with fp32 reduction: the hook copies the gradient to fp32 first.
  const bool fp32_reduce_scatter_;
  EventIndex next_index_ = 0;
  std::uint64_t next_alloc_id_ = 1;
  std::vector<std::uint64_t> full_param_ids_;  // 0 while the instance is resharded
  std::vector<std::vector<std::uint64_t>> activation_ids_;
};

}  // namespace

Status GenerateTransformer(const TransformerConfig& config, EventSink& sink) {
  BUCKETSIM_RETURN_IF_ERROR(ValidateConfig(config));
  std::vector<InstanceModel> model = BuildModel(config);
  BUCKETSIM_RETURN_IF_ERROR(ValidateSizes(model));
  // Sinks keep a pointer to the header and names are interned while events stream, so it
  // lives here until OnEnd has returned.
  TraceHeader header;
  BUCKETSIM_RETURN_IF_ERROR(BuildHeader(config, model, header));
  BUCKETSIM_RETURN_IF_ERROR(sink.OnHeader(header));
  BUCKETSIM_RETURN_IF_ERROR(TransformerTrace(config, std::move(model), header, sink).Run());
  return sink.OnEnd();
}

}  // namespace bucketsim
