#include "gen/torch_fsdp1.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "gen/model_program.h"
#include "gen/optimizer_step.h"
#include "policy/shard_size.h"

// Every rule below cites the torch 2.6 source it follows, in torch/distributed/fsdp/:
// _runtime_utils.py (rt), _flat_param.py (fp), _exec_order_utils.py (eo), _init_utils.py (iu),
// _limiter_utils.py (lu).
namespace bucketsim {
namespace {

// iu _init_streams: the default (computation) stream, the unshard stream (all-gathers), the
// post-backward stream (reduce-scatters), the pre-unshard stream (the `_mp_shard` cast) and,
// for HYBRID_SHARD only, the all-reduce stream (otherwise the default stream itself).
constexpr StreamId kUnshardStream = 1;
constexpr StreamId kPostBackwardStream = 2;
constexpr StreamId kPreUnshardStream = 3;

constexpr GroupId kShardGroup = 1;
constexpr GroupId kReplicateGroup = 2;

// What FSDP1 keeps of one unit (one FlatParamHandle) at a time.
struct Unit {
  // fp _init_flat_param_and_metadata: the FlatParameter's numel, its padding included.
  Numel flat_numel = 0;
  // fp _get_shard: each rank's padded shard, ceil(flat_numel / world size).
  Numel shard_numel = 0;
  // The padded unsharded flat parameter (`_full_param_padded`), or for NO_SHARD with mixed
  // precision the low-precision `_mp_shard` computed with; 0 when not allocated.
  std::uint64_t unsharded = 0;
  bool prefetched = false;                  // handle._prefetched
  bool needs_pre_forward_unshard = false;   // handle._needs_pre_forward_unshard
  bool needs_pre_backward_unshard = false;  // handle._needs_pre_backward_unshard
  bool ran_pre_backward_hook = false;       // handle._ran_pre_backward_hook
  std::optional<std::size_t> pre_forward_index, post_forward_index;
  std::uint64_t kept_grad = 0;  // NO_SHARD: flat_param.grad, until zero_grad
  bool holds_grad = false;      // .grad is set (a reduced shard the policy holds, or kept_grad)
};

class TorchFsdp1 final : public FsdpImplementation {
 public:
  TorchFsdp1(const ModelProgram& model, const GenOptions& options, TraceEmitter& trace)
      : model_(model),
        options_(options),
        trace_(trace),
        shard_ranks_(options.ShardGroupRanks()),
        strategy_(EffectiveStrategy(options, static_cast<int>(shard_ranks_.size()))),
        units_(model.units.size()) {
    for (std::size_t f = 0; f < units_.size(); ++f) {
      units_[f].flat_numel = FlatNumel(f);
      units_[f].shard_numel = Sharded() ? PaddedShardNumel(units_[f].flat_numel, ShardGroupSize())
                                        : units_[f].flat_numel;
    }
    // The root is the outermost FSDP instance: its forward begins first.
    for (const ForwardOp& op : model.forward) {
      if (op.kind == OpKind::kGather) {
        root_ = op.instance;
        break;
      }
    }
  }

  Status BuildHeader(TraceHeader& header) const override {
    header.streams = {{"default"}, {"unshard"}, {"post_backward"}, {"pre_unshard"}};
    // One process group object for every unit (the wrapping policy passes the root's group
    // down, iu _init_process_group_state); HYBRID_SHARD makes its shard and replicate groups
    // once (iu _init_process_group_state_for_hybrid_shard) and all-reduces on its own stream.
    header.groups.push_back({kShardGroup, shard_ranks_, "process_group"});
    if (strategy_ == ShardingStrategy::kHybridShard) {
      header.streams.push_back({"all_reduce"});
      header.groups.back().name = "shard_group";
      header.groups.push_back({kReplicateGroup, options_.ReplicaRanks(), "inter_node_pg"});
      header.replicate_group = kReplicateGroup;
    }
    // The all-gathers and NO_SHARD's all-reduce are events (trace format 5).
    header.schema_version = kCollectivesSchemaVersion;
    // One FlatParameter per unit; the reduce-scatter requests name it as param 0.
    for (std::size_t f = 0; f < model_.units.size(); ++f) {
      UnitInfo& fsdp = header.units.emplace_back();
      fsdp.name = model_.units[f].name;
      if (units_[f].flat_numel > 0) {
        fsdp.params.push_back({"_flat_param", units_[f].flat_numel, DType::kFloat32});
      }
    }
    return Status::Ok();
  }

