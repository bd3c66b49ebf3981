#include "gen/torch_fsdp2.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "gen/model_program.h"
#include "gen/optimizer_step.h"

// Sources, all in torch 2.6's torch/distributed/fsdp/_fully_shard/: _fsdp_param.py (FSDPParam),
// _fsdp_collectives.py (foreach_all_gather, foreach_all_gather_copy_out, foreach_reduce),
// _fsdp_param_group.py (FSDPParamGroup), _fsdp_state.py (FSDPState), _fsdp_init.py,
// _fsdp_api.py (MixedPrecisionPolicy, CPUOffloadPolicy).

namespace bucketsim {
namespace {

// FSDPCommContext.lazy_init's streams that allocate: the all-gather copy-in stream (the copy-in
// buffer and the all-gather output, foreach_all_gather under get_all_gather_streams in forward
// and pre-backward) and the current stream (copy-out, post-forward reshard, gradients). The
// reduce-scatter buffers are the policy's (its input on the default stream, as 2.6 makes it).
constexpr StreamId kCopyInStream = 1;
constexpr StreamId kAllGatherStream = 2;
// foreach_reduce's reduce_scatter_stream (it waits for the current stream, then reduces): the
// policy's collectives run on it (TraceHeader::collective_stream), nothing is allocated on it.
constexpr StreamId kReduceScatterStream = 3;
constexpr GroupId kShardGroup = 1;
constexpr GroupId kReplicateGroup = 2;    // HSDP: the mesh's replicate dimension
constexpr GroupId kPostForwardGroup = 3;  // reshard_after_forward=N: the post-forward mesh

// One FSDPParam: an original parameter (a flat GenParam's view, or a GenParam of its own).
struct Fsdp2Param {
  Numel numel = 0;
  Numel padded_shard = 0;  // padded_sharded_param_size.numel(): chunk 0's, every rank's storage
  Numel local_shard = 0;   // sharded_size.numel(): this rank's chunk without padding
};

// A group's _sharded_state (ShardedState in _fsdp_param.py).
enum class Sharded { kSharded, kPostForward, kUnsharded };

class TorchFsdp2 final : public FsdpImplementation {
 public:
  TorchFsdp2(const ModelProgram& model, const GenOptions& options, TraceEmitter& trace)
      : model_(model), options_(options), trace_(trace), units_(model.units.size()) {
    const std::vector<int> ranks = options.ShardGroupRanks();
    ws_ = static_cast<Numel>(ranks.size());
    shard_rank_ = static_cast<Numel>(options.rank - ranks.front());
    for (std::size_t f = 0; f < model.units.size(); ++f) {
      for (const GenParam& param : model.units[f].params) {
        if (param.views.empty()) {
          units_[f].params.push_back(MakeParam(param.numel, param.dim0));
        } else {
          for (const ParamView& view : param.views)
            units_[f].params.push_back(MakeParam(view.numel, view.dim0));
        }
      }
      units_[f].has_grad.assign(units_[f].params.size(), true);
    }
    // The forward root's post-forward is the last: the unit whose forward ends last.
    for (const ForwardOp& op : model.forward) {
      if (op.kind == OpKind::kEndForward) last_to_end_ = op.instance;
    }
    setup_ = SetExplicitPrefetch();
    if (setup_.ok()) setup_ = SetPostForwardMesh();
  }

