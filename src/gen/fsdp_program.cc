#include "gen/fsdp_program.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "gen/param_target.h"
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

// The process-group object of each instance under `layout`: ids from 1, in instance order.
std::vector<GroupId> InstanceGroups(const FsdpModel& model, GroupLayout layout) {
  std::vector<GroupId> groups(model.instances.size(), 1);
  GroupId next = 1;
  for (std::size_t f = 0; f < model.instances.size(); ++f) {
    if (layout == GroupLayout::kPerInstance) {
      groups[f] = next++;
    } else if (layout == GroupLayout::kSharedBnOwn && model.instances[f].own_group) {
      groups[f] = ++next;  // 1 is the shared group of every other instance
    }
  }
  return groups;
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
    case GroupLayout::kSharedBnOwn: {
      // fairscale's memory test at #633/#650: to_fsdp passes one get_global_group() object to
      // the main instances; auto_wrap_bn passes process_group=None, so each BN wrapper's FSDP
      // constructor makes dist.new_group() (reference/fsdp_semantics.md §2.8, §3.1).
      header.groups.push_back({1, ranks, "global_group"});
      const std::vector<GroupId> groups = InstanceGroups(model, options.group_layout);
      for (std::size_t f = 0; f < model.instances.size(); ++f) {
        if (groups[f] != 1) {
          header.groups.push_back({groups[f], ranks, model.instances[f].name + ".process_group"});
        }
      }
      break;
    }
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
//
// Activations and their gradients are storages with reference counts: a tensor holds its
// storage while a later run still reads it, a run's backward still needs it (a save), the
// training loop holds it (the loss, `held`), or a checkpointed region's backward holds its
// recomputed outputs; aliases (views, in-place results) share their tensor's storage, and a
// `pass` gradient shares the gradient it passes on. A storage is freed when its count drops to
// zero. The backward follows autograd's engine (torch/csrc/autograd/engine.cpp, PyTorch 1.13):
// a node runs once a gradient for one of its outputs has arrived; it produces the gradients of
// its inputs (those that require grad; none for the batch) while the incoming gradients are
// alive; `call_function` drops the incoming gradients when the node returns, and
// `evaluate_function` then calls `release_variables()` on its saved tensors; the produced
// gradients go to their consumers' input buffers, where a second gradient for the same tensor
// is summed into a new tensor (`InputBuffer::accumulate`: `old_var + var`).
class FsdpTrace {
 public:
  FsdpTrace(const FsdpModel& model, const GenOptions& options, TraceHeader& header, EventSink& sink)
      : model_(model),
        options_(options),
        header_(header),
        sink_(sink),
        shard_group_size_(static_cast<Numel>(options.ShardGroupRanks().size())),
        groups_(InstanceGroups(model, options.group_layout)),
        full_param_ids_(model.instances.size()),
        grad_ids_(model.instances.size()),
        saved_(model.forward.size()),
        op_tensors_(model.forward.size()),
        span_names_(model.forward.size(), {kUninterned, kUninterned, kUninterned}) {
    IndexTensors();
    IndexParamTargets();
  }

  Status Run() {
    // Model construction: each rank keeps its fp32 shard of every parameter for the whole run.
    for (const GenInstance& instance : model_.instances) {
      for (const GenParam& param : instance.params) {
        std::uint64_t id = 0;
        BUCKETSIM_RETURN_IF_ERROR(
            Alloc(ShardNumel(param) * kFp32Size, kDefaultStream, Category::kParam, id));
      }
    }
    // The batch: made once, never freed (its storage keeps a reference for the whole run).
    for (std::size_t t = 0; t < model_.inputs.size(); ++t) {
      std::size_t storage = 0;
      BUCKETSIM_RETURN_IF_ERROR(NewStorage(tensors_[t].bytes, Category::kActivation, storage));
      storage_of_[t] = storage;
    }
    for (int i = 0; i < options_.iterations; ++i) BUCKETSIM_RETURN_IF_ERROR(Iteration(i));
    return Status::Ok();
  }

 private:
  struct TensorInfo {
    Bytes bytes = 0;
    bool requires_grad = false;
    std::optional<std::size_t> alias;
    std::size_t forward_reads = 0;    // runs that read it in forward
    std::size_t recompute_reads = 0;  // runs of its own checkpointed region that read it
    bool region_output = false;       // made in a region, needed after it
    bool held = false;                // the loss or a `held` tensor
    bool released_later = false;      // a later run's `releases` names it
  };
  struct Storage {
    std::uint64_t alloc_id = 0;
    std::size_t refs = 0;
  };
  static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  // The program tensors of one forward op, looked up once so that replaying an iteration
  // touches no tensor id: its distinct inputs in order, its outputs, its saves (kNone: a new
  // tensor), and the distinct inputs its backward gives a gradient.
  struct GradInput {
    std::size_t tensor = 0;
    InputGrad grad = InputGrad::kNew;
  };
  struct OpTensors {
    std::vector<std::size_t> inputs, outputs, saves;
    std::vector<GradInput> grad_inputs;
  };
  enum Span { kForwardSpan, kBackwardSpan, kRecomputeSpan };
  static constexpr std::uint32_t kUninterned = std::numeric_limits<std::uint32_t>::max();

  // Tensor indexes: the inputs, then every run's outputs in order; the static facts of each.
  void IndexTensors() {
    for (const ProgramTensor& t : model_.inputs) AddTensor(t, false);
    std::size_t region = kNone;
    std::vector<std::size_t> region_of;  // per tensor: the region's begin, or kNone
    region_of.assign(model_.inputs.size(), kNone);
    for (std::size_t i = 0; i < model_.forward.size(); ++i) {
      const ForwardOp& op = model_.forward[i];
      if (op.kind == OpKind::kCheckpointBegin) region = i;
      if (op.kind == OpKind::kCheckpointEnd) region = kNone;
      OpTensors& indexes = op_tensors_[i];
      // A run may save its own outputs: saves are looked up once they are defined.
      const auto index_saves = [&] {
        for (const SavedTensor& save : op.saves) {
          indexes.saves.push_back(save.tensor.empty() ? kNone : index_.at(save.tensor));
        }
      };
      if (op.kind != OpKind::kRun) {
        index_saves();
        continue;
      }
      bool grad_flows = !op.uses.empty();
      for (const RunInput& input : op.inputs) {
        const std::size_t t = index_.at(input.tensor);
        if (input.grad != InputGrad::kNone && tensors_[t].requires_grad) grad_flows = true;
        if (std::find(indexes.inputs.begin(), indexes.inputs.end(), t) != indexes.inputs.end()) {
          continue;
        }
        indexes.inputs.push_back(t);
        ++tensors_[t].forward_reads;
        if (region != kNone && region_of[t] == region) ++tensors_[t].recompute_reads;
        if (region_of[t] != kNone && region_of[t] != region) {
          tensors_[t].region_output = true;
        }
      }
      for (const ProgramTensor& t : op.outputs) {
        indexes.outputs.push_back(tensors_.size());
        AddTensor(t, grad_flows);
        region_of.push_back(region);
      }
      index_saves();
      for (std::size_t t : indexes.saves) {
        if (t != kNone && region_of[t] != kNone && region_of[t] != region) {
          tensors_[t].region_output = true;
        }
      }
      // The inputs a backward gives a gradient, each once.
      for (const RunInput& input : op.inputs) {
        const std::size_t t = index_.at(input.tensor);
        if (input.grad == InputGrad::kNone || !tensors_[t].requires_grad) continue;
        const auto same = [t](const GradInput& g) { return g.tensor == t; };
        if (std::none_of(indexes.grad_inputs.begin(), indexes.grad_inputs.end(), same)) {
          indexes.grad_inputs.push_back({t, input.grad});
        }
      }
    }
    releases_of_.resize(model_.forward.size());
    for (std::size_t i = 0; i < model_.forward.size(); ++i) {
      for (const std::string& id : model_.forward[i].releases) {
        const std::size_t t = index_.at(id);
        tensors_[t].released_later = true;
        releases_of_[i].push_back(t);
      }
    }
    const auto hold = [&](const std::string& id) {
      const std::size_t t = index_.at(id);
      tensors_[t].held = true;
      if (region_of[t] != kNone) tensors_[t].region_output = true;
    };
    hold(model_.loss);
    for (const std::string& id : model_.held) hold(id);
    storage_of_.assign(tensors_.size(), kNone);
    grad_of_.assign(tensors_.size(), kNone);
    epoch_of_.assign(tensors_.size(), 0);
  }

  // With param_reads, each gradient target (a view, or a parameter without views) is a tensor
  // of its own after the program's: its gradient, in the instance's compute dtype, is made by
  // the backward of the runs that read it and summed like an activation's, until the
  // instance's post-backward hook takes it. Within one backward a parameter's gradients meet in
  // its AccumulateGrad node's InputBuffer (old + new, a new tensor in PyTorch 1.13: measured by
  // Tools.Oracle's mlp-shared); AccumulateGrad's own in-place `grad += new` is for a .grad left
  // by an earlier backward, which zero_grad(set_to_none=True) and fairscale's hook never leave.
  void IndexParamTargets() {
    run_targets_.resize(model_.forward.size());
    for (std::size_t i = 0; i < model_.forward.size(); ++i) {
      per_param_ = per_param_ || model_.forward[i].param_reads.has_value();
    }
    if (!per_param_) return;
    target_tensor_.resize(model_.instances.size());
    for (std::size_t f = 0; f < model_.instances.size(); ++f) {
      const GenInstance& instance = model_.instances[f];
      target_tensor_[f].resize(instance.params.size());
      ForEachTarget(instance, f, [&](const std::string&, ParamTarget at) {
        const GenParam& param = instance.params[at.param];
        const Numel numel = param.views.empty() ? param.numel : param.views[at.view].numel;
        TensorInfo info;
        info.bytes = numel * ComputeSize(f);
        info.requires_grad = true;
        target_tensor_[f][at.param].push_back(tensors_.size());
        tensors_.push_back(info);
      });
    }
    for (std::size_t i = 0; i < model_.forward.size(); ++i) {
      const ForwardOp& op = model_.forward[i];
      if (!op.param_reads) continue;
      for (const std::string& name : *op.param_reads) {
        const ParamTarget at = *ResolveParamRead(model_, op.uses, name);  // validated
        run_targets_[i].push_back(target_tensor_[at.instance][at.param][at.view]);
      }
    }
    storage_of_.resize(tensors_.size(), kNone);
    grad_of_.resize(tensors_.size(), kNone);
    epoch_of_.resize(tensors_.size(), 0);
  }

  void AddTensor(const ProgramTensor& t, bool grad_flows) {
    TensorInfo info;
    info.bytes = t.bytes;
    info.requires_grad = t.requires_grad.value_or(grad_flows && IsFloatingDType(t.dtype));
    if (!t.alias.empty()) info.alias = index_.at(t.alias);
    index_[t.id] = tensors_.size();
    tensors_.push_back(info);
  }

  Status Iteration(int iteration) {
    BUCKETSIM_RETURN_IF_ERROR(Emit(IterationEvent(static_cast<std::uint64_t>(iteration))));

    BUCKETSIM_RETURN_IF_ERROR(EnterPhase(Phase::kForward));
    ++epoch_;
    bool in_checkpoint = false;
    for (std::size_t i = 0; i < model_.forward.size(); ++i) {
      BUCKETSIM_RETURN_IF_ERROR(Forward(i, in_checkpoint));
    }
    BUCKETSIM_RETURN_IF_ERROR(Mark("after fwd"));

    BUCKETSIM_RETURN_IF_ERROR(EnterPhase(Phase::kBackward));
    // loss.backward() seeds the engine with ones_like(loss).
    const std::size_t loss = index_.at(model_.loss);
    BUCKETSIM_RETURN_IF_ERROR(NewStorage(tensors_[loss].bytes, Category::kGrad, grad_of_[loss]));
    for (std::size_t i = model_.forward.size(); i-- > 0;) BUCKETSIM_RETURN_IF_ERROR(Backward(i));
    // Gradients no node consumed (a tensor that requires grad but whose producer has no
    // backward) die with the graph.
    for (std::size_t& grad : grad_of_) BUCKETSIM_RETURN_IF_ERROR(ReleaseGrad(grad));
    BUCKETSIM_RETURN_IF_ERROR(Emit(FlushEvent()));
    BUCKETSIM_RETURN_IF_ERROR(Mark("after bwd"));

    BUCKETSIM_RETURN_IF_ERROR(EnterPhase(Phase::kStep));
    if (iteration == 0) BUCKETSIM_RETURN_IF_ERROR(AllocOptimizerState());
    BUCKETSIM_RETURN_IF_ERROR(Compute(header_.Intern("optimizer step"), StepFlops()));
    BUCKETSIM_RETURN_IF_ERROR(Mark("after step"));

    // set_to_none=True drops every gradient shard, so the next backward's reduced shards are
    // fresh (view or cast), never accumulated.
    BUCKETSIM_RETURN_IF_ERROR(EnterPhase(Phase::kZeroGrad));
    BUCKETSIM_RETURN_IF_ERROR(Emit(ZeroGradEvent(/*set_to_none=*/true)));
    for (std::uint64_t grad : kept_grads_) BUCKETSIM_RETURN_IF_ERROR(Free(grad));
    kept_grads_.clear();
    // The loop's own references (the loss, `held`) go when the iteration's variables do.
    for (std::size_t storage : iteration_holds_) BUCKETSIM_RETURN_IF_ERROR(Release(storage));
    iteration_holds_.clear();
    return Status::Ok();
  }

  // §2.3: gather, run, keep what backward needs, reshard. Inside a checkpointed region the
  // modules run under no_grad: what a run would save dies right after it.
  Status Forward(std::size_t i, bool& in_checkpoint) {
    const ForwardOp& op = model_.forward[i];
    switch (op.kind) {
      case OpKind::kGather:
        return AllGather(op.instance);
      case OpKind::kRun:
        BUCKETSIM_RETURN_IF_ERROR(Compute(SpanName(i, kForwardSpan), op.flops));
        return RunForward(i, in_checkpoint ? RunMode::kNoGrad : RunMode::kForward);
      case OpKind::kCheckpointBegin:
        in_checkpoint = true;
        return Save(i, saved_[i]);
      case OpKind::kCheckpointEnd:
        in_checkpoint = false;
        return Status::Ok();
      case OpKind::kEndForward:
        return ReshardsAfterForward(op.instance) ? FreeFullParams(op.instance) : Status::Ok();
    }
    return Status::Ok();
  }

  enum class RunMode { kForward, kNoGrad, kRecompute };

  // A run's new saves and outputs, in order, then its saves by reference (of its own outputs
  // too); then what it was the last to read is released.
  Status RunForward(std::size_t i, RunMode mode) {
    const ForwardOp& op = model_.forward[i];
    std::vector<std::size_t> transient;
    std::vector<std::size_t>& saved = mode == RunMode::kNoGrad ? transient : saved_[i];
    BUCKETSIM_RETURN_IF_ERROR(SaveNew(op, saved));
    std::vector<std::size_t> made;
    for (std::size_t t : op_tensors_[i].outputs) {
      const TensorInfo& info = tensors_[t];
      std::size_t storage = 0;
      if (info.alias) {
        storage = storage_of_[*info.alias];
        Acquire(storage);
      } else {
        BUCKETSIM_RETURN_IF_ERROR(NewStorage(info.bytes, Category::kActivation, storage));
      }
      storage_of_[t] = storage;
      epoch_of_[t] = epoch_;
      // The run holds its outputs until it returns (the reference above); the readers to come
      // and the loop or the region's backward hold them after that.
      const bool recompute = mode == RunMode::kRecompute;
      refs(storage) += recompute ? info.recompute_reads : info.forward_reads;
      if (!recompute && info.held) {
        Acquire(storage);
        iteration_holds_.push_back(storage);
      }
      if (recompute && info.region_output) {
        Acquire(storage);
        region_holds_.push_back(storage);
        region_grads_.insert(t);
      }
      // The model's code holds it (a Python variable) until the run that releases it.
      if (info.released_later) Acquire(storage);
      made.push_back(storage);
    }
    // Under no_grad nothing is saved: the new tensors die with the run, references keep nothing.
    if (mode == RunMode::kNoGrad) {
      for (auto it = transient.rbegin(); it != transient.rend(); ++it) {
        if (*it != kNone) BUCKETSIM_RETURN_IF_ERROR(Release(*it));
      }
    } else {
      SaveReferences(i, saved);
    }
    for (std::size_t t : op_tensors_[i].inputs) {
      if (t < model_.inputs.size() || epoch_of_[t] != epoch_) continue;
      BUCKETSIM_RETURN_IF_ERROR(Release(storage_of_[t]));
    }
    for (std::size_t storage : made) BUCKETSIM_RETURN_IF_ERROR(Release(storage));
    for (std::size_t t : releases_of_[i]) BUCKETSIM_RETURN_IF_ERROR(Release(storage_of_[t]));
    return Status::Ok();
  }

  // The op's saves, in order: the new tensors are allocated now, the references (kNone here)
  // are filled by SaveReferences once the op's outputs exist.
  Status SaveNew(const ForwardOp& op, std::vector<std::size_t>& storages) {
    for (const SavedTensor& save : op.saves) {
      std::size_t storage = kNone;
      if (save.tensor.empty()) {
        BUCKETSIM_RETURN_IF_ERROR(NewStorage(save.fresh.bytes, Category::kActivation, storage));
      }
      storages.push_back(storage);
    }
    return Status::Ok();
  }
  void SaveReferences(std::size_t i, std::vector<std::size_t>& storages) {
    const std::vector<std::size_t>& saves = op_tensors_[i].saves;
    const std::size_t first = storages.size() - saves.size();
    for (std::size_t k = 0; k < saves.size(); ++k) {
      if (saves[k] == kNone) continue;
      const std::size_t storage = storage_of_[saves[k]];
      Acquire(storage);
      storages[first + k] = storage;
    }
  }
  Status Save(std::size_t i, std::vector<std::size_t>& storages) {
    BUCKETSIM_RETURN_IF_ERROR(SaveNew(model_.forward[i], storages));
    SaveReferences(i, storages);
    return Status::Ok();
  }

  // §2.4, the forward program in reverse: the end of an instance's forward becomes its
  // pre-backward hook (re-gather), a run its backward, the beginning of its forward its
  // post-backward hook. A checkpointed region's backward first reruns its forward (with the
  // parameters gathered), which brings its saved tensors back for the backward proper.
  Status Backward(std::size_t i) {
    const ForwardOp& op = model_.forward[i];
    switch (op.kind) {
      case OpKind::kEndForward:
        return AllGather(op.instance);
      case OpKind::kCheckpointEnd:
        return Recompute(i);
      case OpKind::kRun:
        return RunBackward(i);
      case OpKind::kCheckpointBegin:
        return EndRegionBackward(i);
      case OpKind::kGather:
        return PostBackwardHook(op.instance);
    }
    return Status::Ok();
  }

  // One node of the backward, in the order of the class comment.
  Status RunBackward(std::size_t i) {
    const ForwardOp& op = model_.forward[i];
    const OpTensors& indexes = op_tensors_[i];
    bool reached = false;
    for (std::size_t t : indexes.outputs) reached = reached || grad_of_[t] != kNone;
    // The engine never runs a node no gradient reaches; its saved tensors go with the graph.
    if (!reached) return ReleaseAll(saved_[i]);

    BUCKETSIM_RETURN_IF_ERROR(Compute(SpanName(i, kBackwardSpan), op.BackwardFlops()));
    std::vector<std::pair<std::size_t, std::size_t>> produced;  // (tensor, gradient storage)
    if (!op.param_reads) {
      for (std::size_t f : op.uses) BUCKETSIM_RETURN_IF_ERROR(AllocFullGrads(f));
    }
    // The gradients of the parameters it reads (a matmul's backward makes the weight's; the
    // t() or view between them passes it on without memory), like its inputs' below. A run
    // with a workspace read cast copies of them (autocast): the cast nodes make them, below.
    const bool through_casts = !op.workspace.empty();
    if (!through_casts) BUCKETSIM_RETURN_IF_ERROR(MakeParamGrads(i, produced));
    const std::size_t first_output_grad =
        indexes.outputs.empty() ? kNone : grad_of_[indexes.outputs.front()];
    for (const auto& [t, kind] : indexes.grad_inputs) {
      std::size_t grad = first_output_grad;
      if (kind == InputGrad::kPass && grad != kNone) {
        Acquire(grad);
      } else {
        BUCKETSIM_RETURN_IF_ERROR(NewStorage(tensors_[t].bytes, Category::kGrad, grad));
      }
      produced.emplace_back(t, grad);
    }
    std::vector<std::size_t> workspace;
    for (const NewTensor& tensor : op.workspace) {
      std::size_t storage = 0;
      BUCKETSIM_RETURN_IF_ERROR(NewStorage(tensor.bytes, Category::kGrad, storage));
      workspace.push_back(storage);
    }
    // call_function returns: the incoming gradients go (a checkpointed region's backward keeps
    // the gradients of its outputs: they are its own arguments).
    for (std::size_t t : indexes.outputs) {
      if (!region_grads_.contains(t)) BUCKETSIM_RETURN_IF_ERROR(ReleaseGrad(grad_of_[t]));
    }
    BUCKETSIM_RETURN_IF_ERROR(ReleaseAll(saved_[i]));
    BUCKETSIM_RETURN_IF_ERROR(Deliver(produced));
    // The cast nodes (ToCopyBackward, nodes of their own that run next, after this one has
    // returned, its output gradients freed and its saves released) consume the workspace
    // gradients: with param_reads, each parameter's gradient in its dtype is made from them
    // before they go (without, the full gradients above stand for it).
    if (through_casts) {
      produced.clear();
      BUCKETSIM_RETURN_IF_ERROR(MakeParamGrads(i, produced));
      BUCKETSIM_RETURN_IF_ERROR(Deliver(produced));
    }
    return ReleaseAll(workspace);
  }

  // A gradient for each parameter run i reads (param_reads).
  Status MakeParamGrads(std::size_t i, std::vector<std::pair<std::size_t, std::size_t>>& produced) {
    for (std::size_t t : run_targets_[i]) {
      std::size_t grad = 0;
      BUCKETSIM_RETURN_IF_ERROR(NewStorage(tensors_[t].bytes, Category::kGrad, grad));
      produced.emplace_back(t, grad);
    }
    return Status::Ok();
  }

  // Produced gradients reach their input buffers: a tensor's first is kept, a second is
  // summed with it into a new tensor.
  Status Deliver(const std::vector<std::pair<std::size_t, std::size_t>>& produced) {
    for (const auto& [t, grad] : produced) {
      if (grad_of_[t] == kNone) {
        grad_of_[t] = grad;
        continue;
      }
      std::size_t sum = 0;
      BUCKETSIM_RETURN_IF_ERROR(NewStorage(tensors_[t].bytes, Category::kGrad, sum));
      BUCKETSIM_RETURN_IF_ERROR(Release(grad_of_[t]));
      BUCKETSIM_RETURN_IF_ERROR(Release(grad));
      grad_of_[t] = sum;
    }
    return Status::Ok();
  }

  // The region that ends at `end` rerun forward, its saves kept this time (torch.utils.
  // checkpoint's CheckpointFunction.backward: run_function under enable_grad, then
  // torch.autograd.backward(outputs, args), holding both until it returns).
  Status Recompute(std::size_t end) {
    std::size_t begin = end;
    while (model_.forward[begin].kind != OpKind::kCheckpointBegin) {
      BUCKETSIM_CHECK(begin > 0);
      --begin;
    }
    ++epoch_;
    for (std::size_t i = begin + 1; i < end; ++i) {
      const ForwardOp& op = model_.forward[i];
      if (op.kind == OpKind::kRun) {
        BUCKETSIM_RETURN_IF_ERROR(Compute(SpanName(i, kRecomputeSpan), op.flops));
        BUCKETSIM_RETURN_IF_ERROR(RunForward(i, RunMode::kRecompute));
      } else if (op.kind == OpKind::kGather) {
        BUCKETSIM_RETURN_IF_ERROR(AllGather(op.instance));
      } else if (op.kind == OpKind::kEndForward && ReshardsAfterForward(op.instance)) {
        BUCKETSIM_RETURN_IF_ERROR(FreeFullParams(op.instance));
      }
    }
    return Status::Ok();
  }

  // CheckpointFunction.backward returns: the gradients of the region's outputs, its recomputed
  // outputs and what the region kept (its inputs) go.
  Status EndRegionBackward(std::size_t begin) {
    for (std::size_t t : region_grads_) BUCKETSIM_RETURN_IF_ERROR(ReleaseGrad(grad_of_[t]));
    region_grads_.clear();
    BUCKETSIM_RETURN_IF_ERROR(ReleaseAll(region_holds_));
    return ReleaseAll(saved_[begin]);
  }

  // Without param_reads: autograd computes the full gradient of an instance's parameters
  // (numel x compute size, in the default stream) in the backward of the first op, in
  // backward order, that uses them.
  Status AllocFullGrads(std::size_t f) {
    if (!grad_ids_[f].empty()) return Status::Ok();
    for (std::size_t p = 0; p < model_.instances[f].params.size(); ++p) {
      BUCKETSIM_RETURN_IF_ERROR(AllocFullGrad(f, p));
    }
    return Status::Ok();
  }
  Status AllocFullGrad(std::size_t f, std::size_t p) {
    std::uint64_t id = 0;
    BUCKETSIM_RETURN_IF_ERROR(Alloc(model_.instances[f].params[p].numel * ComputeSize(f),
                                    kDefaultStream, Category::kGrad, id));
    grad_ids_[f].push_back(id);
    return Status::Ok();
  }

  // With param_reads: parameter p's gradient as its AccumulateGrad node receives it (and keeps
  // it as .grad: accumulate_grad.h steals a gradient nothing else references when .grad is
  // None, which zero_grad(set_to_none=True) and fairscale's hook make it at every backward).
  // A parameter of its own: the gradient its readers' backward made (summed if several).
  // A flat parameter: its views' gradients reach SplitWithSizesBackward (fairscale's
  // FlattenParamsWrapper makes the views with split + view), which runs once all have arrived,
  // after the instance's other backward nodes (it was made when the instance's forward began,
  // and the engine runs ready nodes by decreasing sequence number): split_with_sizes_backward
  // makes zeros for the views no run read, then at::cat's result, the flat gradient, while the
  // view gradients are alive (the ~2x of reference/fsdp_semantics.md §6.2, PyTorch PR
  // #117323); the zeros go when it returns, the view gradients when the engine drops its inputs.
  Status CompleteParamGrad(std::size_t f, std::size_t p) {
    const GenParam& param = model_.instances[f].params[p];
    const std::vector<std::size_t>& targets = target_tensor_[f][p];
    const bool reached = std::any_of(targets.begin(), targets.end(),
                                     [&](std::size_t t) { return grad_of_[t] != kNone; });
    // No backward read it (a dead branch): a zero gradient stands in, as without param_reads.
    if (!reached) return AllocFullGrad(f, p);
    if (param.views.empty()) {
      grad_ids_[f].push_back(TakeStorage(std::exchange(grad_of_[targets.front()], kNone)));
      return Status::Ok();
    }
    std::vector<std::uint64_t> zeros;
    for (std::size_t v = 0; v < targets.size(); ++v) {
      if (grad_of_[targets[v]] != kNone) continue;
      std::uint64_t id = 0;
      BUCKETSIM_RETURN_IF_ERROR(
          Alloc(tensors_[targets[v]].bytes, kDefaultStream, Category::kGrad, id));
      zeros.push_back(id);
    }
    BUCKETSIM_RETURN_IF_ERROR(AllocFullGrad(f, p));
    for (std::uint64_t id : zeros) BUCKETSIM_RETURN_IF_ERROR(Free(id));
    for (std::size_t t : targets) BUCKETSIM_RETURN_IF_ERROR(ReleaseGrad(grad_of_[t]));
    return Status::Ok();
  }

  // Per parameter (fairscale registers one hook per parameter): free its gathered copy, reduce
  // its gradient, then the full gradient dies when the hook returns. HEAD (#784) sets
  // param.grad = None before the reduce is queued, whether it is bucketed or bypassed.
  Status PostBackwardHook(std::size_t f) {
    const std::vector<GenParam>& params = model_.instances[f].params;
    if (params.empty()) return Status::Ok();
    // No backward reached a run that uses them (a dead branch): a zero gradient stands in, so
    // every parameter is still reduced once.
    if (!per_param_) BUCKETSIM_RETURN_IF_ERROR(AllocFullGrads(f));
    for (std::size_t p = 0; p < params.size(); ++p) {
      if (per_param_) BUCKETSIM_RETURN_IF_ERROR(CompleteParamGrad(f, p));
      const std::uint64_t full_param = std::exchange(full_param_ids_[f][p], 0);
      if (full_param != 0) BUCKETSIM_RETURN_IF_ERROR(Free(full_param));
      if (Unsharded()) {
        BUCKETSIM_RETURN_IF_ERROR(KeepGradient(f, p));
        continue;
      }
      BUCKETSIM_RETURN_IF_ERROR(ReduceScatter(f, p));
      BUCKETSIM_RETURN_IF_ERROR(Free(grad_ids_[f][p]));
    }
    full_param_ids_[f].clear();
    grad_ids_[f].clear();
    return Status::Ok();
  }

  Status NewStorage(Bytes bytes, Category category, std::size_t& storage) {
    std::uint64_t id = 0;
    BUCKETSIM_RETURN_IF_ERROR(Alloc(bytes, kDefaultStream, category, id));
    if (free_storages_.empty()) {
      storage = storages_.size();
      storages_.push_back({id, 1});
    } else {
      storage = free_storages_.back();
      free_storages_.pop_back();
      storages_[storage] = {id, 1};
    }
    return Status::Ok();
  }
  std::size_t& refs(std::size_t storage) { return storages_[storage].refs; }
  // The allocation of a storage held once, handed over to whoever frees it by id.
  std::uint64_t TakeStorage(std::size_t storage) {
    BUCKETSIM_CHECK(storage != kNone && refs(storage) == 1);
    refs(storage) = 0;
    free_storages_.push_back(storage);  // the allocation lives on; the slot is free
    return storages_[storage].alloc_id;
  }
  void Acquire(std::size_t storage) {
    BUCKETSIM_CHECK(storage != kNone && refs(storage) > 0);
    ++refs(storage);
  }
  Status Release(std::size_t storage) {
    BUCKETSIM_CHECK(storage != kNone && refs(storage) > 0);
    if (--refs(storage) != 0) return Status::Ok();
    free_storages_.push_back(storage);
    return Free(storages_[storage].alloc_id);
  }
  // Releases `storages` newest first (autograd releases saved tensors from the last backwards).
  Status ReleaseAll(std::vector<std::size_t>& storages) {
    for (auto it = storages.rbegin(); it != storages.rend(); ++it) {
      BUCKETSIM_RETURN_IF_ERROR(Release(*it));
    }
    storages.clear();
    return Status::Ok();
  }
  Status ReleaseGrad(std::size_t& grad) {
    if (grad == kNone) return Status::Ok();
    return Release(std::exchange(grad, kNone));
  }

  // One rank: the post-reduction hook gets the full gradient itself and keeps it as the
  // gradient until zero_grad; with mixed precision it is cast to fp32 first (a new tensor of
  // numel x 4, the compute-dtype gradient then dies).
  Status KeepGradient(std::size_t f, std::size_t p) {
    std::uint64_t grad = grad_ids_[f][p];
    if (MixedPrecision(f)) {
      std::uint64_t fp32 = 0;
      BUCKETSIM_RETURN_IF_ERROR(Alloc(model_.instances[f].params[p].numel * kFp32Size,
                                      kPostBackwardStream, Category::kGrad, fp32));
      BUCKETSIM_RETURN_IF_ERROR(Free(grad));
      grad = fp32;
    }
    kept_grads_.push_back(grad);
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
    if (Unsharded()) return UseFullParams(f);
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
    for (std::uint64_t id : full_param_ids_[f]) {
      if (id != 0) BUCKETSIM_RETURN_IF_ERROR(Free(id));
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
    for (const GenParam& param : model_.instances[f].params) {
      std::uint64_t id = 0;
      if (MixedPrecision(f)) {
        BUCKETSIM_RETURN_IF_ERROR(
            Alloc(param.numel * ComputeSize(f), kAllGatherStream, Category::kAllGather, id));
      }
      full_param_ids_[f].push_back(id);
    }
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

  GroupId GroupOf(std::size_t f) const { return groups_[f]; }

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

  // Span `name` (interned) on the default stream; FLOPs at the device's sustained rate.
  Status Compute(std::uint32_t name, double flops) {
    return Emit(ComputeEvent(kDefaultStream, flops / (options_.device_tflops * 1e6), name));
  }

  // "forward NAME", "backward NAME", "recompute NAME" of op i, interned the first time it is
  // emitted (so the header's names come in the order they are first used).
  std::uint32_t SpanName(std::size_t i, Span span) {
    static constexpr std::string_view kVerbs[] = {"forward", "backward", "recompute"};
    std::uint32_t& name = span_names_[i][span];
    if (name == kUninterned) {
      name = header_.Intern(fmt::format("{} {}", kVerbs[span], model_.forward[i].name));
    }
    return name;
  }

  Status Mark(std::string_view name) { return Emit(MarkEvent(header_.Intern(name))); }

  const FsdpModel& model_;
  const GenOptions& options_;
  TraceHeader& header_;
  EventSink& sink_;
  const Numel shard_group_size_;
  const std::vector<GroupId> groups_;
  EventIndex next_index_ = 0;
  std::uint64_t next_alloc_id_ = 1;
  std::vector<std::vector<std::uint64_t>> full_param_ids_;  // per instance; empty: resharded
  std::vector<std::vector<std::uint64_t>> grad_ids_;  // per instance, while backward holds them
  std::vector<std::uint64_t> kept_grads_;             // one rank: the gradients, until zero_grad
  std::vector<std::vector<std::size_t>> saved_;       // per forward op: the storages it saved
  std::map<std::string, std::size_t, std::less<>> index_;  // tensor id -> index
  std::vector<TensorInfo> tensors_;
  // The storages alive now; a freed one's slot is taken by the next storage made, so memory
  // is bounded by the model, not by the number of iterations.
  std::vector<Storage> storages_;
  std::vector<std::size_t> free_storages_;  // slots of freed storages (no refs)
  std::vector<std::size_t> storage_of_;     // per tensor: its storage now, kNone before it is made
  std::vector<std::size_t> grad_of_;        // per tensor: its gradient's storage in backward
  std::vector<std::uint64_t> epoch_of_;     // per tensor: the forward or recompute that made it
  std::vector<OpTensors> op_tensors_;       // per forward op
  std::vector<std::array<std::uint32_t, 3>> span_names_;  // per forward op and Span
  std::uint64_t epoch_ = 0;
  std::vector<std::size_t> iteration_holds_;  // the loop's references, released after zero_grad
  std::vector<std::size_t> region_holds_;     // a region backward's recomputed outputs
  std::set<std::size_t> region_grads_;        // ... and the gradients of its outputs it keeps
  bool per_param_ = false;                    // the program has param_reads
  // [instance][param]: the tensor index of each gradient target (its views, or itself)
  std::vector<std::vector<std::vector<std::size_t>>> target_tensor_;
  std::vector<std::vector<std::size_t>> run_targets_;  // per forward op: the targets it reads
  std::vector<std::vector<std::size_t>> releases_of_;  // per forward op: the tensors it releases
};

}  // namespace

Status EmitFsdpTrace(const FsdpModel& model, const GenOptions& options, EventSink& sink) {
  BUCKETSIM_RETURN_IF_ERROR(ValidateGenOptions(options));
  BUCKETSIM_RETURN_IF_ERROR(ValidateProgram(model));
  // Sinks keep a pointer to the header and names are interned while events stream, so it
  // lives here until OnEnd has returned.
  TraceHeader header;
  BUCKETSIM_RETURN_IF_ERROR(BuildHeader(model, options, header));
  BUCKETSIM_RETURN_IF_ERROR(sink.OnHeader(header));
  BUCKETSIM_RETURN_IF_ERROR(FsdpTrace(model, options, header, sink).Run());
  return sink.OnEnd();
}

}  // namespace bucketsim