  // fp FlatParamHandle.shard: each rank keeps its padded fp32 shard (`_local_shard`); NO_SHARD
  // keeps the whole flat parameter. (The constructor's unsharded copy is the model's own,
  // freed by shard() before the trace begins.) With CPUOffload(offload_params=True) the shard
  // is moved to the CPU (iu _init_param_handle_from_params: flat_param_to("cpu")) and pinned
  // there with the CPU gradient `_cpu_grad` (fp init_flat_param_attributes): nothing on the
  // device.
  Status Init() override {
    if (options_.offload_params) return Status::Ok();
    for (const Unit& unit : units_) {
      if (unit.flat_numel == 0) continue;
      std::uint64_t id = 0;
      BUCKETSIM_RETURN_IF_ERROR(
          trace_.Alloc(unit.shard_numel * kFp32Size, kDefaultStream, Category::kParam, id));
    }
    return Status::Ok();
  }

  Status PreForward(std::size_t f, Pass pass) override {
    // rt _pre_forward: in a checkpointed region's recomputation the unit is already in
    // BACKWARD_PRE (its output's pre-backward hook ran before backward reached the region,
    // which torch.utils.checkpoint (use_reentrant=False) recomputes when backward unpacks a
    // saved tensor), so the hook returns at once. The emitter recomputes before calling
    // PreBackward: run the pre-backward hook here, where the real one has already run.
    if (pass == Pass::kRecompute) return PreBackward(f);
    Unit& unit = units_[f];
    if (unit.flat_numel == 0) return Status::Ok();
    // eo record_pre_forward: the order is recorded in the first iteration only.
    if (iteration_ == 0 && !unit.pre_forward_index) {
      unit.pre_forward_index = pre_forward_order_.size();
      pre_forward_order_.push_back(f);
    }
    // rt _pre_forward_unshard: unshard unless prefetched, then forward-prefetch.
    if (!unit.prefetched) BUCKETSIM_RETURN_IF_ERROR(Unshard(f));
    unit.needs_pre_forward_unshard = false;
    return Prefetch(HandleToForwardPrefetch(f));
  }

  Status PostForward(std::size_t f, Pass pass) override {
    // rt _post_forward: skipped in a recomputation (BACKWARD_PRE).
    if (pass == Pass::kRecompute) return Status::Ok();
    Unit& unit = units_[f];
    if (unit.flat_numel == 0) return Status::Ok();
    // eo record_post_forward: every iteration, reset by next_iter.
    if (!unit.post_forward_index) unit.post_forward_index = post_forward_order_.size();
    post_forward_order_.push_back(f);
    // rt _post_forward_reshard: free unless the root or a strategy that keeps the parameters
    // (RESHARD_AFTER_FORWARD_HANDLE_STRATEGIES: FULL_SHARD, HYBRID_SHARD).
    const bool free = f != root_ && (strategy_ == ShardingStrategy::kFullShard ||
                                     strategy_ == ShardingStrategy::kHybridShard);
    BUCKETSIM_RETURN_IF_ERROR(Reshard(f, free));
    // rt _register_pre_backward_hooks: the output requires grad.
    unit.needs_pre_backward_unshard = true;
    unit.ran_pre_backward_hook = false;
    return Status::Ok();
  }

  // rt _pre_backward_hook: once per unit and backward; unshard unless prefetched, then
  // BACKWARD_PRE prefetch, then prepare_gradient_for_backward (flat_param.grad is None after
  // zero_grad(set_to_none=True): nothing to move).
  Status PreBackward(std::size_t f) override {
    Unit& unit = units_[f];
    if (unit.flat_numel == 0 || unit.ran_pre_backward_hook) return Status::Ok();
    if (unit.needs_pre_backward_unshard && !unit.prefetched) {
      BUCKETSIM_RETURN_IF_ERROR(Unshard(f));
    }
    unit.needs_pre_backward_unshard = false;
    if (BackwardPrefetchOf(f) == BackwardPrefetch::kPre) {
      BUCKETSIM_RETURN_IF_ERROR(Prefetch(HandleToBackwardPrefetch(f)));
    }
    unit.ran_pre_backward_hook = true;
    return Status::Ok();
  }