  Status BuildHeader(TraceHeader& header) const override {
    BUCKETSIM_RETURN_IF_ERROR(setup_);
    header.streams = {{"default"}, {"all_gather_copy_in"}, {"all_gather"}, {"reduce_scatter"}};
    // One mesh: every group all-gathers and reduce-scatters over its shard process group.
    header.groups.push_back({kShardGroup, options_.ShardGroupRanks(), "shard_group"});
    // HSDP (a 2-D mesh): foreach_reduce all-reduces each reduced shard over the replicas.
    if (const std::vector<int> replicas = options_.ReplicaRanks(); !replicas.empty()) {
      header.groups.push_back({kReplicateGroup, replicas, "replicate_group"});
      header.replicate_group = kReplicateGroup;
    }
    // reshard_after_forward=N (_get_post_forward_mesh_info): the mesh viewed as rows of N
    // consecutive ranks; the all-gather from the post-forward shards runs over this rank's row.
    if (const int post_forward = static_cast<int>(post_forward_mesh_); post_forward > 0) {
      std::vector<int> row;
      for (int r = 0; r < post_forward; ++r) {
        row.push_back(options_.rank / post_forward * post_forward + r);
      }
      header.groups.push_back({kPostForwardGroup, row, "post_forward_mesh"});
    }
    // The all-gathers are events (trace format 5); a parameter without a gradient is an rs
    // request with shard "no_grad" (6).
    header.schema_version = kNoGradSchemaVersion;
    for (std::size_t f = 0; f < model_.units.size(); ++f) {
      UnitInfo& fsdp = header.units.emplace_back();
      fsdp.name = model_.units[f].name;
      std::size_t k = 0;
      for (const GenParam& param : model_.units[f].params) {
        const std::size_t views = std::max<std::size_t>(param.views.size(), 1);
        for (std::size_t v = 0; v < views; ++v) {
          const std::string& name = param.views.empty() ? param.name : param.views[v].name;
          // Declared padded (_get_dim0_padded_size), so the request's numel is the padded shard.
          fsdp.params.push_back({name, ws_ * units_[f].params[k++].padded_shard, DType::kFloat32});
        }
      }
    }
    return Status::Ok();
  }

  // FSDPParam._init_sharded_param: each rank keeps chunk `rank` of dim 0 in a new zero tensor
  // of chunk 0's size (new_zeros(padded_sharded_size)); the unsharded parameter goes when
  // fully_shard returns. With CPUOffloadPolicy the shard is moved to the CPU (.cpu()).
  Status Init() override {
    if (options_.offload_params) return Status::Ok();
    for (Unit& unit : units_) {
      for (const Fsdp2Param& param : unit.params) {
        std::uint64_t id = 0;
        BUCKETSIM_RETURN_IF_ERROR(
            trace_.Alloc(param.padded_shard * kFp32Size, kDefaultStream, Category::kParam, id));
        unit.shard_ids.push_back(id);
      }
    }
    return Status::Ok();
  }

  Status PreForward(std::size_t f, Pass pass) override {
    // FSDPState._pre_forward returns at once while the state is in PRE_BACKWARD: the forward
    // hooks of a checkpointed region's recomputation do nothing. The emitter recomputes a
    // region before calling the pre-backward of a unit inside it, while the real pre-backward
    // hook (registered on the unit's output, _register_pre_backward_hook) fires before the
    // recomputation (non-reentrant checkpoint): it runs here then.
    if (units_[f].state_pre_backward) return Status::Ok();
    if (pass == Pass::kRecompute) return PreBackward(f);
    // FSDPParamGroup.pre_forward: unshard (no-op if prefetched), then wait_for_unshard in
    // state FORWARD; then FSDPState._pre_forward's explicit prefetch
    // (_states_to_forward_prefetch: _prefetch_unshard of each).
    BUCKETSIM_RETURN_IF_ERROR(Unshard(f));
    BUCKETSIM_RETURN_IF_ERROR(WaitForUnshard(f, /*forward=*/true));
    return UnshardAll(forward_prefetch_[f]);
  }

  Status PostForward(std::size_t f, Pass pass) override {
    if (pass == Pass::kRecompute || units_[f].state_pre_backward) return Status::Ok();
    // FSDPParamGroup.post_forward: reshard, then _record_post_forward.
    BUCKETSIM_RETURN_IF_ERROR(ReshardAfterForward(f));
    units_[f].post_forward_indices.push_back(post_forward_order_.size());
    post_forward_order_.push_back(f);
    return Status::Ok();
  }

  // FSDPState._post_forward of the iteration's forward root frees the last all-gather result
  // ([Note: Overlapping all-gather copy-in and all-gather]) when it returns: its local
  // `all_gather_state` (bound by `if all_gather_state := self._comm_ctx.all_gather_state:`)
  // holds it past its output casts (output_dtype). A root without parameters is not in the
  // program: its post-forward is then the last unit's.
  Status PostForwardReturns(std::size_t f) override {
    return f == last_to_end_ ? FreeAllGatherState() : Status::Ok();
  }

