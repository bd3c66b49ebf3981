#include "gen/fsdp_emitter.h"

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

#include "gen/fsdp_impl_options.h"
#include "gen/fsdp_implementation.h"
#include "gen/param_target.h"
#include "gen/program_boundary_casts.h"
#include "gen/program_regions.h"

namespace bucketsim {

std::unique_ptr<FsdpImplementation> MakeFsdpImplementation(const ModelProgram& model,
                                                           const GenOptions& options,
                                                           TraceEmitter& trace) {
  return OptionsOf(options.fsdp_impl).make(model, options, trace);
}

namespace {

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
class FsdpTrace final : public TraceEmitter {
 public:
  FsdpTrace(const ModelProgram& model, const GenOptions& options, TraceHeader& header,
            EventSink& sink)
      : model_(model),
        options_(options),
        rates_(options),
        header_(header),
        sink_(sink),
        impl_(MakeFsdpImplementation(model, options, *this)),
        grad_ids_(model.units.size()),
        saved_(model.forward.size()),
        op_tensors_(model.forward.size()),
        span_names_(model.forward.size(), {kUninterned, kUninterned, kUninterned}),
        regions_(FindCheckpointRegions(model)),
        cached_outputs_(model.forward.size()),
        cached_saves_(model.forward.size()) {
    IndexTensors();
    IndexParamTargets();
  }

  // The header: the run's shape here, the rest the implementation's.
  Status BuildHeader() {
    if (!impl_) {
      return InvalidArgument(fmt::format("--fsdp-impl {} is not in this build's emitter",
                                         FsdpImplName(options_.fsdp_impl)));
    }
    header_.world_size = options_.world_size;
    header_.rank = options_.rank;
    header_.bucket_cap_mb = options_.bucket_cap_mb;
    header_.description = model_.description;
    // An implementation with a PyTorch setting names itself (fairscale's traces never did).
    if (const FsdpImplOptions& entry = OptionsOf(options_.fsdp_impl); entry.setting) {
      header_.fsdp_impl = options_.fsdp_impl;
      header_.fsdp_setting = entry.setting(options_);
    }
    BUCKETSIM_RETURN_IF_ERROR(impl_->BuildHeader(header_));
    return header_.Finalize();
  }

  Status Run() {
    BUCKETSIM_RETURN_IF_ERROR(impl_->Init());
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
    // ... a run after its checkpointed region: a cache holds it (autocast's weight copies) past
    // the region's end in forward; in a recompute, until the recompute ends.
    bool released_after_region = false;
    std::size_t releaser = 0;  // with released_later: the op that releases it
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
    // What it saves by reference that it neither reads nor makes (a checkpoint_begin's saves,
    // above all): read here too, so alive here even past its last reader.
    std::vector<std::size_t> save_reads;
    std::vector<GradInput> grad_inputs;
  };
  enum Span { kForwardSpan, kBackwardSpan, kRecomputeSpan };
  static constexpr std::uint32_t kUninterned = std::numeric_limits<std::uint32_t>::max();

