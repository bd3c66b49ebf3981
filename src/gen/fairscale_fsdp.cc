#include "gen/fairscale_fsdp.h"

#include <utility>
#include <vector>

#include "gen/model_program.h"
#include "gen/optimizer_step.h"
#include "policy/shard_size.h"

namespace bucketsim {
namespace {

// The three streams of fairscale FSDP that matter to memory. fairscale also has an
// `fp32_to_fp16` stream for the `_fp16_shard` cast; the cast runs inside `_rebuild_full_params`
// under the all-gather stream's ordering, so it is put on `all_gather` here.
constexpr StreamId kAllGatherStream = 1;
constexpr StreamId kPostBackwardStream = 2;

// The process-group object of each instance under `layout`: ids from 1, in instance order.
std::vector<GroupId> InstanceGroups(const ModelProgram& model, GroupLayout layout) {
  std::vector<GroupId> groups(model.units.size(), 1);
  GroupId next = 1;
  for (std::size_t f = 0; f < model.units.size(); ++f) {
    if (layout == GroupLayout::kPerInstance) {
      groups[f] = next++;
    } else if (layout == GroupLayout::kSharedBnOwn && model.units[f].own_group) {
      groups[f] = ++next;  // 1 is the shared group of every other instance
    }
  }
  return groups;
}

class FairscaleFsdp final : public FsdpImplementation {
 public:
  FairscaleFsdp(const ModelProgram& model, const GenOptions& options, TraceEmitter& trace)
      : model_(model),
        options_(options),
        trace_(trace),
        shard_group_size_(static_cast<Numel>(options.ShardGroupRanks().size())),
        groups_(InstanceGroups(model, options.group_layout)),
        full_param_ids_(model.units.size()) {}

  Status BuildHeader(TraceHeader& header) const override {
    header.streams = {{"default"}, {"all_gather"}, {"post_backward"}};
    const std::vector<int> ranks = options_.ShardGroupRanks();
    switch (options_.group_layout) {
      case GroupLayout::kShared:
        // get_process_group_cached(ProcessGroupName.reduce_scatter): one object for all.
        header.groups.push_back({1, ranks, "reduce_scatter"});
        break;
      case GroupLayout::kPerInstance:
        // dist.new_group() inside each FSDP constructor: same members, distinct objects.
        for (std::size_t f = 0; f < model_.units.size(); ++f) {
          header.groups.push_back({f + 1, ranks, model_.units[f].name + ".process_group"});
        }
        break;
      case GroupLayout::kSharedBnOwn:
        // fairscale's memory test at #633/#650: to_fsdp passes one get_global_group() object
        // to the main instances; auto_wrap_bn passes process_group=None, so each BN wrapper's
        // FSDP constructor makes dist.new_group() (reference/fsdp_semantics.md §2.8, §3.1).
        header.groups.push_back({1, ranks, "global_group"});
        for (std::size_t f = 0; f < model_.units.size(); ++f) {
          if (groups_[f] != 1) {
            header.groups.push_back({groups_[f], ranks, model_.units[f].name + ".process_group"});
          }
        }
        break;
      case GroupLayout::kHsdp:
        // HYBRID_SHARD: the shard group is made once and shared by every instance.
        header.groups.push_back({1, ranks, "shard_group"});
        break;
    }
    for (const FsdpUnit& instance : model_.units) {
      UnitInfo& fsdp = header.units.emplace_back();
      fsdp.name = instance.name;
      for (const GenParam& param : instance.params) {
        fsdp.params.push_back({param.name, param.numel, DType::kFloat32});
      }
    }
    return Status::Ok();
  }

  // Model construction: each rank keeps its fp32 shard of every parameter for the whole run.
  Status Init() override {
    for (const FsdpUnit& instance : model_.units) {
      for (const GenParam& param : instance.params) {
        std::uint64_t id = 0;
        BUCKETSIM_RETURN_IF_ERROR(
            trace_.Alloc(ShardNumel(param) * kFp32Size, kDefaultStream, Category::kParam, id));
      }
    }
    return Status::Ok();
  }

  // §2.3: gather before the instance's forward, reshard after it (unless it keeps them).
  Status PreForward(std::size_t f, Pass /*pass*/) override { return AllGather(f); }
  Status PostForward(std::size_t f, Pass /*pass*/) override {
    return ReshardsAfterForward(f) ? FreeFullParams(f) : Status::Ok();
  }
  // §2.4: the pre-backward hook re-gathers (a no-op if the parameters were kept).
  Status PreBackward(std::size_t f) override { return AllGather(f); }

