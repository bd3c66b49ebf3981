#include "gen/optimizer_step.h"

#include "gen/fsdp_impl_options.h"

#include <cstdint>
#include <utility>

#include "core/category.h"
#include "core/event.h"
#include "gen/fsdp_implementation.h"
#include "gen/model_program.h"

namespace bucketsim {

namespace {

// Adam's fused `step`: torch.zeros((), dtype=_get_scalar_dtype(is_fused=True)), fp32.
constexpr Bytes kStepTensorBytes = 4;

// The step's work per element, what the time model prices it by (gen/compute_rates.h): an
// elementwise, memory-bound pass. FLOPs: an order of magnitude, tiny next to forward and
// backward. Bytes: fp32 tensors read and written once each by the update, SGD the parameter and
// gradient (12 B) and momentum's buffer (8 B more), Adam the parameter, gradient, exp_avg and
// exp_avg_sq (16 B read, 12 written), and Adam's temporaries on top: the for-loop's two per
// parameter (exp_avg_sq.sqrt() and its quotient, each written and read: 16 B), foreach's one set
// (8 B), fused none.
SpanWork StepWorkPerElement(OptimizerKind optimizer, OptimizerImpl impl) {
  switch (optimizer) {
    case OptimizerKind::kSgd:
      return {2, 12};
    case OptimizerKind::kSgdMomentum:
      return {4, 20};
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW:
      return {12, 28.0 + (impl == OptimizerImpl::kForLoop   ? 16
                          : impl == OptimizerImpl::kForeach ? 8
                                                            : 0)};
  }
  return {};
}

// One step's allocations on the trace; every tensor is on the default stream, as the step runs.
class StepEmitter {
 public:
  StepEmitter(const GenOptions& options, const std::vector<Numel>& params, bool first, bool on_host,
              TraceEmitter& trace)
      : options_(options), first_(first), on_host_(on_host), trace_(trace) {
    for (Numel numel : params) {
      if (numel > 0) params_.push_back(numel);  // torch skips a parameter without a gradient
    }
  }

  Status Run() {
    // On the CPU (offloaded parameters): nothing on the device, the pass over host memory.
    if (on_host_) return Compute();
    switch (options_.optimizer) {
      case OptimizerKind::kSgd:
      case OptimizerKind::kSgdMomentum:
        return Sgd();
      case OptimizerKind::kAdam:
      case OptimizerKind::kAdamW:
        return Adam();
    }
    return Status::Ok();
  }

 private:
  Status Alloc(Bytes bytes, std::uint64_t& id) {
    return trace_.Alloc(bytes, kDefaultStream, Category::kOptimizerState, id);
  }
  Status AllocLike(Numel numel, std::uint64_t& id) { return Alloc(numel * kFp32Size, id); }
  // Frees `id` unless it is 0, and zeroes it.
  Status Drop(std::uint64_t& id) {
    if (id == 0) return Status::Ok();
    return trace_.Free(std::exchange(id, 0));
  }
  // A full set, one tensor per parameter in order.
  Status AllocSet(std::vector<std::uint64_t>& set) {
    set.assign(params_.size(), 0);
    for (std::size_t i = 0; i < params_.size(); ++i) {
      BUCKETSIM_RETURN_IF_ERROR(AllocLike(params_[i], set[i]));
    }
    return Status::Ok();
  }
  // A list dropped: its items from the last.
  Status DropSet(std::vector<std::uint64_t>& set) {
    for (auto it = set.rbegin(); it != set.rend(); ++it) BUCKETSIM_RETURN_IF_ERROR(Drop(*it));
    set.clear();
    return Status::Ok();
  }
  Status Compute() {
    Numel elements = 0;
    for (Numel numel : params_) elements += numel;
    const double n = static_cast<double>(elements);
    SpanWork work = StepWorkPerElement(options_.optimizer, options_.optimizer_impl);
    work.flops *= n;
    work.bytes *= n;
    work.on_host = on_host_;
    return trace_.Compute("optimizer step", work);
  }
  // A state tensor: kept for the rest of the run.
  Status State(Bytes bytes) {
    std::uint64_t id = 0;
    return Alloc(bytes, id);
  }