  // FSDPState._pre_backward sets PRE_BACKWARD, then FSDPParamGroup.pre_backward (no-op if the
  // group is already in PRE_BACKWARD): unshard (no-op if prefetched), wait_for_unshard, and
  // the default prefetch (_backward_prefetch: the group before it in post-forward order) unless
  // the unit has an explicit list (_states_to_backward_prefetch), whose groups it then
  // unshards (_prefetch_unshard). The emitter calls it once per unit and backward: the list's
  // prefetch with it (the real hook fires once per output, re-prefetching what is pending).
  Status PreBackward(std::size_t f) override {
    Unit& unit = units_[f];
    unit.state_pre_backward = true;
    if (unit.group_pre_backward) return Status::Ok();
    unit.group_pre_backward = true;
    BUCKETSIM_RETURN_IF_ERROR(Unshard(f));
    BUCKETSIM_RETURN_IF_ERROR(WaitForUnshard(f, /*forward=*/false));
    std::optional<std::size_t> index;
    if (!unit.post_forward_indices.empty()) {
      index = unit.post_forward_indices.back();
      unit.post_forward_indices.pop_back();
    }
    if (!backward_prefetch_[f].empty()) return UnshardAll(backward_prefetch_[f]);
    if (!index || *index == 0) return Status::Ok();
    return Unshard(post_forward_order_[*index - 1]);
  }

  // FSDPParamGroup.post_backward: the unsharded gradients are collected (and .grad set to
  // None), the group reshards (reshard_after_backward), then foreach_reduce of the parameters
  // that have one (fsdp_params_with_grad): a parameter no backward reached has none.
  Status PostBackward(std::size_t f) override {
    Unit& unit = units_[f];
    unit.group_pre_backward = false;  // POST_BACKWARD
    std::vector<std::uint64_t> grads;
    std::vector<std::uint64_t> ids;
    std::size_t k = 0;
    for (std::size_t p = 0; p < model_.units[f].params.size(); ++p) {
      BUCKETSIM_RETURN_IF_ERROR(trace_.TakeViewGrads(f, p, ids));
      const std::size_t views = std::max<std::size_t>(model_.units[f].params[p].views.size(), 1);
      // Without param_reads one gradient stands for the parameter's views: all have one.
      for (std::size_t v = 0; v < views; ++v, ++k) {
        unit.has_grad[k] = ids.size() != views || ids[v] != 0;
      }
      for (std::uint64_t id : ids) {
        if (id != 0) grads.push_back(id);
      }
    }
    BUCKETSIM_RETURN_IF_ERROR(ToSharded(f));
    return Reduce(f, grads);
  }

  // FSDPState._root_post_backward_final_callback: finalize_backward drops a prefetched
  // all-gather no pre-backward waited for; the last reduce-scatter input is freed
  // (comm_ctx.reduce_scatter_state = None): the policy's flush.
  Status EndBackward() override {
    for (Unit& unit : units_) {
      if (unit.all_gather_output != 0) {
        BUCKETSIM_RETURN_IF_ERROR(trace_.Free(std::exchange(unit.all_gather_output, 0)));
      }
      unit.state_pre_backward = false;
      unit.group_pre_backward = false;
      unit.post_forward_indices.clear();
    }
    post_forward_order_.clear();
    return trace_.Emit(FlushEvent());
  }

  Status Step(int iteration) override {
    // The optimizer holds each parameter's DTensor, whose local shard is unpadded; offloaded,
    // the step runs on the CPU and nothing of it is on the device. torch.optim skips a
    // parameter whose .grad is None (sgd.py, adam.py _init_group: `if p.grad is not None`):
    // no state, no step.
    std::vector<Numel> params;
    for (const Unit& unit : units_) {
      for (std::size_t k = 0; k < unit.params.size(); ++k) {
        if (unit.has_grad[k]) params.push_back(unit.params[k].local_shard);
      }
    }
    if (options_.offload_params) return EmitHostOptimizerStep(options_, params, trace_);
    return EmitOptimizerStep(options_, params, iteration, trace_);
  }