  // rt _post_backward_hook, run by the flat parameter's AccumulateGrad once its flat gradient
  // (its views' gradients concatenated, padding included) is flat_param.grad.
  Status PostBackward(std::size_t f) override {
    Unit& unit = units_[f];
    if (unit.flat_numel == 0) return Status::Ok();
    std::uint64_t grad = 0;
    BUCKETSIM_RETURN_IF_ERROR(FlatGrad(f, grad));
    // rt _post_backward_reshard: free (_should_free_in_backward: every sharded strategy when
    // gradients are synchronised), then BACKWARD_POST prefetch.
    BUCKETSIM_RETURN_IF_ERROR(Reshard(f, Sharded()));
    if (BackwardPrefetchOf(f) == BackwardPrefetch::kPost) {
      BUCKETSIM_RETURN_IF_ERROR(Prefetch(HandleToBackwardPrefetch(f)));
    }
    // rt _post_backward_hook: flat_param.grad.data = grad.to(reduce_dtype) when they differ;
    // autograd_computed_grad keeps the original alive until the hook returns.
    const Numel grad_numel = GradNumel(f);
    std::uint64_t reduce_copy = 0;
    if (ReduceDType(f) != ComputeDType(f)) {
      BUCKETSIM_RETURN_IF_ERROR(trace_.Alloc(grad_numel * ElementSize(ReduceDType(f)),
                                             kPostBackwardStream, Category::kGrad, reduce_copy));
    }
    if (Sharded()) {
      BUCKETSIM_RETURN_IF_ERROR(ReduceGrad(f, grad_numel));
      BUCKETSIM_RETURN_IF_ERROR(OffloadGrad(units_[f].shard_numel));
      if (reduce_copy != 0) BUCKETSIM_RETURN_IF_ERROR(trace_.Free(reduce_copy));
      return trace_.Free(grad);
    }
    BUCKETSIM_RETURN_IF_ERROR(ReduceGradNoShard(f, grad, reduce_copy));
    return OffloadGrad(grad_numel);
  }

  // rt _offload_grad: the fp32 reduced shard copied into `_cpu_grad` on the post-backward
  // stream, after its reduction (a span where host copies are priced; no device memory).
  Status OffloadGrad(Numel numel) {
    if (!options_.offload_params) return Status::Ok();
    return trace_.HostCopy("offload grad to host", numel * kFp32Size, kPostBackwardStream);
  }

  // rt _post_backward_final_callback: _catch_all_reshard frees what a post-backward hook did
  // not (a unit gathered for backward whose gradient never came), _finalize_params moves the
  // saved shards to .grad (fp prepare_gradient_for_optim: no allocation); the policy's end of
  // backward. With CPU offload .grad becomes the CPU `_cpu_grad` the post-backward hooks copied
  // into (rt _offload_grad), and what the device held until now goes: each `_saved_grad_shard`
  // (deleted by prepare_gradient_for_optim; the policy's, so a zero_grad event) and NO_SHARD's
  // device gradient, which .grad no longer refers to.
  Status EndBackward() override {
    for (std::size_t f = 0; f < units_.size(); ++f) {
      BUCKETSIM_RETURN_IF_ERROR(Reshard(f, Sharded()));
      Unit& unit = units_[f];
      unit.ran_pre_backward_hook = false;
      unit.needs_pre_backward_unshard = false;
      unit.post_forward_index.reset();
      unit.prefetched = false;
    }
    post_forward_order_.clear();  // eo next_iter
    BUCKETSIM_RETURN_IF_ERROR(trace_.Emit(FlushEvent()));
    return options_.offload_params ? ReleaseGrads() : Status::Ok();
  }