  // Per parameter (fairscale registers one hook per parameter): free its gathered copy, reduce
  // its gradient, then the full gradient dies when the hook returns. HEAD (#784) sets
  // param.grad = None before the reduce is queued, whether it is bucketed or bypassed.
  Status PostBackward(std::size_t f) override {
    const std::vector<GenParam>& params = model_.units[f].params;
    for (std::size_t p = 0; p < params.size(); ++p) {
      std::uint64_t grad = 0;
      BUCKETSIM_RETURN_IF_ERROR(trace_.TakeParamGrad(f, p, grad));
      const std::uint64_t full_param = std::exchange(full_param_ids_[f][p], 0);
      if (full_param != 0) BUCKETSIM_RETURN_IF_ERROR(trace_.Free(full_param));
      if (Unsharded()) {
        BUCKETSIM_RETURN_IF_ERROR(KeepGradient(f, p, grad));
        continue;
      }
      BUCKETSIM_RETURN_IF_ERROR(ReduceScatter(f, p));
      BUCKETSIM_RETURN_IF_ERROR(trace_.Free(grad));
    }
    full_param_ids_[f].clear();
    return Status::Ok();
  }

  // The root's final callback flushes every bucket.
  Status EndBackward() override { return trace_.Emit(FlushEvent()); }

  Status Step(int iteration) override {
    // The optimizer holds each instance's (flat) parameter shards.
    std::vector<Numel> params;
    for (const FsdpUnit& instance : model_.units) {
      for (const GenParam& param : instance.params) params.push_back(ShardNumel(param));
    }
    return EmitOptimizerStep(options_, params, iteration, trace_);
  }

  // set_to_none=True drops every gradient shard, so the next backward's reduced shards are
  // fresh (view or cast), never accumulated.
  Status ZeroGrad() override {
    BUCKETSIM_RETURN_IF_ERROR(trace_.Emit(ZeroGradEvent(/*set_to_none=*/true)));
    for (std::uint64_t grad : kept_grads_) BUCKETSIM_RETURN_IF_ERROR(trace_.Free(grad));
    kept_grads_.clear();
    return Status::Ok();
  }

  // An instance computes in the compute dtype unless it was wrapped with
  // mixed_precision=False, or the compute dtype is fp32 anyway.
  Bytes ComputeSize(std::size_t f) const override {
    return MixedPrecision(f) ? ElementSize(options_.compute_dtype) : kFp32Size;
  }

 private:
  // One rank: the post-reduction hook gets the full gradient itself and keeps it as the
  // gradient until zero_grad; with mixed precision it is cast to fp32 first (a new tensor of
  // numel x 4, the compute-dtype gradient then dies).
  Status KeepGradient(std::size_t f, std::size_t p, std::uint64_t grad) {
    if (MixedPrecision(f)) {
      std::uint64_t fp32 = 0;
      BUCKETSIM_RETURN_IF_ERROR(trace_.Alloc(model_.units[f].params[p].numel * kFp32Size,
                                             kPostBackwardStream, Category::kGrad, fp32));
      BUCKETSIM_RETURN_IF_ERROR(trace_.Free(grad));
      grad = fp32;
    }
    kept_grads_.push_back(grad);
    return Status::Ok();
  }

  // The post_backward-stream part of the hook: fp32 copy, chunk_and_pad, the request.
  Status ReduceScatter(std::size_t f, std::size_t p) {
    const GenParam& param = model_.units[f].params[p];
    const Numel shard_numel = ShardNumel(param);
    const DType reduce_dtype = ReduceDType(f);
    std::uint64_t fp32_copy = 0;
    // Mixed precision with fp32 reduction: the hook copies the gradient to fp32 first.
    if (MixedPrecision(f) && reduce_dtype == DType::kFloat32) {
      BUCKETSIM_RETURN_IF_ERROR(
          trace_.Alloc(param.numel * kFp32Size, kPostBackwardStream, Category::kGrad, fp32_copy));
    }
    // chunk_and_pad: ws chunks of s elements are views of the gradient, except a short last
    // chunk (padded into a new tensor) and missing chunks (new zero tensors).
    const Numel new_chunks = shard_group_size_ - param.numel / shard_numel;
    std::uint64_t padding = 0;
    if (new_chunks > 0) {
      BUCKETSIM_RETURN_IF_ERROR(trace_.Alloc(new_chunks * shard_numel * ElementSize(reduce_dtype),
                                             kPostBackwardStream, Category::kGrad, padding));
    }

    // A reduced fp32 shard is kept as the gradient (a view); a 16-bit one is cast to the fp32
    // parameter dtype in the post-reduction hook (§2.4).
    const bool reduced_in_fp32 = reduce_dtype == DType::kFloat32;
    BUCKETSIM_RETURN_IF_ERROR(trace_.Emit(ReduceScatterEvent(
        static_cast<std::uint32_t>(f), static_cast<std::uint32_t>(p), groups_[f], reduce_dtype,
        shard_numel, reduced_in_fp32 ? ShardMode::kView : ShardMode::kCast, DType::kFloat32)));

    if (padding != 0) BUCKETSIM_RETURN_IF_ERROR(trace_.Free(padding));
    if (fp32_copy != 0) BUCKETSIM_RETURN_IF_ERROR(trace_.Free(fp32_copy));
    return Status::Ok();
  }