  // zero_grad(set_to_none=True): the sharded gradients (views of, or casts from, the reduced
  // output) go; the replay releases them.
  Status ZeroGrad() override { return trace_.Emit(ZeroGradEvent(/*set_to_none=*/true)); }

  // The unsharded parameters, and so autograd's gradients, are in param_dtype.
  Bytes ComputeSize(std::size_t f) const override { return ElementSize(ParamDType(f)); }

 private:
  struct Unit {
    std::vector<Fsdp2Param> params;
    std::vector<std::uint64_t> shard_ids;         // the padded fp32 shards (none when offloaded)
    std::vector<std::uint64_t> unsharded_ids;     // all_gather_outputs while unsharded
    std::vector<std::uint64_t> post_forward_ids;  // _sharded_post_forward_param_data
    Sharded state = Sharded::kSharded;
    std::uint64_t all_gather_output = 0;  // _all_gather_result: unshard issued, not waited
    bool state_pre_backward = false;      // FSDPState._training_state == PRE_BACKWARD
    bool group_pre_backward = false;      // FSDPParamGroup._training_state == PRE_BACKWARD
    std::vector<std::size_t> post_forward_indices;
    // By parameter: a gradient reached it in the last backward (torch.optim steps only those).
    std::vector<bool> has_grad;
  };

  // _init_sharded_param, _chunk_with_empty(param, ws, dim=0): torch.chunk's chunks of
  // ceil(dim0 / ws) rows each, the last short or, past the end, empty; the padded shard is
  // chunk 0's (_get_dim0_padded_size). Without the program's dim0 the parameter is 1-D.
  Fsdp2Param MakeParam(Numel numel, Numel dim0) const {
    if (numel == 0) return {0, 0, 0};
    if (dim0 == 0) dim0 = numel;
    const Numel row = numel / dim0;
    const Numel rows = (dim0 + ws_ - 1) / ws_;
    const Numel start = std::min(dim0, rows * shard_rank_);
    return {numel, rows * row, std::min(rows, dim0 - start) * row};
  }

  // FSDPState._root_pre_forward -> _lazy_init, at the root's first forward, before its input
  // casts (_pre_forward casts after it) and any unit's pre-forward.
  Status ForwardBegins() override { return lazy_initialized_ ? Status::Ok() : LazyInit(); }

  // The explicit prefetch lists of PyTorch's FSDP2 example (pytorch/examples
  // distributed/FSDP2/example.py: set_modules_to_forward_prefetch / _backward_prefetch) over
  // the units but the root, in the order the forward gathers them: unit i prefetches units
  // i+1..i+N in forward (none for the last N), units i-1..i-N in backward (none for the first N,
  // which keep the implicit prefetch). A unit with lists of its own (a recorded model's
  // set_modules_to_forward_prefetch / _backward_prefetch, by instance name) has those.
  Status SetExplicitPrefetch() {
    forward_prefetch_.assign(units_.size(), {});
    backward_prefetch_.assign(units_.size(), {});
    std::vector<std::size_t> layers;
    for (const ForwardOp& op : model_.forward) {
      if (op.kind == OpKind::kGather && op.instance != root_ &&
          std::find(layers.begin(), layers.end(), op.instance) == layers.end()) {
        layers.push_back(op.instance);
      }
    }
    const std::size_t ahead = static_cast<std::size_t>(options_.fsdp2.forward_prefetch_modules);
    const std::size_t behind = static_cast<std::size_t>(options_.fsdp2.backward_prefetch_modules);
    for (std::size_t i = 0; i < layers.size(); ++i) {
      for (std::size_t j = 1; j <= ahead && i + ahead < layers.size(); ++j) {
        forward_prefetch_[layers[i]].push_back(layers[i + j]);
      }
      for (std::size_t j = 1; j <= behind && i >= behind; ++j) {
        backward_prefetch_[layers[i]].push_back(layers[i - j]);
      }
    }
    for (std::size_t f = 0; f < units_.size(); ++f) {
      const UnitSettings& own = model_.units[f].settings;
      for (const auto& [list, prefetch] :
           {std::pair{&own.modules_to_forward_prefetch, &forward_prefetch_[f]},
            std::pair{&own.modules_to_backward_prefetch, &backward_prefetch_[f]}}) {
        if (!*list) continue;
        prefetch->clear();
        for (const std::string& name : **list) {
          const auto target =
              std::find_if(model_.units.begin(), model_.units.end(),
                           [&](const FsdpUnit& instance) { return instance.name == name; });
          if (target == model_.units.end()) {
            return InvalidArgument(
                fmt::format("fsdp2: unit {} prefetches {}, which is not a unit of this model",
                            model_.units[f].name, name));
          }
          prefetch->push_back(static_cast<std::size_t>(target - model_.units.begin()));
        }
      }
    }
    return Status::Ok();
  }