  // Offloaded, the optimizer holds CPU parameters with CPU gradients: its step and state are on
  // the CPU, nothing of them on the device.
  Status Step(int iteration) override {
    iteration_ = iteration + 1;
    std::vector<Numel> params;
    for (std::size_t f = 0; f < units_.size(); ++f) {
      for (Numel numel : OptimizerStateNumels(f)) params.push_back(numel);
    }
    if (options_.offload_params) return EmitHostOptimizerStep(options_, params, trace_);
    return EmitOptimizerStep(options_, params, iteration, trace_);
  }

  // optimizer.zero_grad(set_to_none=True): with use_orig_params=False the optimizer holds the
  // FlatParameter, whose .grad (the reduced shard, or NO_SHARD's gradient) goes now. With
  // use_orig_params=True it holds the original parameters: their .grad views go, but
  // flat_param.grad keeps the shard until the next root pre-forward
  // (rt _root_pre_forward -> fp _reset_flat_param_grad_info_if_needed). Offloaded, .grad is on
  // the CPU: the device holds nothing since the end of backward.
  Status ZeroGrad() override {
    if (options_.fsdp1.use_orig_params || options_.offload_params) return Status::Ok();
    return ReleaseGrads();
  }

  Bytes ComputeSize(std::size_t f) const override { return ElementSize(ComputeDType(f)); }

  // fp _get_unflat_views_aligned: the views are split off the flat parameter with its padding
  // (_numels_with_padding), so the flat gradient autograd makes includes it (zeros).
  Numel GradPadding(std::size_t f, std::size_t /*p*/) const override {
    const std::vector<GenParam>& params = model_.units[f].params;
    if (params.size() != 1) return 0;  // several parameters: FlatGrad concatenates them
    return units_[f].flat_numel - params.front().numel;
  }

 private:
  // iu _init_core_state: one rank (of the shard group) is NO_SHARD whatever was asked.
  static ShardingStrategy EffectiveStrategy(const GenOptions& options, int shard_group_size) {
    return shard_group_size == 1 ? ShardingStrategy::kNoShard : options.fsdp1.sharding_strategy;
  }
  bool Sharded() const { return strategy_ != ShardingStrategy::kNoShard; }
  // rt _get_handle_to_prefetch: the backward_prefetch of the state whose hook runs, the unit's
  // own where a recorded model gave it one.
  BackwardPrefetch BackwardPrefetchOf(std::size_t f) const {
    return model_.units[f].settings.backward_prefetch.value_or(options_.fsdp1.backward_prefetch);
  }
  Numel ShardGroupSize() const { return static_cast<Numel>(shard_ranks_.size()); }

  // The unit's parameters in order as the views of one FlatParameter.
  std::vector<Numel> OrigNumels(std::size_t f) const {
    std::vector<Numel> numels;
    for (const GenParam& param : model_.units[f].params) {
      if (param.views.empty()) {
        numels.push_back(param.numel);
      } else {
        for (const ParamView& view : param.views) numels.push_back(view.numel);
      }
    }
    return numels;
  }

  // fp _init_flat_param_and_metadata with use_orig_params (align_addresses): padding before
  // each parameter to a multiple of 16 bytes in the compute dtype (_get_aligned_numel), then
  // to a multiple of the world size. Without use_orig_params no padding: the shards are padded
  // instead (fp _get_shard). Returns each parameter's offset in the flat parameter.
  std::vector<Numel> FlatOffsets(std::size_t f, Numel& total) const {
    const std::vector<Numel> numels = OrigNumels(f);
    std::vector<Numel> offsets;
    total = 0;
    const Numel aligned = options_.fsdp1.use_orig_params ? 16 / ComputeSize(f) : 0;
    for (Numel numel : numels) {
      if (aligned > 0 && total % aligned != 0) total += aligned - total % aligned;
      offsets.push_back(total);
      total += numel;
    }
    if (aligned > 0 && total > 0 && total % ShardGroupSize() != 0) {
      total += ShardGroupSize() - total % ShardGroupSize();
    }
    return offsets;
  }
  Numel FlatNumel(std::size_t f) const {
    Numel total = 0;
    FlatOffsets(f, total);
    return total;
  }