  // _rebuild_full_params, idempotent: with mixed precision the fp32 shard is cast into
  // `_fp16_shard` first, which is freed right after the all-gather that reads it.
  Status AllGather(std::size_t f) {
    const std::vector<GenParam>& params = model_.units[f].params;
    if (!full_param_ids_[f].empty()) return Status::Ok();
    if (Unsharded()) return UseFullParams(f);
    for (const GenParam& param : params) {
      const Numel shard_numel = ShardNumel(param);
      std::uint64_t cast_shard = 0;
      if (MixedPrecision(f)) {
        BUCKETSIM_RETURN_IF_ERROR(trace_.Alloc(shard_numel * ComputeSize(f), kAllGatherStream,
                                               Category::kAllGather, cast_shard));
      }
      std::uint64_t full = 0;
      BUCKETSIM_RETURN_IF_ERROR(trace_.Alloc(shard_group_size_ * shard_numel * ComputeSize(f),
                                             kAllGatherStream, Category::kAllGather, full));
      full_param_ids_[f].push_back(full);
      if (cast_shard != 0) BUCKETSIM_RETURN_IF_ERROR(trace_.Free(cast_shard));
    }
    return Status::Ok();
  }

  Status FreeFullParams(std::size_t f) {
    for (std::uint64_t id : full_param_ids_[f]) {
      if (id != 0) BUCKETSIM_RETURN_IF_ERROR(trace_.Free(id));
    }
    full_param_ids_[f].clear();
    return Status::Ok();
  }

  // One rank: fairscale does not shard (reference §2.8: "ws = 1, so the params are not
  // sharded and the reducer is not used"). The fp32 parameter is used as it is (id 0: nothing
  // allocated); with mixed precision it is cast to the compute dtype, a full-size copy that
  // lives as the gathered parameter would.
  bool Unsharded() const { return shard_group_size_ == 1; }
  Status UseFullParams(std::size_t f) {
    for (const GenParam& param : model_.units[f].params) {
      std::uint64_t id = 0;
      if (MixedPrecision(f)) {
        BUCKETSIM_RETURN_IF_ERROR(
            trace_.Alloc(param.numel * ComputeSize(f), kAllGatherStream, Category::kAllGather, id));
      }
      full_param_ids_[f].push_back(id);
    }
    return Status::Ok();
  }

  bool ReshardsAfterForward(std::size_t f) const {
    return options_.reshard_after_forward && model_.units[f].reshard_after_forward;
  }
  bool MixedPrecision(std::size_t f) const {
    return model_.units[f].mixed_precision && options_.compute_dtype != DType::kFloat32;
  }
  DType ReduceDType(std::size_t f) const {
    return MixedPrecision(f) ? options_.ReduceDType() : DType::kFloat32;
  }
  Numel ShardNumel(const GenParam& param) const {
    return PaddedShardNumel(param.numel, shard_group_size_);
  }

  // Created lazily by the first optimizer.step() and kept for the rest of the run; one fp32
  // tensor of s elements per state buffer and parameter (Adam: exp_avg and exp_avg_sq).
  const ModelProgram& model_;
  const GenOptions& options_;
  TraceEmitter& trace_;
  const Numel shard_group_size_;
  const std::vector<GroupId> groups_;
  std::vector<std::vector<std::uint64_t>> full_param_ids_;  // per instance; empty: resharded
  std::vector<std::uint64_t> kept_grads_;  // one rank: the gradients, until zero_grad
};

}  // namespace

std::unique_ptr<FsdpImplementation> MakeFairscaleFsdp(const ModelProgram& model,
                                                      const GenOptions& options,
                                                      TraceEmitter& trace) {
  return std::make_unique<FairscaleFsdp>(model, options, trace);
}

}  // namespace bucketsim