  // The post-forward mesh of reshard_after_forward=N (rows of N ranks: one process group),
  // where a unit reshards to fewer ranks than the shard group; 0: none. Units that reshard to
  // meshes of different sizes would need a group each: refused.
  Status SetPostForwardMesh() {
    for (std::size_t f = 0; f < units_.size(); ++f) {
      const Numel n = PostForwardRanks(f);
      if (n > 0 && ws_ % n != 0) {
        return InvalidArgument(fmt::format(
            "fsdp2: unit {} reshards after forward to {} ranks, which does not divide its shard "
            "group's {}",
            model_.units[f].name, n, ws_));
      }
      if (n == 0 || n >= ws_) continue;
      if (post_forward_mesh_ != 0 && post_forward_mesh_ != n) {
        return InvalidArgument(fmt::format(
            "fsdp2: units reshard after forward to meshes of {} and {} ranks; one size is "
            "modelled",
            post_forward_mesh_, n));
      }
      post_forward_mesh_ = n;
    }
    return Status::Ok();
  }

  Status UnshardAll(const std::vector<std::size_t>& targets) {
    for (std::size_t target : targets) BUCKETSIM_RETURN_IF_ERROR(Unshard(target));
    return Status::Ok();
  }

  // FSDPParamGroup.lazy_init: reset_sharded_param re-pads a shard whose local tensor is
  // shorter than chunk 0 (new_zeros(padded_sharded_size), the old padded storage then dropped).
  Status LazyInit() {
    lazy_initialized_ = true;
    for (Unit& unit : units_) {
      for (std::size_t k = 0; k < unit.shard_ids.size(); ++k) {
        const Fsdp2Param& param = unit.params[k];
        if (param.local_shard == param.padded_shard) continue;
        std::uint64_t id = 0;
        BUCKETSIM_RETURN_IF_ERROR(
            trace_.Alloc(param.padded_shard * kFp32Size, kDefaultStream, Category::kParam, id));
        BUCKETSIM_RETURN_IF_ERROR(trace_.Free(std::exchange(unit.shard_ids[k], id)));
      }
    }
    return Status::Ok();
  }

  // MixedPrecisionPolicy.param_dtype, None (no cast) where it equals the fp32 parameters
  // (FSDPParam.init_dtype_attrs).
  bool MixedPrecision(std::size_t f) const {
    return model_.units[f].mixed_precision && options_.compute_dtype != DType::kFloat32;
  }
  DType ParamDType(std::size_t f) const {
    return MixedPrecision(f) ? options_.compute_dtype : DType::kFloat32;
  }
  // foreach_reduce: reduce_dtype or the gradients' dtype (param_dtype == reduce_dtype clamps
  // reduce_dtype to None in MixedPrecisionPolicy.__post_init__, the same bytes).
  DType ReduceDType(std::size_t f) const { return options_.reduce_dtype.value_or(ParamDType(f)); }