  DType ComputeDType(std::size_t f) const {
    return model_.units[f].mixed_precision ? options_.compute_dtype : DType::kFloat32;
  }
  // fp _init_param_reduce_dtypes: reduce_dtype, else the param dtype.
  DType ReduceDType(std::size_t f) const {
    return model_.units[f].mixed_precision ? options_.ReduceDType() : DType::kFloat32;
  }
  bool ParamMixedPrecision(std::size_t f) const { return ComputeDType(f) != DType::kFloat32; }

  // The flat gradient as autograd hands it over: its numel (fp: flat_param.data is the
  // unpadded unsharded flat parameter, [:_unpadded_unsharded_size]).
  Numel GradNumel(std::size_t f) const { return units_[f].flat_numel; }
  Status FlatGrad(std::size_t f, std::uint64_t& grad) {
    const std::size_t params = model_.units[f].params.size();
    if (params == 1) return trace_.TakeParamGrad(f, 0, grad);
    // Several parameters of the program in one FlatParameter: their gradients reach the
    // split's backward, which concatenates them.
    std::vector<std::uint64_t> grads(params);
    for (std::size_t p = 0; p < params; ++p) {
      BUCKETSIM_RETURN_IF_ERROR(trace_.TakeParamGrad(f, p, grads[p]));
    }
    BUCKETSIM_RETURN_IF_ERROR(
        trace_.Alloc(GradNumel(f) * ComputeSize(f), kDefaultStream, Category::kGrad, grad));
    for (std::uint64_t id : grads) BUCKETSIM_RETURN_IF_ERROR(trace_.Free(id));
    return Status::Ok();
  }

  // rt _root_pre_forward: the first one runs _lazy_init; with forward_prefetch every handle
  // needs its pre-forward unshard again; _reset_flat_param_grad_info_if_needed drops the
  // shards use_orig_params kept. Before the root's input cast (_root_cast_forward_input, at its
  // end) and its unshard.
  Status ForwardBegins() override {
    if (!lazy_initialized_) BUCKETSIM_RETURN_IF_ERROR(LazyInit());
    lazy_initialized_ = true;
    if (options_.fsdp1.forward_prefetch) {
      for (Unit& unit : units_) {
        unit.needs_pre_forward_unshard = true;
        unit.prefetched = false;
      }
    }
    const bool held =
        std::any_of(units_.begin(), units_.end(), [](const Unit& unit) { return unit.holds_grad; });
    return options_.fsdp1.use_orig_params && held ? ReleaseGrads() : Status::Ok();
  }

  // rt _lazy_init -> fp init_flat_param_attributes, per handle in order: `_mp_shard` (mixed
  // precision), `_full_param_padded` (sharded) and `_full_prec_full_param_padded` (both) are
  // made with torch.empty and their storage freed at once (_free_storage): each a transient
  // allocation of its full size.
  Status LazyInit() {
    for (std::size_t f = 0; f < units_.size(); ++f) {
      const Unit& unit = units_[f];
      if (unit.flat_numel == 0) continue;
      const bool mp = ParamMixedPrecision(f);
      const Numel padded = ShardGroupSize() * unit.shard_numel;
      if (mp) BUCKETSIM_RETURN_IF_ERROR(Transient(unit.shard_numel * ComputeSize(f)));
      if (Sharded()) BUCKETSIM_RETURN_IF_ERROR(Transient(padded * ComputeSize(f)));
      if (Sharded() && mp) BUCKETSIM_RETURN_IF_ERROR(Transient(padded * kFp32Size));
    }
    return Status::Ok();
  }
  Status Transient(Bytes bytes) {
    std::uint64_t id = 0;
    BUCKETSIM_RETURN_IF_ERROR(trace_.Alloc(bytes, kDefaultStream, Category::kAllGather, id));
    return trace_.Free(id);
  }