  // Tensor indexes: the inputs, then every run's outputs in order; the static facts of each.
  void IndexTensors() {
    for (const ProgramTensor& t : model_.inputs) AddTensor(t, false);
    std::vector<std::size_t> region_of;  // per tensor: the region's begin, or kNone
    region_of.assign(model_.inputs.size(), kNone);
    for (std::size_t i = 0; i < model_.forward.size(); ++i) {
      const ForwardOp& op = model_.forward[i];
      const std::size_t region = regions_.region[i];
      OpTensors& indexes = op_tensors_[i];
      // A run may save its own outputs: saves are looked up once they are defined. A save of a
      // tensor made in another region makes it that region's output; a save of one the op
      // neither reads nor makes is a read of it (save_reads).
      const auto index_saves = [&] {
        for (const SavedTensor& save : op.saves) {
          indexes.saves.push_back(save.tensor.empty() ? kNone : index_.at(save.tensor));
        }
        for (std::size_t t : indexes.saves) {
          if (t == kNone) continue;
          if (region_of[t] != kNone && region_of[t] != region) tensors_[t].region_output = true;
          const auto among = [t](const std::vector<std::size_t>& v) {
            return std::find(v.begin(), v.end(), t) != v.end();
          };
          if (among(indexes.inputs) || among(indexes.outputs) || among(indexes.save_reads)) {
            continue;
          }
          indexes.save_reads.push_back(t);
          ++tensors_[t].forward_reads;
          if (regions_.Reruns(i) && region_of[t] == region) ++tensors_[t].recompute_reads;
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
        if (regions_.Reruns(i) && region_of[t] == region) ++tensors_[t].recompute_reads;
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
        tensors_[t].released_after_region = region_of[t] != regions_.region[i];
        tensors_[t].releaser = i;
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
    target_tensor_.resize(model_.units.size());
    for (std::size_t f = 0; f < model_.units.size(); ++f) {
      const FsdpUnit& instance = model_.units[f];
      target_tensor_[f].resize(instance.params.size());
      ForEachTarget(instance, f, [&](const std::string&, ParamTarget at) {
        const GenParam& param = instance.params[at.param];
        const Numel numel = param.views.empty() ? param.numel : param.views[at.view].numel;
        TensorInfo info;
        info.bytes = numel * impl_->ComputeSize(f);
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
    BUCKETSIM_RETURN_IF_ERROR(impl_->ForwardBegins());
    ++epoch_;
    bool in_checkpoint = false;
    std::size_t returning = kNone;  // the unit whose post-forward hook has yet to return
    for (std::size_t i = 0; i < model_.forward.size(); ++i) {
      const ForwardOp& op = model_.forward[i];
      if (returning != kNone && !op.in_post_forward_hook) {
        BUCKETSIM_RETURN_IF_ERROR(PostForwardReturns(std::exchange(returning, kNone)));
      }
      BUCKETSIM_RETURN_IF_ERROR(Forward(i, in_checkpoint));
      if (op.kind == OpKind::kEndForward) returning = op.instance;
    }
    if (returning != kNone) BUCKETSIM_RETURN_IF_ERROR(PostForwardReturns(returning));
    BUCKETSIM_RETURN_IF_ERROR(Mark("after fwd"));

    BUCKETSIM_RETURN_IF_ERROR(EnterPhase(Phase::kBackward));
    // loss.backward() seeds the engine with ones_like(loss).
    const std::size_t loss = index_.at(model_.loss);
    BUCKETSIM_RETURN_IF_ERROR(NewStorage(tensors_[loss].bytes, Category::kGrad, grad_of_[loss]));
    for (std::size_t i = model_.forward.size(); i-- > 0;) BUCKETSIM_RETURN_IF_ERROR(Backward(i));
    // Gradients no node consumed (a tensor that requires grad but whose producer has no
    // backward) die with the graph.
    for (std::size_t& grad : grad_of_) BUCKETSIM_RETURN_IF_ERROR(ReleaseGrad(grad));
    BUCKETSIM_RETURN_IF_ERROR(impl_->EndBackward());
    BUCKETSIM_RETURN_IF_ERROR(Mark("after bwd"));

    BUCKETSIM_RETURN_IF_ERROR(EnterPhase(Phase::kStep));
    BUCKETSIM_RETURN_IF_ERROR(impl_->Step(iteration));
    BUCKETSIM_RETURN_IF_ERROR(Mark("after step"));

    BUCKETSIM_RETURN_IF_ERROR(EnterPhase(Phase::kZeroGrad));
    BUCKETSIM_RETURN_IF_ERROR(impl_->ZeroGrad());
    // The loop's own references (the loss, `held`) go when the iteration's variables do.
    for (std::size_t storage : iteration_holds_) BUCKETSIM_RETURN_IF_ERROR(Release(storage));
    iteration_holds_.clear();
    return Status::Ok();
  }

  // Gather, run, keep what backward needs, reshard (the implementation's hooks). Inside a
  // checkpointed region the modules run under no_grad: what a run would save dies right after it.
  Status Forward(std::size_t i, bool& in_checkpoint) {
    const ForwardOp& op = model_.forward[i];
    switch (op.kind) {
      case OpKind::kGather:
        return impl_->PreForward(op.instance, Pass::kForward);
      case OpKind::kRun:
        BUCKETSIM_RETURN_IF_ERROR(ComputeRun(i, kForwardSpan));
        return RunForward(i, in_checkpoint ? RunMode::kNoGrad : RunMode::kForward);
      case OpKind::kCheckpointBegin:
        in_checkpoint = true;
        BUCKETSIM_RETURN_IF_ERROR(Save(i, saved_[i]));
        return ReleaseReads(op_tensors_[i].save_reads);
      case OpKind::kCheckpointEnd: {
        in_checkpoint = false;
        // A region whose runs save nothing has no recompute: nothing keeps its frame, and its
        // cache goes with it now.
        const std::size_t begin = regions_.region[i];
        return regions_.stop[begin] == begin ? ReleaseCache(begin) : Status::Ok();
      }
      case OpKind::kEndForward:
        return impl_->PostForward(op.instance, Pass::kForward);
    }
    return Status::Ok();
  }

  enum class RunMode { kForward, kNoGrad, kRecompute };

  // Unit f's post-forward hook returns (after the runs it made), then _call_impl lets go of
  // the module's output those runs read.
  Status PostForwardReturns(std::size_t f) {
    BUCKETSIM_RETURN_IF_ERROR(impl_->PostForwardReturns(f));
    return ReleaseReads(std::exchange(hook_reads_, {}));
  }

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
      if (recompute && info.region_output && model_.forward[recomputing_].reentrant) {
        Acquire(storage);
        region_holds_.push_back(storage);
        region_grads_.insert(t);
      }
      // The model's code holds it (a Python variable) until the run that releases it; what a
      // cache holds past its region, a recompute holds until it ends.
      if (info.released_later) Acquire(storage);
      // A recompute that stops before the releaser (non-reentrant: the function is abandoned
      // there) drops it at its end as well.
      if (recompute && info.released_later &&
          (info.released_after_region || info.releaser > regions_.stop[recomputing_])) {
        recompute_holds_.push_back(storage);
      }
      made.push_back(storage);
    }
    // Under no_grad nothing is saved: the new tensors die with the run, references keep nothing;
    // but what selective checkpointing's policy saves, its cache keeps: the whole output.
    if (mode == RunMode::kNoGrad && op.policy_saved) {
      for (std::size_t storage : made) {
        Acquire(storage);
        cached_outputs_[i].push_back(storage);
      }
      for (std::size_t storage : transient) {
        if (storage != kNone) cached_saves_[i].push_back(storage);
      }
    } else if (mode == RunMode::kNoGrad) {
      for (auto it = transient.rbegin(); it != transient.rend(); ++it) {
        if (*it != kNone) BUCKETSIM_RETURN_IF_ERROR(Release(*it));
      }
    } else {
      SaveReferences(i, saved);
    }
    BUCKETSIM_RETURN_IF_ERROR(ReleaseRunReads(i));
    for (std::size_t storage : made) BUCKETSIM_RETURN_IF_ERROR(Release(storage));
    return ReleaseNamed(i, mode);
  }

  // Run i has read its inputs and its saves by reference: each read gives up its reference
  // (ReleaseReads). What a post-forward hook reads is the module's output, which
  // nn.Module._call_impl holds (`result`) until the hook has returned.
  Status ReleaseRunReads(std::size_t i) {
    const ForwardOp& op = model_.forward[i];
    if (op.in_post_forward_hook) {
      const std::vector<std::size_t>& reads = op_tensors_[i].inputs;
      hook_reads_.insert(hook_reads_.end(), reads.begin(), reads.end());
    } else {
      BUCKETSIM_RETURN_IF_ERROR(ReleaseReads(op_tensors_[i].inputs));
    }
    return ReleaseReads(op_tensors_[i].save_reads);
  }

  // The tensors run i's `releases` names: the model's code lets go of them. A recompute
  // releases only what it made itself (the rest went at the region's end, or is a cached
  // output, made in forward).
  Status ReleaseNamed(std::size_t i, RunMode mode) {
    for (std::size_t t : releases_of_[i]) {
      if (mode == RunMode::kRecompute &&
          (tensors_[t].released_after_region || epoch_of_[t] != epoch_)) {
        continue;
      }
      BUCKETSIM_RETURN_IF_ERROR(Release(storage_of_[t]));
    }
    return Status::Ok();
  }

  // Run i in a recompute, its policy having saved it (or where an early stop ends before its
  // kernel, with nothing cached): not run, its outputs the cache's (the
  // forward's storages); autograd's node for it saves as in forward, its new saves the cached
  // ones. The cache lets go of the outputs when the recompute ends (popped, then held only by
  // the recomputed function until it returns or is abandoned), unless `popped` is false: the
  // run an early stop ends at, whose inputs autograd packs before the op is dispatched, the
  // last pack raising _StopRecomputationError, so that its cache entry stays until the frame
  // dies (torch 2.6 torch/utils/checkpoint.py: _checkpoint_hook.pack_hook, then
  // _CachedTorchDispatchMode never sees the op).
  Status ServeFromCache(std::size_t i, bool popped) {
    const ForwardOp& op = model_.forward[i];
    std::vector<std::size_t>& saved = saved_[i];
    std::size_t fresh = 0;
    for (const SavedTensor& save : op.saves) {
      saved.push_back(save.tensor.empty() ? cached_saves_[i][fresh++] : kNone);
    }
    cached_saves_[i].clear();
    SaveReferences(i, saved);
    if (popped) {
      recompute_holds_.insert(recompute_holds_.end(), cached_outputs_[i].begin(),
                              cached_outputs_[i].end());
      cached_outputs_[i].clear();
    }
    BUCKETSIM_RETURN_IF_ERROR(ReleaseRunReads(i));
    return ReleaseNamed(i, RunMode::kRecompute);
  }

  // Whether run i saves only tensors made before it (its inputs, earlier tensors): autograd
  // packs them before the kernel runs. A save of its own output, or a new one, comes after.
  bool SavesOnlyItsInputs(std::size_t i) const {
    const OpTensors& tensors = op_tensors_[i];
    for (std::size_t t : tensors.saves) {
      if (t == kNone ||
          std::find(tensors.outputs.begin(), tensors.outputs.end(), t) != tensors.outputs.end()) {
        return false;
      }
    }
    return !tensors.saves.empty();
  }

  // What the cache of the region that begins at `begin` still holds (the calls its recompute
  // did not reach, or all, without one) goes: the region's frame, which owns it, dies.
  Status ReleaseCache(std::size_t begin) {
    for (std::size_t i = begin + 1; i < model_.forward.size() && regions_.region[i] == begin; ++i) {
      BUCKETSIM_RETURN_IF_ERROR(ReleaseAll(cached_saves_[i]));
      BUCKETSIM_RETURN_IF_ERROR(ReleaseAll(cached_outputs_[i]));
    }
    return Status::Ok();
  }

  // An op has read these: each made by this forward or recompute (epoch) gives up the
  // reference its reads were counted in (forward_reads, recompute_reads).
  Status ReleaseReads(const std::vector<std::size_t>& tensors) {
    for (std::size_t t : tensors) {
      if (t < model_.inputs.size() || epoch_of_[t] != epoch_) continue;
      BUCKETSIM_RETURN_IF_ERROR(Release(storage_of_[t]));
    }
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

  // The forward program in reverse: the end of an instance's forward becomes its pre-backward
  // hook (re-gather), a run its backward, the beginning of its forward its post-backward hook. A
  // checkpointed region's backward first reruns its forward (with the parameters gathered), which
  // brings its saved tensors back for the backward proper.
  Status Backward(std::size_t i) {
    const ForwardOp& op = model_.forward[i];
    switch (op.kind) {
      case OpKind::kEndForward:
        return impl_->PreBackward(op.instance);
      case OpKind::kCheckpointEnd:
        return model_.forward[regions_.region[i]].reentrant ? Recompute(i) : Status::Ok();
      case OpKind::kRun:
        if (regions_.trigger[i] != kNone) BUCKETSIM_RETURN_IF_ERROR(Recompute(regions_.trigger[i]));
        return RunBackward(i);
      case OpKind::kCheckpointBegin:
        return EndRegionBackward(i);
      case OpKind::kGather:
        return impl_->PostBackward(op.instance);
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
    if (!reached) return ReleaseSaves(i);

    BUCKETSIM_RETURN_IF_ERROR(ComputeRun(i, kBackwardSpan));
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
    BUCKETSIM_RETURN_IF_ERROR(ReleaseSaves(i));
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

  // Node i releases its saved tensors (release_variables, before its outputs reach the next
  // input buffers); with the last of a non-reentrant region's, the region's own go.
  Status ReleaseSaves(std::size_t i) {
    BUCKETSIM_RETURN_IF_ERROR(ReleaseAll(saved_[i]));
    const std::size_t frame = regions_.frame_release[i];
    if (frame == kNone) return Status::Ok();
    BUCKETSIM_RETURN_IF_ERROR(ReleaseCache(frame));
    return ReleaseAll(saved_[frame]);
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
  // A non-reentrant region reruns only up to its stop (gen/program_regions.h), and nothing holds
  // its outputs: autograd's own graph runs its backward, node by node.
  Status Recompute(std::size_t end) {
    recomputing_ = regions_.region[end];
    ++epoch_;
    for (std::size_t i = recomputing_ + 1; i <= regions_.stop[recomputing_]; ++i) {
      const ForwardOp& op = model_.forward[i];
      const ForwardOp& begin = model_.forward[recomputing_];
      const bool stops_here =
          i == regions_.stop[recomputing_] && !begin.reentrant && begin.early_stop;
      if (op.kind == OpKind::kRun && (op.policy_saved || (stops_here && SavesOnlyItsInputs(i)))) {
        // Cached, or the run the early stop ends at whose saves autograd packs before its
        // kernel runs: the last pack raises _StopRecomputationError, the kernel never runs
        // (reference/cuda_from_cpu.md 1.4: the recompute stops right before a Llama block's w2
        // mm).
        BUCKETSIM_RETURN_IF_ERROR(ServeFromCache(i, /*popped=*/!stops_here));
      } else if (op.kind == OpKind::kRun) {
        BUCKETSIM_RETURN_IF_ERROR(ComputeRun(i, kRecomputeSpan));
        BUCKETSIM_RETURN_IF_ERROR(RunForward(i, RunMode::kRecompute));
      } else if (op.kind == OpKind::kGather) {
        BUCKETSIM_RETURN_IF_ERROR(impl_->PreForward(op.instance, Pass::kRecompute));
      } else if (op.kind == OpKind::kEndForward) {
        BUCKETSIM_RETURN_IF_ERROR(impl_->PostForward(op.instance, Pass::kRecompute));
      }
    }
    // The recompute's autocast exits: its cache lets go of what it held.
    return ReleaseAll(recompute_holds_);
  }

  // CheckpointFunction.backward returns: the gradients of the region's outputs, its recomputed
  // outputs and what the region kept (its inputs) go. A non-reentrant region's kept tensors
  // went earlier, with its frame (ReleaseSaves).
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
    for (std::size_t p = 0; p < model_.units[f].params.size(); ++p) {
      BUCKETSIM_RETURN_IF_ERROR(AllocFullGrad(f, p));
    }
    return Status::Ok();
  }
  Status AllocFullGrad(std::size_t f, std::size_t p) {
    std::uint64_t id = 0;
    const Numel numel = model_.units[f].params[p].numel + impl_->GradPadding(f, p);
    BUCKETSIM_RETURN_IF_ERROR(
        Alloc(numel * impl_->ComputeSize(f), kDefaultStream, Category::kGrad, id));
    grad_ids_[f].push_back(id);
    return Status::Ok();
  }

  // TraceEmitter: the gradient of parameter p of unit f, handed to the implementation.
  Status TakeParamGrad(std::size_t f, std::size_t p, std::uint64_t& id) override {
    const std::size_t params = model_.units[f].params.size();
    BUCKETSIM_CHECK(p < params);
    if (per_param_) {
      BUCKETSIM_CHECK(grad_ids_[f].size() == p);
      BUCKETSIM_RETURN_IF_ERROR(CompleteParamGrad(f, p));
    } else {
      // No backward reached a run that uses them (a dead branch): a zero gradient stands in,
      // so every parameter is still reduced once.
      BUCKETSIM_RETURN_IF_ERROR(AllocFullGrads(f));
    }
    id = std::exchange(grad_ids_[f][p], 0);
    BUCKETSIM_CHECK(id != 0);
    if (p + 1 == params) grad_ids_[f].clear();
    return Status::Ok();
  }

  // TraceEmitter: the gradients of parameter p's views, each handed over as autograd made it.
  Status TakeViewGrads(std::size_t f, std::size_t p, std::vector<std::uint64_t>& ids) override {
    const std::size_t params = model_.units[f].params.size();
    BUCKETSIM_CHECK(p < params);
    ids.clear();
    if (!per_param_) {
      BUCKETSIM_RETURN_IF_ERROR(AllocFullGrads(f));
      ids.push_back(std::exchange(grad_ids_[f][p], 0));
    } else {
      for (std::size_t t : target_tensor_[f][p]) {
        const std::size_t grad = std::exchange(grad_of_[t], kNone);
        ids.push_back(grad == kNone ? 0 : TakeStorage(grad));
      }
    }
    if (p + 1 == params) grad_ids_[f].clear();
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
    const GenParam& param = model_.units[f].params[p];
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
    // The padding is split off the flat parameter like a view no run reads.
    if (const Numel padding = impl_->GradPadding(f, p); padding > 0) {
      std::uint64_t id = 0;
      BUCKETSIM_RETURN_IF_ERROR(
          Alloc(padding * impl_->ComputeSize(f), kDefaultStream, Category::kGrad, id));
      zeros.push_back(id);
    }
    BUCKETSIM_RETURN_IF_ERROR(AllocFullGrad(f, p));
    for (std::uint64_t id : zeros) BUCKETSIM_RETURN_IF_ERROR(Free(id));
    for (std::size_t t : targets) BUCKETSIM_RETURN_IF_ERROR(ReleaseGrad(grad_of_[t]));
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

  // TraceEmitter.
  Status Emit(Event event) override {
    event.index = next_index_++;
    return sink_.OnEvent(event);
  }
  Status Compute(std::string_view span, const SpanWork& work) override {
    return Emit(ComputeEvent(kDefaultStream, rates_.Duration(work), header_.Intern(span)));
  }
  Status HostCopy(std::string_view span, Bytes bytes, StreamId stream) override {
    if (!rates_.prices_host() || bytes == 0) return Status::Ok();
    return Emit(ComputeEvent(stream, rates_.HostCopy(bytes), header_.Intern(span)));
  }

  Status EnterPhase(Phase phase) { return Emit(PhaseEvent(phase)); }

  Status Alloc(Bytes bytes, StreamId stream, Category category, std::uint64_t& id) override {
    id = next_alloc_id_++;
    return Emit(AllocEvent(id, bytes, category, stream));
  }

  Status Free(std::uint64_t id) override {
    BUCKETSIM_CHECK(id != 0);
    return Emit(FreeEvent(id));
  }

  // Run i's span `span` (SpanName) on the default stream, priced by the run's rates: its FLOPs
  // (forward, or BackwardFlops) and the bytes it moves, its inputs and outputs once each in
  // forward and a recompute, twice in backward (the output's gradient and the saved inputs read,
  // the inputs' gradients written), as backward's FLOPs default to twice forward's. A view (every
  // output aliasing another tensor) moves nothing; an in-place op's writes are not counted; a
  // parameter's reads are not counted (its matmuls are compute-bound).
  Status ComputeRun(std::size_t i, Span span) {
    const ForwardOp& op = model_.forward[i];
    SpanWork work;
    work.flops = span == kBackwardSpan ? op.BackwardFlops() : op.flops;
    work.tensor_cores = !op.outputs.empty() &&
                        (op.outputs.front().dtype == "bf16" || op.outputs.front().dtype == "fp16");
    const OpTensors& indexes = op_tensors_[i];
    const bool view = std::all_of(indexes.outputs.begin(), indexes.outputs.end(),
                                  [&](std::size_t t) { return tensors_[t].alias.has_value(); });
    if (!view) {
      for (std::size_t t : indexes.inputs) work.bytes += static_cast<double>(tensors_[t].bytes);
      for (std::size_t t : indexes.outputs) work.bytes += static_cast<double>(tensors_[t].bytes);
      if (span == kBackwardSpan) work.bytes *= 2;
    }
    return Emit(ComputeEvent(kDefaultStream, rates_.Duration(work), SpanName(i, span)));
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

  const ModelProgram& model_;
  const GenOptions& options_;
  const ComputeRates rates_;
  TraceHeader& header_;
  EventSink& sink_;
  const std::unique_ptr<FsdpImplementation> impl_;
  EventIndex next_index_ = 0;
  std::uint64_t next_alloc_id_ = 1;
  std::vector<std::vector<std::uint64_t>> grad_ids_;  // per instance, while backward holds them
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
  const CheckpointRegions regions_;
  std::uint64_t epoch_ = 0;
  std::vector<std::size_t> iteration_holds_;  // the loop's references, released after zero_grad
  std::vector<std::size_t> region_holds_;     // a region backward's recomputed outputs
  std::set<std::size_t> region_grads_;        // ... and the gradients of its outputs it keeps
  std::size_t recomputing_ = 0;               // the checkpoint_begin of the latest recompute
  std::vector<std::size_t> recompute_holds_;  // what a cache holds until a recompute ends
  // Per run the selective-checkpointing policy saved (ForwardOp::policy_saved): the storages
  // its cache entry holds from its forward on, of its outputs and of its new saves.
  std::vector<std::vector<std::size_t>> cached_outputs_, cached_saves_;
  std::vector<std::size_t> hook_reads_;  // what post-forward hook runs read, until it returns
  bool per_param_ = false;               // the program has param_reads
  // [instance][param]: the tensor index of each gradient target (its views, or itself)
  std::vector<std::vector<std::vector<std::size_t>>> target_tensor_;
  std::vector<std::vector<std::size_t>> run_targets_;  // per forward op: the targets it reads
  std::vector<std::vector<std::size_t>> releases_of_;  // per forward op: the tensors it releases
};

// The trace of a valid program (with FSDP2's boundary casts already in it).
Status EmitValidTrace(const ModelProgram& model, const GenOptions& options, EventSink& sink) {
  // Sinks keep a pointer to the header and names are interned while events stream, so it
  // lives here until OnEnd has returned.
  TraceHeader header;
  FsdpTrace trace(model, options, header, sink);
  BUCKETSIM_RETURN_IF_ERROR(trace.BuildHeader());
  BUCKETSIM_RETURN_IF_ERROR(sink.OnHeader(header));
  BUCKETSIM_RETURN_IF_ERROR(trace.Run());
  return sink.OnEnd();
}

}  // namespace

Status EmitFsdpTrace(const ModelProgram& model, const GenOptions& options, EventSink& sink) {
  BUCKETSIM_RETURN_IF_ERROR(ValidateGenOptions(options));
  BUCKETSIM_RETURN_IF_ERROR(ValidateProgram(model));
  // FSDP's hooks cast at the units' boundaries: runs of their own, in a copy of the program
  // (each implementation's entry says which: FSDP2 every unit's inputs and the root's outputs,
  // FSDP1 the root's inputs, with a param_dtype).
  if (const FsdpImplOptions& entry = OptionsOf(options.fsdp_impl); entry.boundary_casts) {
    const BoundaryCasts casts = entry.boundary_casts(options);
    if (casts.inputs || casts.root_outputs) {
      ModelProgram cast = model;
      Result<BoundaryCastSummary> added = InsertBoundaryCasts(cast, casts);
      if (!added.ok()) {
        return InvalidArgument(fmt::format(
            "{} with {}: {}", FsdpImplName(options.fsdp_impl),
            casts.root_outputs ? fmt::format("--output-dtype {}", DTypeName(*casts.root_outputs))
                               : fmt::format("--param-dtype {}", DTypeName(*casts.inputs)),
            added.status().message()));
      }
      if (added->casts > 0) return EmitValidTrace(cast, options, sink);
    }
  }
  return EmitValidTrace(model, options, sink);
}

}  // namespace bucketsim