  // The post-forward mesh (_get_post_forward_mesh_info): N ranks, or the shard mesh (True),
  // or none (False; 1 means False, the shard group's size means True). The root (instance 0:
  // programs list the outermost module first) never reshards after forward
  // (FSDPState._lazy_init sets its post_forward_mesh_info to None).
  // A unit's own setting (a recorded model's) wins over the options'.
  Numel PostForwardRanks(std::size_t f) const {
    if (f == root_) return 0;
    const UnitSettings::Reshard reshard =
        model_.units[f].settings.reshard_after_forward.value_or(UnitSettings::Reshard{
            options_.reshard_after_forward, options_.reshard_after_forward_ranks});
    const Numel n = reshard.ranks;
    if (n > 0) return n == 1 ? 0 : n;
    return reshard.reshard ? ws_ : 0;
  }

  // FSDPParamGroup.unshard -> foreach_all_gather.
  Status Unshard(std::size_t f) {
    Unit& unit = units_[f];
    if (unit.all_gather_output != 0 || unit.state == Sharded::kUnsharded) return Status::Ok();
    const bool post_forward = unit.state == Sharded::kPostForward;
    // The all-gather runs over the post-forward mesh from SHARDED_POST_FORWARD
    // (_all_gather_process_group); its inputs are then the post-forward shards.
    const Numel ranks = post_forward ? PostForwardRanks(f) : ws_;
    const Bytes element = ElementSize(ParamDType(f));
    Numel input_numel = 0;
    std::vector<std::uint64_t> inputs;
    for (const Fsdp2Param& param : unit.params) {
      const Numel numel = ws_ * param.padded_shard / ranks;
      input_numel += numel;
      // FSDPParam.all_gather_inputs with CPUOffloadPolicy: the shard copied to the device
      // (.to(device)), then cast to param_dtype (_to_dtype_if_needed), the copy dropped.
      if (options_.offload_params && !post_forward) {
        std::uint64_t copy = 0;
        BUCKETSIM_RETURN_IF_ERROR(
            trace_.Alloc(numel * kFp32Size, kCopyInStream, Category::kAllGather, copy));
        if (MixedPrecision(f)) {
          std::uint64_t cast = 0;
          BUCKETSIM_RETURN_IF_ERROR(
              trace_.Alloc(numel * element, kCopyInStream, Category::kAllGather, cast));
          BUCKETSIM_RETURN_IF_ERROR(trace_.Free(copy));
          copy = cast;
        }
        inputs.push_back(copy);
      }
    }
    // The inputs' .to(device) on the copy-in stream, priced on the all-gather stream, which
    // waits for the copy-in stream before it gathers (one stream of the sim's serves both).
    if (options_.offload_params && !post_forward) {
      BUCKETSIM_RETURN_IF_ERROR(
          trace_.HostCopy("offload param to device", input_numel * kFp32Size, kAllGatherStream));
    }
    // _get_param_all_gather_inputs' foreach-copy path (param_dtype set, not offloaded): one
    // flat param_dtype tensor the shards are cast into.
    if (MixedPrecision(f) && inputs.empty()) {
      std::uint64_t flat = 0;
      BUCKETSIM_RETURN_IF_ERROR(
          trace_.Alloc(input_numel * element, kCopyInStream, Category::kAllGather, flat));
      inputs.push_back(flat);
    }
    // all_gather_copy_in: the output buffer, the input a narrow view of it; then
    // all_gather_into_tensor on the all-gather stream, over the shard group (from the
    // post-forward shards, over the post-forward mesh).
    BUCKETSIM_RETURN_IF_ERROR(trace_.Alloc(ranks * input_numel * element, kCopyInStream,
                                           Category::kAllGather, unit.all_gather_output));
    const GroupId group = post_forward && ranks < ws_ ? kPostForwardGroup : kShardGroup;
    BUCKETSIM_RETURN_IF_ERROR(
        trace_.Emit(TraceCollectiveEvent(EventKind::kAllGather, unit.all_gather_output,
                                         kAllGatherStream, group, ParamDType(f), input_numel)));
    // The inputs go when foreach_all_gather returns (its all_gather_inputs list holds them).
    for (std::uint64_t id : inputs) BUCKETSIM_RETURN_IF_ERROR(trace_.Free(id));
    return Status::Ok();
  }