  // rt _unshard: fp pre_unshard, the rate limiter, fp unshard (_alloc_padded_unsharded_flat_param:
  // ws x shard in the compute dtype, the all-gather's destination; a no-op when still
  // allocated, needs_unshard) and fp post_unshard (frees `_mp_shard` for sharded strategies).
  // NO_SHARD computes with the flat parameter itself, or with what pre_unshard made, freed by
  // the reshard (fp post_reshard, _use_sharded_flat_param).
  //
  // fp pre_unshard gives the device the shard to gather from (or, NO_SHARD, to compute with)
  // when it is not the fp32 `_local_shard` on the device: with mixed precision `_mp_shard`
  // (_use_low_precision_shard), with CPU offload alone a device copy of the CPU shard
  // (flat_param_to(device)), dropped when .data moves to the unsharded parameter. A sharded
  // unit whose unsharded parameter is still allocated (the root, SHARD_GRAD_OP) skips it, unless
  // offloaded: its reshard pointed .data at the CPU shard, so the copy is made and dropped.
  //
  // limit_all_gathers (lu _FreeEventQueue, rt _unshard/_reshard): before an all-gather, once
  // two frees are queued, the CPU waits for the oldest free's event on the device. It bounds
  // how far the CPU runs ahead of the GPU, not the order of allocations and frees the program
  // makes (CUDA's caching allocator counts a free when the CPU makes it), so it changes nothing
  // in a trace; on CPU the event is immediate.
  Status Unshard(std::size_t f) {
    Unit& unit = units_[f];
    if (unit.flat_numel == 0) return Status::Ok();
    const bool gathered = unit.unsharded != 0;
    if (gathered && !(Sharded() && options_.offload_params)) return Status::Ok();
    std::uint64_t device_shard = 0;
    if (ParamMixedPrecision(f)) {
      BUCKETSIM_RETURN_IF_ERROR(LowPrecisionShard(f, device_shard));
    } else if (options_.offload_params) {
      BUCKETSIM_RETURN_IF_ERROR(trace_.Alloc(unit.shard_numel * kFp32Size, kPreUnshardStream,
                                             Category::kAllGather, device_shard));
    }
    // flat_param_to(device) of the CPU shard, on the pre-unshard stream; priced on the unshard
    // stream, whose all-gather waits for it (one stream of the sim's serves both).
    if (options_.offload_params) {
      BUCKETSIM_RETURN_IF_ERROR(trace_.HostCopy("offload param to device",
                                                unit.shard_numel * kFp32Size,
                                                Sharded() ? kUnshardStream : kDefaultStream));
    }
    if (!Sharded()) {
      unit.unsharded = device_shard;
      return Status::Ok();
    }
    if (!gathered) {
      BUCKETSIM_RETURN_IF_ERROR(trace_.Alloc(ShardGroupSize() * unit.shard_numel * ComputeSize(f),
                                             kUnshardStream, Category::kAllGather, unit.unsharded));
      // fp _all_gather_flat_param: all_gather_into_tensor of the (mixed-precision) shard into
      // it, over the shard group, on the unshard stream.
      BUCKETSIM_RETURN_IF_ERROR(
          trace_.Emit(TraceCollectiveEvent(EventKind::kAllGather, unit.unsharded, kUnshardStream,
                                           kShardGroup, ComputeDType(f), unit.shard_numel)));
    }
    if (device_shard != 0) BUCKETSIM_RETURN_IF_ERROR(trace_.Free(device_shard));
    return Status::Ok();
  }

  // fp _use_low_precision_shard, on the pre-unshard stream: `_mp_shard` (the shard in the
  // compute dtype) copied from `_local_shard.to(device)`, which with CPU offload is a new fp32
  // device tensor, freed when the statement ends.
  Status LowPrecisionShard(std::size_t f, std::uint64_t& mp_shard) {
    const Numel numel = units_[f].shard_numel;
    BUCKETSIM_RETURN_IF_ERROR(
        trace_.Alloc(numel * ComputeSize(f), kPreUnshardStream, Category::kAllGather, mp_shard));
    if (!options_.offload_params) return Status::Ok();
    std::uint64_t copy = 0;
    BUCKETSIM_RETURN_IF_ERROR(
        trace_.Alloc(numel * kFp32Size, kPreUnshardStream, Category::kAllGather, copy));
    return trace_.Free(copy);
  }

