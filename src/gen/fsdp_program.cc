#include "gen/fsdp_program.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "policy/shard_size.h"

namespace bucketsim {

std::uint64_t SaturatingProduct(std::initializer_list<std::uint64_t> factors) {
  std::uint64_t product = 1;
  for (std::uint64_t factor : factors) {
    if (__builtin_mul_overflow(product, factor, &product)) {
      return std::numeric_limits<std::uint64_t>::max();
    }
  }
  return product;
}

namespace {

// The three streams of fairscale FSDP that matter to memory. fairscale also has an
// `fp32_to_fp16` stream for the `_fp16_shard` cast; the cast runs inside `_rebuild_full_params`
// under the all-gather stream's ordering, so it is put on `all_gather` here.
constexpr StreamId kDefaultStream = 0;
constexpr StreamId kAllGatherStream = 1;
constexpr StreamId kPostBackwardStream = 2;

constexpr Bytes kFp32Size = 4;

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

// Every allocation the trace makes is a parameter-sized tensor (at most numel x 4 bytes, the
// fp32 grad copy) or an activation; none may exceed what a trace reader accepts.
Status ValidateSizes(const FsdpModel& model) {
  for (const GenInstance& instance : model.instances) {
    for (const GenParam& param : instance.params) {
      if (param.numel == 0) {
        // fairscale asserts on zero-size reduce-scatter inputs (reference §9).
        return InvalidArgument(fmt::format("'{}.{}' has no elements", instance.name, param.name));
      }
      if (SaturatingProduct({param.numel, kFp32Size}) > kMaxSaneBytes) {
        return InvalidArgument(
            fmt::format("'{}' would need an allocation of more than 1 PiB: the model is too large",
                        instance.name));
      }
    }
  }
  for (const ForwardOp& op : model.forward) {
    for (Bytes bytes : op.activations) {
      if (bytes > kMaxSaneBytes) {
        return InvalidArgument(fmt::format(
            "'{}' would need an activation of more than 1 PiB: a model dimension (seq, hidden, "
            "heads, micro-batch, vocab, image size) is too large",
            op.name));
      }
    }
  }
  return Status::Ok();
}

Status BuildHeader(const FsdpModel& model, const GenOptions& options, TraceHeader& header) {
  header.world_size = options.world_size;
  header.rank = options.rank;
  header.bucket_cap_mb = options.bucket_cap_mb;
  header.description = model.description;
  header.streams = {{"default"}, {"all_gather"}, {"post_backward"}};

  const std::vector<int> ranks = options.ShardGroupRanks();
  switch (options.group_layout) {
    case GroupLayout::kShared:
      // get_process_group_cached(ProcessGroupName.reduce_scatter): one object for all.
      header.groups.push_back({1, ranks, "reduce_scatter"});
      break;
    case GroupLayout::kPerInstance:
      // dist.new_group() inside each FSDP constructor: same members, distinct objects.
      for (std::size_t f = 0; f < model.instances.size(); ++f) {
        header.groups.push_back({f + 1, ranks, model.instances[f].name + ".process_group"});
      }
      break;
    case GroupLayout::kHsdp:
      // HYBRID_SHARD: the shard group is made once and shared by every instance.
      header.groups.push_back({1, ranks, "shard_group"});
      break;
  }
  for (const GenInstance& instance : model.instances) {
    FsdpInstance& fsdp = header.fsdp.emplace_back();
    fsdp.name = instance.name;
    for (const GenParam& param : instance.params) {
      fsdp.params.push_back({param.name, param.numel, DType::kFloat32});
    }
  }
  return header.Finalize();
}

// Emits the events of the whole run, in order, with allocation ids from 1.
class FsdpTrace {
 public:
  FsdpTrace(const FsdpModel& model, const GenOptions& options, TraceHeader& header, EventSink& sink)
      : model_(model),
        options_(options),
        header_(header),
        sink_(sink),
        shard_group_size_(static_cast<Numel>(options.ShardGroupRanks().size())),
        full_param_ids_(model.instances.size()),
        grad_ids_(model.instances.size()),
        activation_ids_(model.forward.size()) {}