  // sgd.py: _single_tensor_sgd, _multi_tensor_sgd, _fused_sgd (momentum 0.9, no nesterov).
  Status Sgd() {
    const bool momentum = options_.optimizer == OptimizerKind::kSgdMomentum;
    const bool decay = options_.weight_decay != 0;
    switch (options_.optimizer_impl) {
      case OptimizerImpl::kForLoop: {
        std::uint64_t grad = 0;  // `grad = grad.add(param, alpha=weight_decay)`
        for (Numel numel : params_) {
          BUCKETSIM_RETURN_IF_ERROR(Drop(grad));  // `grad = grads[i]`
          if (decay) BUCKETSIM_RETURN_IF_ERROR(AllocLike(numel, grad));
          if (momentum && first_) BUCKETSIM_RETURN_IF_ERROR(State(numel * kFp32Size));
          if (momentum) BUCKETSIM_RETURN_IF_ERROR(Drop(grad));  // `grad = buf`
        }
        BUCKETSIM_RETURN_IF_ERROR(Compute());
        return Drop(grad);
      }
      case OptimizerImpl::kForeach: {
        std::vector<std::uint64_t> grads;  // `device_grads = torch._foreach_add(...)`
        if (decay) BUCKETSIM_RETURN_IF_ERROR(AllocSet(grads));
        if (momentum && first_) {
          for (Numel numel : params_) BUCKETSIM_RETURN_IF_ERROR(State(numel * kFp32Size));
        }
        if (momentum) BUCKETSIM_RETURN_IF_ERROR(DropSet(grads));  // `device_grads = bufs`
        BUCKETSIM_RETURN_IF_ERROR(Compute());
        return DropSet(grads);
      }
      case OptimizerImpl::kFused:
        if (momentum && first_) {
          for (Numel numel : params_) BUCKETSIM_RETURN_IF_ERROR(State(numel * kFp32Size));
        }
        return Compute();
    }
    return Status::Ok();
  }

  // adam.py and adamw.py: _init_group, then _single_tensor_adam(w), _multi_tensor_adam(w),
  // _fused_adam(w).
  Status Adam() {
    const OptimizerImpl impl = options_.optimizer_impl;
    if (first_) {
      for (Numel numel : params_) {
        if (impl == OptimizerImpl::kFused) BUCKETSIM_RETURN_IF_ERROR(State(kStepTensorBytes));
        BUCKETSIM_RETURN_IF_ERROR(State(numel * kFp32Size));  // exp_avg
        BUCKETSIM_RETURN_IF_ERROR(State(numel * kFp32Size));  // exp_avg_sq
      }
    }
    // Adam adds the decay to the gradient (a new tensor); AdamW scales the parameter in place.
    const bool decay_temp =
        options_.optimizer == OptimizerKind::kAdam && options_.weight_decay != 0;
    switch (impl) {
      case OptimizerImpl::kForLoop: {
        std::uint64_t grad = 0;
        std::uint64_t denom = 0;
        for (Numel numel : params_) {
          BUCKETSIM_RETURN_IF_ERROR(Drop(grad));  // `grad = grads[i]`
          if (decay_temp) BUCKETSIM_RETURN_IF_ERROR(AllocLike(numel, grad));
          std::uint64_t sqrt = 0;
          std::uint64_t quotient = 0;
          BUCKETSIM_RETURN_IF_ERROR(AllocLike(numel, sqrt));      // exp_avg_sq.sqrt()
          BUCKETSIM_RETURN_IF_ERROR(AllocLike(numel, quotient));  // ... / bias_correction2_sqrt
          BUCKETSIM_RETURN_IF_ERROR(Drop(sqrt));
          BUCKETSIM_RETURN_IF_ERROR(Drop(denom));  // `denom = ` the new one
          denom = quotient;
        }
        BUCKETSIM_RETURN_IF_ERROR(Compute());
        BUCKETSIM_RETURN_IF_ERROR(Drop(grad));  // bound before `denom`
        return Drop(denom);
      }
      case OptimizerImpl::kForeach: {
        std::vector<std::uint64_t> grads;
        if (decay_temp) BUCKETSIM_RETURN_IF_ERROR(AllocSet(grads));
        BUCKETSIM_RETURN_IF_ERROR(DropSet(grads));  // `del device_grads`
        std::vector<std::uint64_t> sqrt;
        BUCKETSIM_RETURN_IF_ERROR(AllocSet(sqrt));  // torch._foreach_sqrt(device_exp_avg_sqs)
        BUCKETSIM_RETURN_IF_ERROR(Compute());
        return DropSet(sqrt);
      }
      case OptimizerImpl::kFused:
        return Compute();
    }
    return Status::Ok();
  }

  const GenOptions& options_;
  const bool first_;
  const bool on_host_;
  TraceEmitter& trace_;
  std::vector<Numel> params_;
};

}  // namespace

OptimizerImpl DefaultOptimizerImpl(FsdpImpl impl) { return OptionsOf(impl).optimizer_impl; }

double DefaultWeightDecay(OptimizerKind optimizer) {
  return optimizer == OptimizerKind::kAdamW ? 1e-2 : 0;
}

Status EmitOptimizerStep(const GenOptions& options, const std::vector<Numel>& params, int iteration,
                         TraceEmitter& trace) {
  return StepEmitter(options, params, iteration == 0, /*on_host=*/false, trace).Run();
}

Status EmitHostOptimizerStep(const GenOptions& options, const std::vector<Numel>& params,
                             TraceEmitter& trace) {
  return StepEmitter(options, params, /*first=*/false, /*on_host=*/true, trace).Run();
}

}  // namespace bucketsim