  // FSDPParamGroup.wait_for_unshard.
  Status WaitForUnshard(std::size_t f, bool forward) {
    Unit& unit = units_[f];
    if (unit.all_gather_output == 0) return Status::Ok();
    // In forward the previous group's all-gather result leaves comm_ctx.all_gather_state
    // before this copy-out, but wait_for_unshard's local `prev_all_gather_state` (bound by
    // `if prev_all_gather_state := self.comm_ctx.all_gather_state:`) keeps it alive until the
    // function returns: it is freed after the copy-out (torch 2.6 _fsdp_param_group.py; the
    // profiler shows the free after FSDP::all_gather_copy_out, in FSDP::pre_forward).
    const std::uint64_t previous = forward ? std::exchange(all_gather_state_, 0) : 0;
    // foreach_all_gather_copy_out: init_all_gather_outputs / alloc_all_gather_outputs, one
    // unsharded (padded) tensor per parameter, on the current stream.
    const Bytes element = ElementSize(ParamDType(f));
    for (const Fsdp2Param& param : unit.params) {
      std::uint64_t id = 0;
      BUCKETSIM_RETURN_IF_ERROR(trace_.Alloc(ws_ * param.padded_shard * element, kDefaultStream,
                                             Category::kAllGather, id));
      unit.unsharded_ids.push_back(id);
    }
    // _to_unsharded: FSDPParam.to_unsharded frees the post-forward shard.
    for (std::uint64_t id : std::exchange(unit.post_forward_ids, {})) {
      BUCKETSIM_RETURN_IF_ERROR(trace_.Free(id));
    }
    unit.state = Sharded::kUnsharded;
    const std::uint64_t output = std::exchange(unit.all_gather_output, 0);
    // Forward (sync): kept in comm_ctx.all_gather_state until the next copy-out; otherwise
    // freed at once.
    if (forward) {
      all_gather_state_ = output;
    } else {
      BUCKETSIM_RETURN_IF_ERROR(trace_.Free(output));
    }
    return previous == 0 ? Status::Ok() : trace_.Free(previous);
  }

  Status FreeAllGatherState() {
    if (all_gather_state_ == 0) return Status::Ok();
    return trace_.Free(std::exchange(all_gather_state_, 0));
  }

  // FSDPParamGroup.reshard in FORWARD.
  Status ReshardAfterForward(std::size_t f) {
    const Numel ranks = PostForwardRanks(f);
    if (ranks == 0) return Status::Ok();
    if (ranks == ws_) return ToSharded(f);
    // _to_sharded_post_forward: per parameter, a clone of its 1/N of the all-gather output,
    // then free_unsharded_param.
    Unit& unit = units_[f];
    const Bytes element = ElementSize(ParamDType(f));
    for (std::size_t k = 0; k < unit.params.size(); ++k) {
      std::uint64_t id = 0;
      BUCKETSIM_RETURN_IF_ERROR(trace_.Alloc(ws_ * unit.params[k].padded_shard / ranks * element,
                                             kDefaultStream, Category::kAllGather, id));
      unit.post_forward_ids.push_back(id);
      BUCKETSIM_RETURN_IF_ERROR(trace_.Free(unit.unsharded_ids[k]));
    }
    unit.unsharded_ids.clear();
    unit.state = Sharded::kPostForward;
    return Status::Ok();
  }

  // _to_sharded: FSDPParam.to_sharded -> free_unsharded_param (free_storage of each
  // all-gather output).
  Status ToSharded(std::size_t f) {
    Unit& unit = units_[f];
    if (unit.state != Sharded::kUnsharded) return Status::Ok();
    for (std::uint64_t id : std::exchange(unit.unsharded_ids, {})) {
      BUCKETSIM_RETURN_IF_ERROR(trace_.Free(id));
    }
    unit.state = Sharded::kSharded;
    return Status::Ok();
  }

