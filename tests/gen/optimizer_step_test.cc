// The optimizer step (src/gen/optimizer_step.cc) event by event, per optimizer and
// implementation, against the rules it cites from torch 2.6's torch/optim: parameters of 3, 0
// and 5 fp32 elements (12, -, 20 bytes; the empty one has no gradient here and is skipped).
// Real torch runs of the same rules are tests/tools/optimizer_oracle_test.py's.
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gen/fsdp_implementation.h"
#include "gen/gen_options.h"
#include "gen/optimizer_step.h"

namespace bucketsim {
namespace {

// The step's events as lines: "alloc ID BYTES", "free ID", "compute".
class Recorder : public TraceEmitter {
 public:
  Status Alloc(Bytes bytes, StreamId stream, Category category, std::uint64_t& id) override {
    EXPECT_EQ(stream, 0u);
    EXPECT_EQ(category, Category::kOptimizerState);
    id = ++last_id_;
    lines.push_back(fmt::format("alloc {} {}", id, bytes));
    return Status::Ok();
  }
  Status Free(std::uint64_t id) override {
    lines.push_back(fmt::format("free {}", id));
    return Status::Ok();
  }
  Status Emit(Event /*event*/) override { return InvalidArgument("no event expected"); }
  Status Compute(std::string_view span, const SpanWork& work) override {
    EXPECT_EQ(span, "optimizer step");
    lines.push_back("compute");
    this->work = work;
    return Status::Ok();
  }
  Status HostCopy(std::string_view, Bytes, StreamId) override {
    return InvalidArgument("no host copy expected");
  }
  Status TakeParamGrad(std::size_t, std::size_t, std::uint64_t&) override {
    return InvalidArgument("no gradient expected");
  }
  Status TakeViewGrads(std::size_t, std::size_t, std::vector<std::uint64_t>&) override {
    return InvalidArgument("no gradient expected");
  }
  std::vector<std::string> lines;
  SpanWork work;  // the last span's