  // rt _reshard: fp reshard frees the padded unsharded flat parameter when asked, fp
  // post_reshard frees NO_SHARD's `_mp_shard` always; the handle is no longer prefetched.
  Status Reshard(std::size_t f, bool free_unsharded) {
    Unit& unit = units_[f];
    unit.prefetched = false;
    if (unit.unsharded == 0 || (Sharded() && !free_unsharded)) return Status::Ok();
    return trace_.Free(std::exchange(unit.unsharded, 0));
  }

  // rt _prefetch_handle: unshard the target and mark it prefetched.
  Status Prefetch(std::optional<std::size_t> target) {
    if (!target) return Status::Ok();
    BUCKETSIM_RETURN_IF_ERROR(Unshard(*target));
    units_[*target].prefetched = true;
    return Status::Ok();
  }

  // rt _get_handle_to_prefetch with eo get_handle_to_backward_prefetch: the unit before this
  // one in this iteration's post-forward order, if its pre-backward unshard is still to come.
  std::optional<std::size_t> HandleToBackwardPrefetch(std::size_t f) const {
    const std::optional<std::size_t> index = units_[f].post_forward_index;
    if (!index || *index == 0) return std::nullopt;
    const std::size_t target = post_forward_order_[*index - 1];
    if (!units_[target].needs_pre_backward_unshard || units_[target].prefetched) {
      return std::nullopt;
    }
    return target;
  }
  // ... and eo get_handle_to_forward_prefetch: the next unit in the pre-forward order recorded
  // in the first iteration (so none while it is being recorded).
  std::optional<std::size_t> HandleToForwardPrefetch(std::size_t f) const {
    const std::optional<std::size_t> index = units_[f].pre_forward_index;
    if (!options_.fsdp1.forward_prefetch || iteration_ == 0 || !index ||
        *index + 1 >= pre_forward_order_.size()) {
      return std::nullopt;
    }
    const std::size_t target = pre_forward_order_[*index + 1];
    if (!units_[target].needs_pre_forward_unshard || units_[target].prefetched) {
      return std::nullopt;
    }
    return target;
  }

  // rt _reduce_grad with _get_reduce_scatter_tensors: the flat gradient padded to ws x shard
  // (F.pad, a new tensor, only when it is not already: without use_orig_params), the output
  // new_sharded_grad = empty_like(chunks[0]) in the reduce dtype (the request: the policy
  // allocates it), reduce_scatter_tensor over the shard group; HYBRID_SHARD then all-reduces
  // it in place over the replicate group (no allocation). rt _accumulate_sharded_grad: the
  // shard is cast to fp32 when reduced in another dtype (_cast_grad_to_param_dtype) and kept
  // as _saved_grad_shard, then .grad (fp prepare_gradient_for_optim), until zero_grad; with CPU
  // offload it is copied into `_cpu_grad` (rt _offload_grad) and kept only until the end of
  // backward (EndBackward).
  Status ReduceGrad(std::size_t f, Numel grad_numel) {
    Unit& unit = units_[f];
    const DType reduce = ReduceDType(f);
    const Numel padded_numel = ShardGroupSize() * unit.shard_numel;
    std::uint64_t padded = 0;
    if (padded_numel > grad_numel) {
      BUCKETSIM_RETURN_IF_ERROR(trace_.Alloc(padded_numel * ElementSize(reduce),
                                             kPostBackwardStream, Category::kGrad, padded));
    }
    const bool fp32 = reduce == DType::kFloat32;
    BUCKETSIM_RETURN_IF_ERROR(trace_.Emit(
        ReduceScatterEvent(static_cast<std::uint32_t>(f), 0, kShardGroup, reduce, unit.shard_numel,
                           fp32 ? ShardMode::kView : ShardMode::kCast, DType::kFloat32)));
    unit.holds_grad = true;
    if (padded != 0) BUCKETSIM_RETURN_IF_ERROR(trace_.Free(padded));
    return Status::Ok();
  }