  // foreach_reduce, as requests to the `fsdp2` policy (policy/group_reduce_scatter.h): the
  // policy allocates the reduce-scatter input (reduce dtype) at the group's first request and
  // the output at its last, so the unsharded gradients are freed between them, as 2.6 frees
  // them (unsharded_grads.clear()) after the chunk_cat copy-in and before reduce_output. A
  // reduce dtype other than fp32 is cast back (_to_dtype_if_needed(reduce_output,
  // orig_dtype)); an fp32 output is viewed (as_strided) by the sharded gradients. With
  // CPUOffloadPolicy each sharded gradient is copied to the CPU (.to("cpu")) instead, and
  // nothing of the output stays on the device.
  Status Reduce(std::size_t f, const std::vector<std::uint64_t>& grads) {
    const Unit& unit = units_[f];
    const std::vector<Fsdp2Param>& params = unit.params;
    const DType reduce_dtype = ReduceDType(f);
    const ShardMode mode = options_.offload_params           ? ShardMode::kOffload
                           : reduce_dtype == DType::kFloat32 ? ShardMode::kView
                                                             : ShardMode::kCast;
    const auto request = [&](std::size_t k, ShardMode shard) {
      return trace_.Emit(ReduceScatterEvent(
          static_cast<std::uint32_t>(f), static_cast<std::uint32_t>(k), kShardGroup, reduce_dtype,
          params[k].padded_shard, shard, DType::kFloat32));
    };
    // The parameters without a gradient first, so that the policy knows the input's columns
    // at the first request with one.
    std::vector<std::size_t> reduced;
    for (std::size_t k = 0; k < params.size(); ++k) {
      if (unit.has_grad[k]) {
        reduced.push_back(k);
      } else {
        BUCKETSIM_RETURN_IF_ERROR(request(k, ShardMode::kNoGrad));
      }
    }
    for (std::size_t i = 0; i < reduced.size(); ++i) {
      // One request alone (a group of one parameter) cannot bracket the frees: they follow it.
      if (i + 1 == reduced.size() && i > 0) BUCKETSIM_RETURN_IF_ERROR(FreeAll(grads));
      BUCKETSIM_RETURN_IF_ERROR(request(reduced[i], mode));
    }
    if (reduced.size() <= 1) BUCKETSIM_RETURN_IF_ERROR(FreeAll(grads));
    // CPUOffloadPolicy: each sharded gradient's .to("cpu"), on the reduce-scatter stream after
    // the collective.
    if (options_.offload_params) {
      Numel offloaded = 0;
      for (std::size_t k : reduced) offloaded += params[k].local_shard;
      BUCKETSIM_RETURN_IF_ERROR(
          trace_.HostCopy("offload grad to host", offloaded * kFp32Size, kReduceScatterStream));
    }
    return Status::Ok();
  }

  Status FreeAll(const std::vector<std::uint64_t>& ids) {
    for (std::uint64_t id : ids) BUCKETSIM_RETURN_IF_ERROR(trace_.Free(id));
    return Status::Ok();
  }

  // torch.optim's state is made lazily at the first step, zeros_like / clone of the sharded
  // parameter or gradient: a DTensor whose local tensor is this rank's chunk without padding
  // (sharded_size). On the CPU when offloaded.
  const ModelProgram& model_;
  const GenOptions& options_;
  TraceEmitter& trace_;
  Numel ws_ = 1;
  Numel shard_rank_ = 0;
  std::vector<Unit> units_;
  static constexpr std::size_t root_ = 0;
  std::size_t last_to_end_ = 0;
  bool lazy_initialized_ = false;
  std::uint64_t all_gather_state_ = 0;           // comm_ctx.all_gather_state's all-gather output
  std::vector<std::size_t> post_forward_order_;  // comm_ctx.post_forward_order
  // Per unit: the units it prefetches explicitly in forward and in backward.
  std::vector<std::vector<std::size_t>> forward_prefetch_, backward_prefetch_;
  Numel post_forward_mesh_ = 0;  // SetPostForwardMesh
  Status setup_;                 // what the constructor found wrong, returned by BuildHeader
};

}  // namespace

std::unique_ptr<FsdpImplementation> MakeTorchFsdp2(const ModelProgram& model,
                                                   const GenOptions& options, TraceEmitter& trace) {
  return std::make_unique<TorchFsdp2>(model, options, trace);
}

}  // namespace bucketsim