 private:
  std::uint64_t last_id_ = 0;
};

const std::vector<Numel> kParams = {3, 0, 5};

std::vector<std::string> Step(OptimizerKind optimizer, OptimizerImpl impl, double weight_decay,
                              int iteration) {
  GenOptions options;
  options.optimizer = optimizer;
  options.optimizer_impl = impl;
  options.weight_decay = weight_decay;
  Recorder recorder;
  EXPECT_TRUE(EmitOptimizerStep(options, kParams, iteration, recorder).ok());
  return recorder.lines;
}

using Lines = std::vector<std::string>;

TEST(OptimizerStep, SgdWithoutMomentumOrDecayAllocatesNothing) {
  for (OptimizerImpl impl :
       {OptimizerImpl::kForLoop, OptimizerImpl::kForeach, OptimizerImpl::kFused}) {
    EXPECT_EQ(Step(OptimizerKind::kSgd, impl, 0, 0), Lines{"compute"});
  }
}

// The momentum buffer is torch.clone(grad) at the first step (fused: empty_like), kept; later
// steps update it in place.
TEST(OptimizerStep, SgdMomentumBufferAtTheFirstStepOnly) {
  for (OptimizerImpl impl :
       {OptimizerImpl::kForLoop, OptimizerImpl::kForeach, OptimizerImpl::kFused}) {
    EXPECT_EQ(Step(OptimizerKind::kSgdMomentum, impl, 0, 0),
              (Lines{"alloc 1 12", "alloc 2 20", "compute"}));
    EXPECT_EQ(Step(OptimizerKind::kSgdMomentum, impl, 0, 1), Lines{"compute"});
  }
}

// _single_tensor_sgd: `grad = grad.add(param, alpha=wd)`; with momentum `grad = buf` drops it
// at once, without it lives until the next parameter's `grad = grads[i]`, the last until the
// function returns. _multi_tensor_sgd: the whole set, dropped (last first) at
// `device_grads = bufs`, or at the end. fused: inside the kernel.
TEST(OptimizerStep, SgdWeightDecayTemporaries) {
  EXPECT_EQ(Step(OptimizerKind::kSgd, OptimizerImpl::kForLoop, 0.1, 0),
            (Lines{"alloc 1 12", "free 1", "alloc 2 20", "compute", "free 2"}));
  EXPECT_EQ(Step(OptimizerKind::kSgdMomentum, OptimizerImpl::kForLoop, 0.1, 0),
            (Lines{"alloc 1 12", "alloc 2 12", "free 1", "alloc 3 20", "alloc 4 20", "free 3",
                   "compute"}));
  EXPECT_EQ(Step(OptimizerKind::kSgdMomentum, OptimizerImpl::kForLoop, 0.1, 1),
            (Lines{"alloc 1 12", "free 1", "alloc 2 20", "free 2", "compute"}));
  EXPECT_EQ(Step(OptimizerKind::kSgd, OptimizerImpl::kForeach, 0.1, 0),
            (Lines{"alloc 1 12", "alloc 2 20", "compute", "free 2", "free 1"}));
  EXPECT_EQ(Step(OptimizerKind::kSgdMomentum, OptimizerImpl::kForeach, 0.1, 0),
            (Lines{"alloc 1 12", "alloc 2 20", "alloc 3 12", "alloc 4 20", "free 2", "free 1",
                   "compute"}));
  EXPECT_EQ(Step(OptimizerKind::kSgdMomentum, OptimizerImpl::kFused, 0.1, 0),
            (Lines{"alloc 1 12", "alloc 2 20", "compute"}));
}

// _init_group: exp_avg, exp_avg_sq per parameter (step on the CPU). _single_tensor_adam:
// sqrt, then the quotient (`denom`), the sqrt freed at once, the previous denom when the new
// one is bound, the last at the end.
TEST(OptimizerStep, AdamForLoopDenomOutlivesItsParameter) {
  const Lines later = {"alloc 1 12", "alloc 2 12", "free 1",  "alloc 3 20", "alloc 4 20",
                       "free 3",     "free 2",     "compute", "free 4"};
  EXPECT_EQ(Step(OptimizerKind::kAdam, OptimizerImpl::kForLoop, 0, 1), later);
  EXPECT_EQ(Step(OptimizerKind::kAdamW, OptimizerImpl::kForLoop, 0.01, 1), later);
  EXPECT_EQ(
      Step(OptimizerKind::kAdam, OptimizerImpl::kForLoop, 0, 0),
      (Lines{"alloc 1 12", "alloc 2 12", "alloc 3 20", "alloc 4 20", "alloc 5 12", "alloc 6 12",
             "free 5", "alloc 7 20", "alloc 8 20", "free 7", "free 6", "compute", "free 8"}));
}

// Adam's weight decay is `grad = grad.add(param)`, alive through its parameter's denom until
// the next `grad = grads[i]`; the last is a local bound before `denom`, so freed first.
TEST(OptimizerStep, AdamForLoopWeightDecayGradientCopy) {
  EXPECT_EQ(Step(OptimizerKind::kAdam, OptimizerImpl::kForLoop, 0.1, 1),
            (Lines{"alloc 1 12", "alloc 2 12", "alloc 3 12", "free 2", "free 1", "alloc 4 20",
                   "alloc 5 20", "alloc 6 20", "free 5", "free 3", "compute", "free 4", "free 6"}));
}

// _multi_tensor_adam: with Adam's decay `_foreach_add(grads, params)` (a set, dropped last
// first at `del device_grads`), then `_foreach_sqrt(exp_avg_sqs)`, alive to the end. AdamW
// decays in place.
TEST(OptimizerStep, AdamForeachMakesFullSets) {
  EXPECT_EQ(Step(OptimizerKind::kAdam, OptimizerImpl::kForeach, 0, 1),
            (Lines{"alloc 1 12", "alloc 2 20", "compute", "free 2", "free 1"}));
  EXPECT_EQ(Step(OptimizerKind::kAdamW, OptimizerImpl::kForeach, 0.01, 1),
            (Lines{"alloc 1 12", "alloc 2 20", "compute", "free 2", "free 1"}));
  EXPECT_EQ(Step(OptimizerKind::kAdam, OptimizerImpl::kForeach, 0.1, 1),
            (Lines{"alloc 1 12", "alloc 2 20", "free 2", "free 1", "alloc 3 12", "alloc 4 20",
                   "compute", "free 4", "free 3"}));
}

// fused: `step` on the device (4 bytes) before each parameter's exp_avg and exp_avg_sq; the
// kernel makes nothing.
TEST(OptimizerStep, AdamFusedStepTensorsOnTheDeviceAndNoTemporaries) {
  EXPECT_EQ(Step(OptimizerKind::kAdam, OptimizerImpl::kFused, 0.1, 0),
            (Lines{"alloc 1 4", "alloc 2 12", "alloc 3 12", "alloc 4 4", "alloc 5 20", "alloc 6 20",
                   "compute"}));
  EXPECT_EQ(Step(OptimizerKind::kAdamW, OptimizerImpl::kFused, 0.01, 1), Lines{"compute"});
}

// The span's work, what a --gpu roofline prices (8 elements here): Adam's 12 FLOPs per element,
// and its bytes: 28 of the update, 16 more of the for-loop's two temporaries, 8 of foreach's.
TEST(OptimizerStep, TheSpanSaysTheFlopsAndBytesOfTheUpdate) {
  const auto work = [](OptimizerKind optimizer, OptimizerImpl impl) {
    GenOptions options;
    options.optimizer = optimizer;
    options.optimizer_impl = impl;
    Recorder recorder;
    EXPECT_TRUE(EmitOptimizerStep(options, kParams, 1, recorder).ok());
    return std::pair{recorder.work.flops, recorder.work.bytes};
  };
  EXPECT_EQ(work(OptimizerKind::kAdamW, OptimizerImpl::kFused), std::pair(96.0, 224.0));
  EXPECT_EQ(work(OptimizerKind::kAdamW, OptimizerImpl::kForeach), std::pair(96.0, 288.0));
  EXPECT_EQ(work(OptimizerKind::kAdam, OptimizerImpl::kForLoop), std::pair(96.0, 352.0));
  EXPECT_EQ(work(OptimizerKind::kSgd, OptimizerImpl::kForeach), std::pair(16.0, 96.0));
  EXPECT_EQ(work(OptimizerKind::kSgdMomentum, OptimizerImpl::kFused), std::pair(32.0, 160.0));
}

// Offloaded parameters: the step runs on the CPU, nothing on the device even at the first step
// (no state allocated), one span on the host.
TEST(OptimizerStep, AnOffloadedStepAllocatesNothingAndRunsOnTheHost) {
  GenOptions options;
  options.optimizer = OptimizerKind::kAdamW;
  options.optimizer_impl = OptimizerImpl::kForeach;
  Recorder recorder;
  ASSERT_TRUE(EmitHostOptimizerStep(options, kParams, recorder).ok());
  EXPECT_EQ(recorder.lines, Lines{"compute"});
  EXPECT_TRUE(recorder.work.on_host);
  EXPECT_EQ(recorder.work.bytes, 288.0);
}

TEST(OptimizerStep, TorchDefaults) {
  EXPECT_EQ(DefaultOptimizerImpl(FsdpImpl::kFairscale), OptimizerImpl::kForLoop);
  EXPECT_EQ(DefaultOptimizerImpl(FsdpImpl::kFsdp1), OptimizerImpl::kForeach);
  EXPECT_EQ(DefaultOptimizerImpl(FsdpImpl::kFsdp2), OptimizerImpl::kForeach);
  EXPECT_EQ(DefaultWeightDecay(OptimizerKind::kAdamW), 0.01);
  EXPECT_EQ(DefaultWeightDecay(OptimizerKind::kAdam), 0);
  EXPECT_EQ(DefaultWeightDecay(OptimizerKind::kSgdMomentum), 0);
}

}  // namespace
}  // namespace bucketsim