  // rt _reduce_grad_no_shard: all-reduce flat_param.grad in place, then cast it to fp32 if it
  // is not (_cast_grad_to_param_dtype); it stays flat_param.grad until zero_grad (offloaded:
  // copied into `_cpu_grad`, and kept until the end of backward). The gradient autograd made
  // dies with the hook unless it is that gradient.
  Status ReduceGradNoShard(std::size_t f, std::uint64_t grad, std::uint64_t reduce_copy) {
    std::uint64_t kept = reduce_copy != 0 ? reduce_copy : grad;
    BUCKETSIM_RETURN_IF_ERROR(
        trace_.Emit(TraceCollectiveEvent(EventKind::kAllReduce, kept, kPostBackwardStream,
                                         kShardGroup, ReduceDType(f), GradNumel(f))));
    if (ReduceDType(f) != DType::kFloat32) {
      BUCKETSIM_RETURN_IF_ERROR(
          trace_.Alloc(GradNumel(f) * kFp32Size, kPostBackwardStream, Category::kGrad, kept));
      if (reduce_copy != 0) BUCKETSIM_RETURN_IF_ERROR(trace_.Free(reduce_copy));
    }
    units_[f].kept_grad = kept;
    units_[f].holds_grad = true;
    if (kept != grad) BUCKETSIM_RETURN_IF_ERROR(trace_.Free(grad));
    return Status::Ok();
  }

  // The gradients .grad holds go: the policy's reduced shards (a zero_grad event), NO_SHARD's.
  Status ReleaseGrads() {
    BUCKETSIM_RETURN_IF_ERROR(trace_.Emit(ZeroGradEvent(/*set_to_none=*/true)));
    for (Unit& unit : units_) {
      unit.holds_grad = false;
      if (unit.kept_grad != 0) {
        BUCKETSIM_RETURN_IF_ERROR(trace_.Free(std::exchange(unit.kept_grad, 0)));
      }
    }
    return Status::Ok();
  }

  // torch.optim creates its state lazily at the first step, zeros_like each parameter it
  // holds: the FlatParameter's shard (use_orig_params=False; NO_SHARD: the whole flat
  // parameter), or each original parameter's part of this rank's shard (use_orig_params=True:
  // fp _use_sharded_views; padding excluded, nothing for a parameter outside the shard).
  std::vector<Numel> OptimizerStateNumels(std::size_t f) const {
    const Unit& unit = units_[f];
    if (unit.flat_numel == 0) return {};
    if (!options_.fsdp1.use_orig_params) return {unit.shard_numel};
    const std::vector<Numel> numels = OrigNumels(f);
    if (!Sharded()) return numels;
    Numel total = 0;
    const std::vector<Numel> offsets = FlatOffsets(f, total);
    const Numel rank_in_group = static_cast<Numel>(
        std::find(shard_ranks_.begin(), shard_ranks_.end(), options_.rank) - shard_ranks_.begin());
    const Numel begin = rank_in_group * unit.shard_numel;
    const Numel end = begin + unit.shard_numel;
    std::vector<Numel> parts;
    for (std::size_t i = 0; i < numels.size(); ++i) {
      const Numel lo = std::max(begin, offsets[i]);
      const Numel hi = std::min(end, offsets[i] + numels[i]);
      if (hi > lo) parts.push_back(hi - lo);
    }
    return parts;
  }

  const ModelProgram& model_;
  const GenOptions& options_;
  TraceEmitter& trace_;
  const std::vector<int> shard_ranks_;
  const ShardingStrategy strategy_;
  std::vector<Unit> units_;
  std::size_t root_ = 0;
  int iteration_ = 0;
  bool lazy_initialized_ = false;
  std::vector<std::size_t> pre_forward_order_;   // eo handles_pre_forward_order
  std::vector<std::size_t> post_forward_order_;  // eo handles_post_forward_order
};

}  // namespace

std::unique_ptr<FsdpImplementation> MakeTorchFsdp1(const ModelProgram& model,
                                                   const GenOptions& options, TraceEmitter& trace) {
  return std::make_unique<TorchFsdp1>(model, options, trace);
}

}  // namespace bucketsim