  Status Run() {
    // Model construction: each rank keeps its fp32 shard of every parameter for the whole run.
    for (const GenInstance& instance : model_.instances) {
      for (const GenParam& param : instance.params) {
        std::uint64_t id = 0;
        BUCKETSIM_RETURN_IF_ERROR(
            Alloc(ShardNumel(param) * kFp32Size, kDefaultStream, Category::kParam, id));
      }
    }
    for (Bytes bytes : model_.inputs) {
      std::uint64_t id = 0;
      BUCKETSIM_RETURN_IF_ERROR(Alloc(bytes, kDefaultStream, Category::kActivation, id));
    }
    for (int i = 0; i < options_.iterations; ++i) BUCKETSIM_RETURN_IF_ERROR(Iteration(i));
    return Status::Ok();
  }

 private:
  Status Iteration(int iteration) {
    BUCKETSIM_RETURN_IF_ERROR(Emit(IterationEvent(static_cast<std::uint64_t>(iteration))));

    BUCKETSIM_RETURN_IF_ERROR(EnterPhase(Phase::kForward));
    bool in_checkpoint = false;
    for (std::size_t i = 0; i < model_.forward.size(); ++i) {
      BUCKETSIM_RETURN_IF_ERROR(Forward(i, in_checkpoint));
    }
    BUCKETSIM_RETURN_IF_ERROR(Mark("after fwd"));

    BUCKETSIM_RETURN_IF_ERROR(EnterPhase(Phase::kBackward));
    for (std::size_t i = model_.forward.size(); i-- > 0;) BUCKETSIM_RETURN_IF_ERROR(Backward(i));
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

  // §2.3: gather, run, keep activations, reshard. Inside a checkpointed region the modules run
  // under no_grad: each run's activations die before the next run starts.
  Status Forward(std::size_t i, bool& in_checkpoint) {
    const ForwardOp& op = model_.forward[i];
    switch (op.kind) {
      case OpKind::kGather:
        return AllGather(op.instance);
      case OpKind::kRun: {
        BUCKETSIM_RETURN_IF_ERROR(Compute("forward " + op.name, op.flops));
        if (!in_checkpoint) return AllocActivations(op, activation_ids_[i]);
        std::vector<std::uint64_t> transient;
        BUCKETSIM_RETURN_IF_ERROR(AllocActivations(op, transient));
        return FreeActivations(transient);
      }
      case OpKind::kCheckpointBegin:
        in_checkpoint = true;
        return AllocActivations(op, activation_ids_[i]);
      case OpKind::kCheckpointEnd:
        in_checkpoint = false;
        return Status::Ok();
      case OpKind::kEndForward:
        return ReshardsAfterForward(op.instance) ? FreeFullParams(op.instance) : Status::Ok();
    }
    return Status::Ok();
  }

  // §2.4, the forward program in reverse: the end of an instance's forward becomes its
  // pre-backward hook (re-gather), a run its backward, the beginning of its forward its
  // post-backward hook. A checkpointed region's backward first reruns its forward (with the
  // parameters gathered), which brings its activations back for the backward proper.
  Status Backward(std::size_t i) {
    const ForwardOp& op = model_.forward[i];
    switch (op.kind) {
      case OpKind::kEndForward:
        return AllGather(op.instance);
      case OpKind::kCheckpointEnd:
        return Recompute(i);
      case OpKind::kRun: {
        BUCKETSIM_RETURN_IF_ERROR(Compute("backward " + op.name, 2 * op.flops));
        for (std::size_t f : op.uses) BUCKETSIM_RETURN_IF_ERROR(AllocFullGrads(f));
        return FreeActivations(activation_ids_[i]);
      }
      case OpKind::kCheckpointBegin:
        return FreeActivations(activation_ids_[i]);
      case OpKind::kGather:
        return PostBackwardHook(op.instance);
    }
    return Status::Ok();
  }

  // The region that ends at `end` rerun forward, its activations kept this time.
  Status Recompute(std::size_t end) {
    std::size_t begin = end;
    while (model_.forward[begin].kind != OpKind::kCheckpointBegin) {
      BUCKETSIM_CHECK(begin > 0);
      --begin;
    }
    for (std::size_t i = begin + 1; i < end; ++i) {
      const ForwardOp& op = model_.forward[i];
      if (op.kind == OpKind::kRun) {
        BUCKETSIM_RETURN_IF_ERROR(Compute("recompute " + op.name, op.flops));
        BUCKETSIM_RETURN_IF_ERROR(AllocActivations(op, activation_ids_[i]));
      } else if (op.kind == OpKind::kGather) {
        BUCKETSIM_RETURN_IF_ERROR(AllGather(op.instance));
      } else if (op.kind == OpKind::kEndForward && ReshardsAfterForward(op.instance)) {
        BUCKETSIM_RETURN_IF_ERROR(FreeFullParams(op.instance));
      }
    }
    return Status::Ok();
  }

  // Autograd computes the full gradient of an instance's parameters (numel x compute size, in
  // the default stream) in the backward of the first op, in backward order, that uses them.
  Status AllocFullGrads(std::size_t f) {
    std::vector<std::uint64_t>& grads = grad_ids_[f];
    if (!grads.empty()) return Status::Ok();
    for (const GenParam& param : model_.instances[f].params) {
      std::uint64_t id = 0;
      BUCKETSIM_RETURN_IF_ERROR(
          Alloc(param.numel * ComputeSize(f), kDefaultStream, Category::kGrad, id));
      grads.push_back(id);
    }
    return Status::Ok();
  }

  // Per parameter (fairscale registers one hook per parameter): free its gathered copy, reduce
  // its gradient, then the full gradient dies when the hook returns. HEAD (#784) sets
  // param.grad = None before the reduce is queued, whether it is bucketed or bypassed.
  Status PostBackwardHook(std::size_t f) {
    const std::vector<GenParam>& params = model_.instances[f].params;
    if (params.empty()) return Status::Ok();
    BUCKETSIM_CHECK(grad_ids_[f].size() == params.size());
    for (std::size_t p = 0; p < params.size(); ++p) {
      BUCKETSIM_RETURN_IF_ERROR(Free(std::exchange(full_param_ids_[f][p], 0)));
      BUCKETSIM_RETURN_IF_ERROR(ReduceScatter(f, p));
      BUCKETSIM_RETURN_IF_ERROR(Free(grad_ids_[f][p]));
    }
    full_param_ids_[f].clear();
    grad_ids_[f].clear();
    return Status::Ok();
  }

  // The activations `op` creates, in order, their ids appended to `ids`.
  Status AllocActivations(const ForwardOp& op, std::vector<std::uint64_t>& ids) {
    for (Bytes bytes : op.activations) {
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
  Status ReduceScatter(std::size_t f, std::size_t p) {
    const GenParam& param = model_.instances[f].params[p];
    const Numel shard_numel = ShardNumel(param);
    const DType reduce_dtype = ReduceDType(f);
    std::uint64_t fp32_copy = 0;
    // Mixed precision with fp32 reduction: the hook copies the gradient to fp32 first.
    if (MixedPrecision(f) && reduce_dtype == DType::kFloat32) {
      BUCKETSIM_RETURN_IF_ERROR(
          Alloc(param.numel * kFp32Size, kPostBackwardStream, Category::kGrad, fp32_copy));
    }
    // chunk_and_pad: ws chunks of s elements are views of the gradient, except a short last
    // chunk (padded into a new tensor) and missing chunks (new zero tensors).
    const Numel new_chunks = shard_group_size_ - param.numel / shard_numel;
    std::uint64_t padding = 0;
    if (new_chunks > 0) {
      BUCKETSIM_RETURN_IF_ERROR(Alloc(new_chunks * shard_numel * ElementSize(reduce_dtype),
                                      kPostBackwardStream, Category::kGrad, padding));
    }

    // A reduced fp32 shard is kept as the gradient (a view); a 16-bit one is cast to the fp32
    // parameter dtype in the post-reduction hook (§2.4).
    const bool reduced_in_fp32 = reduce_dtype == DType::kFloat32;
    BUCKETSIM_RETURN_IF_ERROR(Emit(ReduceScatterEvent(
        static_cast<std::uint32_t>(f), static_cast<std::uint32_t>(p), GroupOf(f), reduce_dtype,
        shard_numel, reduced_in_fp32 ? ShardMode::kView : ShardMode::kCast, DType::kFloat32)));

    if (padding != 0) BUCKETSIM_RETURN_IF_ERROR(Free(padding));
    if (fp32_copy != 0) BUCKETSIM_RETURN_IF_ERROR(Free(fp32_copy));
    return Status::Ok();
  }

  // _rebuild_full_params, idempotent: with mixed precision the fp32 shard is cast into
  // `_fp16_shard` first, which is freed right after the all-gather that reads it.
  Status AllGather(std::size_t f) {
    const std::vector<GenParam>& params = model_.instances[f].params;
    if (!full_param_ids_[f].empty()) return Status::Ok();
    for (const GenParam& param : params) {
      const Numel shard_numel = ShardNumel(param);
      std::uint64_t cast_shard = 0;
      if (MixedPrecision(f)) {
        BUCKETSIM_RETURN_IF_ERROR(Alloc(shard_numel * ComputeSize(f), kAllGatherStream,
                                        Category::kAllGather, cast_shard));
      }
      std::uint64_t full = 0;
      BUCKETSIM_RETURN_IF_ERROR(Alloc(shard_group_size_ * shard_numel * ComputeSize(f),
                                      kAllGatherStream, Category::kAllGather, full));
      full_param_ids_[f].push_back(full);
      if (cast_shard != 0) BUCKETSIM_RETURN_IF_ERROR(Free(cast_shard));
    }
    return Status::Ok();
  }

  Status FreeFullParams(std::size_t f) {
    for (std::uint64_t id : full_param_ids_[f]) BUCKETSIM_RETURN_IF_ERROR(Free(id));
    full_param_ids_[f].clear();
    return Status::Ok();
  }

  bool ReshardsAfterForward(std::size_t f) const {
    return options_.reshard_after_forward && model_.instances[f].reshard_after_forward;
  }

  // An instance computes in the compute dtype unless it was wrapped with
  // mixed_precision=False, or the compute dtype is fp32 anyway.
  bool MixedPrecision(std::size_t f) const {
    return model_.instances[f].mixed_precision && options_.compute_dtype != DType::kFloat32;
  }
  Bytes ComputeSize(std::size_t f) const {
    return MixedPrecision(f) ? ElementSize(options_.compute_dtype) : kFp32Size;
  }
  DType ReduceDType(std::size_t f) const {
    return MixedPrecision(f) ? options_.ReduceDType() : DType::kFloat32;
  }

  Numel ShardNumel(const GenParam& param) const {
    return PaddedShardNumel(param.numel, shard_group_size_);
  }

  GroupId GroupOf(std::size_t f) const {
    return options_.group_layout == GroupLayout::kPerInstance ? static_cast<GroupId>(f) + 1 : 1;
  }

  // Created lazily by the first optimizer.step() and kept for the rest of the run; one fp32
  // tensor of s elements per state buffer and parameter (Adam: exp_avg and exp_avg_sq).
  Status AllocOptimizerState() {
    const int tensors = OptimizerStateTensors(options_.optimizer);
    for (const GenInstance& instance : model_.instances) {
      for (const GenParam& param : instance.params) {
        for (int t = 0; t < tensors; ++t) {
          std::uint64_t id = 0;
          BUCKETSIM_RETURN_IF_ERROR(
              Alloc(ShardNumel(param) * kFp32Size, kDefaultStream, Category::kOptimizerState, id));
        }
      }
    }
    return Status::Ok();
  }

  double StepFlops() const {
    Numel shard_numel = 0;
    for (const GenInstance& instance : model_.instances) {
      for (const GenParam& param : instance.params) shard_numel += ShardNumel(param);
    }
    return StepFlopsPerElement(options_.optimizer) * static_cast<double>(shard_numel);
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
        ComputeEvent(kDefaultStream, flops / (options_.device_tflops * 1e6), header_.Intern(name)));
  }

  Status Mark(std::string_view name) { return Emit(MarkEvent(header_.Intern(name))); }

  const FsdpModel& model_;
  const GenOptions& options_;
  TraceHeader& header_;
  EventSink& sink_;
  const Numel shard_group_size_;
  EventIndex next_index_ = 0;
  std::uint64_t next_alloc_id_ = 1;
  std::vector<std::vector<std::uint64_t>> full_param_ids_;  // per instance; empty: resharded
  std::vector<std::vector<std::uint64_t>> grad_ids_;  // per instance, while backward holds them
  std::vector<std::vector<std::uint64_t>> activation_ids_;  // per forward op
};

}  // namespace

Status EmitFsdpTrace(const FsdpModel& model, const GenOptions& options, EventSink& sink) {
  BUCKETSIM_RETURN_IF_ERROR(ValidateGenOptions(options));
  BUCKETSIM_RETURN_IF_ERROR(ValidateSizes(model));
  // Sinks keep a pointer to the header and names are interned while events stream, so it
  // lives here until OnEnd has returned.
  TraceHeader header;
  BUCKETSIM_RETURN_IF_ERROR(BuildHeader(model, options, header));
  BUCKETSIM_RETURN_IF_ERROR(sink.OnHeader(header));
  BUCKETSIM_RETURN_IF_ERROR(FsdpTrace(model, options, header, sink).Run());
  return sink.OnEnd();
}

}  // namespace bucketsim
