// PyTorch FSDP1 (torch_fsdp1.cc) on tiny programs, every event written out: the padded shards,
// the all-gathers and reshards of each sharding strategy, backward prefetch (pre, post, none),
// forward prefetch, mixed precision, the flat parameter's padding, one rank, a checkpointed
// unit's recomputation.
#include "gen/torch_fsdp1.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gen/fsdp_emitter.h"
#include "gen/model_program.h"
#include "gen/program_builder.h"
#include "testing/recording_sink.h"
#include "tiny_fsdp.h"

namespace bucketsim {
namespace {

// FSDP1 on `world_size` ranks, fp32, SGD, one iteration, FULL_SHARD, BACKWARD_PRE.
GenOptions Fsdp1Options(int world_size) {
  GenOptions options = testing::TinyFsdpOptions(world_size);
  options.fsdp_impl = FsdpImpl::kFsdp1;
  options.compute_dtype_given = true;
  return options;
}

std::vector<std::string> Emit(const ModelProgram& model, const GenOptions& options) {
  return testing::EmitSummary(model, options);
}

// The root (6 parameters) and two units `a` and `b` (`unit_numel` parameters each) in a chain: the
// root's forward begins, a, then b, then the root's head; the batch x (100 bytes). a: ha = a(x),
// saves x; b: hb = b(ha), saves ha; head: loss = head(hb), saves hb, uses the root's parameters. On
// two ranks with 10 elements a unit the shards are 3 and 5 elements (12 and 20 bytes), the gathered
// flat parameters 24 and 40 bytes, and so the flat gradients. Forward order root, a, b;
// post-forward order a, b, root. With `checkpoint`, b runs in a checkpointed region (around its
// unit, as checkpoint(block, x, use_reentrant=False) over an FSDP-wrapped block) that keeps ha.
ModelProgram Chain(bool checkpoint = false, Numel unit_numel = 10) {
  ProgramBuilder program("chain");
  const std::size_t root = program.AddInstance({"root", {{"flat_param_0", 6}}, true, false});
  const std::size_t a = program.AddInstance({"a", {{"flat_param_0", unit_numel}}, true, true});
  const std::size_t b = program.AddInstance({"b", {{"flat_param_0", unit_numel}}, true, true});
  program.AddInput(Tensor("x", 100, "fp32"));
  program.Gather(root);
  program.Gather(a);
  program.Run("a", 0, {a}, {In("x")}, {Tensor("ha", 200, "fp32")}, {Keep("x")});
  program.EndForward(a);
  if (checkpoint) program.CheckpointBegin({Keep("ha")});
  program.Gather(b);
  program.Run("b", 0, {b}, {In("ha")}, {Tensor("hb", 200, "fp32")}, {Keep("ha")});
  program.EndForward(b);
  if (checkpoint) program.CheckpointEnd();
  program.Run("head", 0, {root}, {In("hb")}, {Tensor("loss", 4, "fp32")}, {Keep("hb")});
  program.EndForward(root);
  program.SetLoss("loss");
  return program.Take();
}

// The forward every two-rank FULL_SHARD run shares: the root gathers first and keeps its
// parameters, a and b gather and free theirs.
const std::vector<std::string> kFullShardForward = {
    "alloc 1 12 s0 param",        // the root's fp32 shard (3 elements)
    "alloc 2 20 s0 param",        // a's (5)
    "alloc 3 20 s0 param",        // b's
    "alloc 4 100 s0 activation",  // x
    "iteration 0",
    "phase forward",
    "alloc 5 24 s0 all_gather",  // lazy init: the root's _full_param_padded, made and freed
    "free 5",
    "alloc 6 40 s0 all_gather",  // a's, b's
    "free 6",
    "alloc 7 40 s0 all_gather",
    "free 7",
    "alloc 8 24 s1 all_gather",  // the root's padded unsharded flat parameter
    "alloc 9 40 s1 all_gather",  // a's
    "compute forward a",
    "alloc 10 200 s0 activation",  // ha
    "free 9",                      // a reshards after forward
    "alloc 11 40 s1 all_gather",
    "compute forward b",
    "alloc 12 200 s0 activation",  // hb
    "free 11",
    "compute forward head",
    "alloc 13 4 s0 activation",  // the loss; the root does not reshard after forward
    "mark after fwd",
    "phase backward",
    "alloc 14 4 s0 grad",  // ones_like(loss)
};

// After backward: the step (SGD: no state) and zero_grad(set_to_none=True), which drops the
// reduced shards (the policy's), then the loop drops the loss.
const std::vector<std::string> kStepAndZeroGrad = {
    "flush",  // the root's final callback
    "mark after bwd",  "phase step",      "compute optimizer step",
    "mark after step", "phase zero_grad", "zero_grad",
};

std::vector<std::string> Concat(std::vector<std::vector<std::string>> parts) {
  std::vector<std::string> all;
  for (const auto& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

TEST(TorchFsdp1, FullShardBackwardPrePrefetchesTheNextUnitInThePreBackwardHook) {
  const std::vector<std::string> expected = Concat({
      kFullShardForward,
      {
          "alloc 15 40 s1 all_gather",  // the root's pre-backward hook prefetches b
          "compute backward head",
          "alloc 16 24 s0 grad",   // the root's flat gradient
          "alloc 17 200 s0 grad",  // grad hb
          "free 14",
          "free 12",
          "alloc 18 40 s1 all_gather",  // b's pre-backward hook (b prefetched) prefetches a
          "compute backward b",
          "alloc 19 40 s0 grad",  // b's flat gradient
          "alloc 20 200 s0 grad",
          "free 17",
          "free 10",
          "free 15",                // b's post-backward hook reshards
          "rs 2.0 g1 fp32 5 view",  // one request per unit: its flat parameter's shard
          "free 19",                // the unsharded gradient goes when the hook returns
          "compute backward a",
          "alloc 21 40 s0 grad",
          "free 20",
          "free 18",
          "rs 1.0 g1 fp32 5 view",
          "free 21",
          "free 8",  // the root's post-backward hook frees its parameters at last
          "rs 0.0 g1 fp32 3 view",
          "free 16",
      },
      kStepAndZeroGrad,
      {"free 13"},
  });
  EXPECT_EQ(Emit(Chain(), Fsdp1Options(2)), expected);
}

TEST(TorchFsdp1, FullShardBackwardPostPrefetchesAfterResharding) {
  GenOptions options = Fsdp1Options(2);
  options.fsdp1.backward_prefetch = BackwardPrefetch::kPost;
  const std::vector<std::string> expected = Concat({
      kFullShardForward,
      {
          "compute backward head",
          "alloc 15 24 s0 grad",
          "alloc 16 200 s0 grad",
          "free 14",
          "free 12",
          "alloc 17 40 s1 all_gather",  // b's own pre-backward unshard
          "compute backward b",
          "alloc 18 40 s0 grad",
          "alloc 19 200 s0 grad",
          "free 16",
          "free 10",
          "free 17",                    // b reshards,
          "alloc 20 40 s1 all_gather",  // then prefetches a, before its reduce-scatter
          "rs 2.0 g1 fp32 5 view",
          "free 18",
          "compute backward a",
          "alloc 21 40 s0 grad",
          "free 19",
          "free 20",
          "rs 1.0 g1 fp32 5 view",
          "free 21",
          "free 8",
          "rs 0.0 g1 fp32 3 view",
          "free 15",
      },
      kStepAndZeroGrad,
      {"free 13"},
  });
  EXPECT_EQ(Emit(Chain(), options), expected);
}

TEST(TorchFsdp1, WithoutBackwardPrefetchEachUnitGathersInItsPreBackwardHook) {
  GenOptions options = Fsdp1Options(2);
  options.fsdp1.backward_prefetch = BackwardPrefetch::kNone;
  options.fsdp1.limit_all_gathers = false;  // changes nothing in a trace (torch_fsdp1.cc, Unshard)
  const std::vector<std::string> expected = Concat({
      kFullShardForward,
      {
          "compute backward head",
          "alloc 15 24 s0 grad",
          "alloc 16 200 s0 grad",
          "free 14",
          "free 12",
          "alloc 17 40 s1 all_gather",
          "compute backward b",
          "alloc 18 40 s0 grad",
          "alloc 19 200 s0 grad",
          "free 16",
          "free 10",
          "free 17",
          "rs 2.0 g1 fp32 5 view",
          "free 18",
          "alloc 20 40 s1 all_gather",  // a's pre-backward hook, after b's post-backward
          "compute backward a",
          "alloc 21 40 s0 grad",
          "free 19",
          "free 20",
          "rs 1.0 g1 fp32 5 view",
          "free 21",
          "free 8",
          "rs 0.0 g1 fp32 3 view",
          "free 15",
      },
      kStepAndZeroGrad,
      {"free 13"},
  });
  EXPECT_EQ(Emit(Chain(), options), expected);
}

TEST(TorchFsdp1, ShardGradOpKeepsParametersFromForwardToPostBackward) {
  GenOptions options = Fsdp1Options(2);
  options.fsdp1.sharding_strategy = ShardingStrategy::kShardGradOp;
  const std::vector<std::string> expected = Concat({
      {
          "alloc 1 12 s0 param",
          "alloc 2 20 s0 param",
          "alloc 3 20 s0 param",
          "alloc 4 100 s0 activation",
          "iteration 0",
          "phase forward",
          "alloc 5 24 s0 all_gather",  // lazy init, as FULL_SHARD's
          "free 5",
          "alloc 6 40 s0 all_gather",
          "free 6",
          "alloc 7 40 s0 all_gather",
          "free 7",
          "alloc 8 24 s1 all_gather",
          "alloc 9 40 s1 all_gather",
          "compute forward a",
          "alloc 10 200 s0 activation",  // a keeps its parameters
          "alloc 11 40 s1 all_gather",
          "compute forward b",
          "alloc 12 200 s0 activation",
          "compute forward head",
          "alloc 13 4 s0 activation",
          "mark after fwd",
          "phase backward",
          "alloc 14 4 s0 grad",  // pre-backward hooks and prefetches: nothing to gather
          "compute backward head",
          "alloc 15 24 s0 grad",
          "alloc 16 200 s0 grad",
          "free 14",
          "free 12",
          "compute backward b",
          "alloc 17 40 s0 grad",
          "alloc 18 200 s0 grad",
          "free 16",
          "free 10",
          "free 11",  // the post-backward hook frees them (gradients are synchronised)
          "rs 2.0 g1 fp32 5 view",
          "free 17",
          "compute backward a",
          "alloc 19 40 s0 grad",
          "free 18",
          "free 9",
          "rs 1.0 g1 fp32 5 view",
          "free 19",
          "free 8",
          "rs 0.0 g1 fp32 3 view",
          "free 15",
      },
      kStepAndZeroGrad,
      {"free 13"},
  });
  EXPECT_EQ(Emit(Chain(), options), expected);
}

// NO_SHARD, and one rank (FSDP1 makes any strategy NO_SHARD there): every rank keeps the
// whole flat parameter and computes with it; the gradient is all-reduced in place and kept as
// .grad until zero_grad; no reduce-scatter request.
const std::vector<std::string> kNoShard = {
    "alloc 1 24 s0 param",
    "alloc 2 40 s0 param",
    "alloc 3 40 s0 param",
    "alloc 4 100 s0 activation",
    "iteration 0",
    "phase forward",
    "compute forward a",
    "alloc 5 200 s0 activation",
    "compute forward b",
    "alloc 6 200 s0 activation",
    "compute forward head",
    "alloc 7 4 s0 activation",
    "mark after fwd",
    "phase backward",
    "alloc 8 4 s0 grad",
    "compute backward head",
    "alloc 9 24 s0 grad",  // the root's gradient, kept
    "alloc 10 200 s0 grad",
    "free 8",
    "free 6",
    "compute backward b",
    "alloc 11 40 s0 grad",
    "alloc 12 200 s0 grad",
    "free 10",
    "free 5",
    "compute backward a",
    "alloc 13 40 s0 grad",
    "free 12",
    "flush",
    "mark after bwd",
    "phase step",
    "compute optimizer step",
    "mark after step",
    "phase zero_grad",
    "zero_grad",
    "free 9",  // flat_param.grad = None
    "free 13",
    "free 11",
    "free 7",
};

TEST(TorchFsdp1, NoShardKeepsTheAllReducedGradient) {
  GenOptions options = Fsdp1Options(2);
  options.fsdp1.sharding_strategy = ShardingStrategy::kNoShard;
  EXPECT_EQ(Emit(Chain(), options), kNoShard);
}

TEST(TorchFsdp1, OneRankIsNoShard) { EXPECT_EQ(Emit(Chain(), Fsdp1Options(1)), kNoShard); }

// HYBRID_SHARD over 2 replicas of 2 ranks, as rank 3: shards over the shard group {2, 3}, so
// the events are FULL_SHARD's on two ranks; the reduced shard is all-reduced in place over the
// replicate group {1, 3}, which the header declares with the shard group.
TEST(TorchFsdp1, HybridShardReducesInTheShardGroupAndDeclaresBoth) {
  GenOptions options = Fsdp1Options(4);
  options.fsdp1.sharding_strategy = ShardingStrategy::kHybridShard;
  options.group_layout = GroupLayout::kHsdp;
  options.hsdp_shard_size = 2;
  options.hsdp_replicas = 2;
  options.rank = 3;
  EXPECT_EQ(Emit(Chain(), options), Emit(Chain(), Fsdp1Options(2)));

  testing::RecordingSink recorder;
  ASSERT_TRUE(EmitFsdpTrace(Chain(), options, recorder).ok());
  const std::vector<ProcessGroup>& groups = recorder.header.groups;
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].id, 1u);
  EXPECT_EQ(groups[0].ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(groups[1].id, 2u);
  EXPECT_EQ(groups[1].ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(recorder.header.streams.back().name, "all_reduce");
  // The replicate group every reduced shard is all-reduced over; a format 5 trace, as every
  // FSDP1 trace (its all-gathers are events).
  EXPECT_EQ(recorder.header.replicate_group, std::optional<GroupId>(2));
  EXPECT_EQ(recorder.header.WrittenSchemaVersion(), 5);
  EXPECT_FALSE(testing::EmitHeader(Chain(), Fsdp1Options(2)).replicate_group);
}

// Forward prefetch: the pre-forward order is recorded in the first iteration, so only the
// second prefetches: the root's pre-forward gathers a, a's gathers b.
TEST(TorchFsdp1, ForwardPrefetchFromTheSecondIteration) {
  GenOptions options = Fsdp1Options(2);
  options.fsdp1.forward_prefetch = true;
  options.iterations = 2;
  const std::vector<std::string> events = Emit(Chain(), options);
  const auto second = std::find(events.begin(), events.end(), "iteration 1");
  ASSERT_NE(second, events.end());
  // The first iteration is the plain FULL_SHARD one.
  GenOptions plain = Fsdp1Options(2);
  plain.iterations = 2;
  const std::vector<std::string> unprefetched = Emit(Chain(), plain);
  EXPECT_EQ(
      std::vector<std::string>(events.begin(), second),
      std::vector<std::string>(unprefetched.begin(),
                               std::find(unprefetched.begin(), unprefetched.end(), "iteration 1")));
  const std::vector<std::string> expected_forward = {
      "iteration 1",
      "phase forward",
      "alloc 22 24 s1 all_gather",  // the root
      "alloc 23 40 s1 all_gather",  // a, prefetched by the root's pre-forward
      "alloc 24 40 s1 all_gather",  // b, prefetched by a's pre-forward
      "compute forward a",
      "alloc 25 200 s0 activation",
      "free 23",
      "compute forward b",
      "alloc 26 200 s0 activation",
      "free 24",
      "compute forward head",
  };
  EXPECT_EQ(std::vector<std::string>(second, second + expected_forward.size()), expected_forward);
}

// MixedPrecision(param_dtype=bf16, reduce_dtype=fp32): the fp32 shard is cast into `_mp_shard`
// (pre-unshard stream) before each all-gather and freed after it; the bf16 flat gradient is
// copied to fp32 for the reduce-scatter, whose fp32 shard is kept as it is.
TEST(TorchFsdp1, Bf16ParametersWithFp32Reduction) {
  GenOptions options = Fsdp1Options(2);
  options.compute_dtype = DType::kBFloat16;
  options.reduce_dtype = DType::kFloat32;
  const std::vector<std::string> expected = {
      "alloc 1 12 s0 param",
      "alloc 2 20 s0 param",
      "alloc 3 20 s0 param",
      "alloc 4 100 s0 activation",
      "iteration 0",
      "phase forward",
      // lazy init, per unit: _mp_shard, _full_param_padded (bf16), _full_prec_full_param_padded
      "alloc 5 6 s0 all_gather",
      "free 5",
      "alloc 6 12 s0 all_gather",
      "free 6",
      "alloc 7 24 s0 all_gather",
      "free 7",
      "alloc 8 10 s0 all_gather",
      "free 8",
      "alloc 9 20 s0 all_gather",
      "free 9",
      "alloc 10 40 s0 all_gather",
      "free 10",
      "alloc 11 10 s0 all_gather",
      "free 11",
      "alloc 12 20 s0 all_gather",
      "free 12",
      "alloc 13 40 s0 all_gather",
      "free 13",
      "compute forward root:cast_forward_inputs",  // cast_root_forward_inputs: x to bf16
      "alloc 14 50 s0 activation",
      "alloc 15 6 s3 all_gather",  // the root's _mp_shard: 3 bf16 elements
      "alloc 16 12 s1 all_gather",
      "free 15",
      "alloc 17 10 s3 all_gather",
      "alloc 18 20 s1 all_gather",
      "free 17",
      "compute forward a",
      "alloc 19 200 s0 activation",
      "free 18",
      "alloc 20 10 s3 all_gather",
      "alloc 21 20 s1 all_gather",
      "free 20",
      "compute forward b",
      "alloc 22 200 s0 activation",
      "free 21",
      "compute forward head",
      "alloc 23 4 s0 activation",
      "mark after fwd",
      "phase backward",
      "alloc 24 4 s0 grad",
      "alloc 25 10 s3 all_gather",  // b prefetched: cast, gather, free the cast
      "alloc 26 20 s1 all_gather",
      "free 25",
      "compute backward head",
      "alloc 27 12 s0 grad",  // the root's bf16 flat gradient
      "alloc 28 200 s0 grad",
      "free 24",
      "free 22",
      "alloc 29 10 s3 all_gather",
      "alloc 30 20 s1 all_gather",
      "free 29",
      "compute backward b",
      "alloc 31 20 s0 grad",
      "alloc 32 200 s0 grad",
      "free 28",
      "free 19",
      "free 26",
      "alloc 33 40 s2 grad",  // grad.to(reduce_dtype) in the post-backward stream
      "rs 2.0 g1 fp32 5 view",
      "free 33",
      "free 31",
      "compute backward a",
      "alloc 34 20 s0 grad",
      "free 32",
      "free 14",
      "free 30",
      "alloc 35 40 s2 grad",
      "rs 1.0 g1 fp32 5 view",
      "free 35",
      "free 34",
      "free 16",
      "alloc 36 24 s2 grad",
      "rs 0.0 g1 fp32 3 view",
      "free 36",
      "free 27",
      "flush",
      "mark after bwd",
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "zero_grad",
      "free 23",
  };
  EXPECT_EQ(Emit(Chain(), options), expected);
}

// Reduced in bf16 (the param dtype), the shard is cast to fp32 (a new tensor: the policy
// makes it, rt _cast_grad_to_param_dtype); the bf16 gradient is reduced as it is.
TEST(TorchFsdp1, Bf16ReductionCastsTheShard) {
  GenOptions options = Fsdp1Options(2);
  options.compute_dtype = DType::kBFloat16;
  const std::vector<std::string> events = Emit(Chain(), options);
  EXPECT_NE(std::find(events.begin(), events.end(), "rs 2.0 g1 bf16 5 cast"), events.end());
  EXPECT_EQ(std::count_if(events.begin(), events.end(),
                          [](const std::string& e) { return e.find(" s2 ") != std::string::npos; }),
            0);  // no reduce-dtype copy
}

// 9 elements a unit on two ranks. Without use_orig_params the flat parameter is not padded:
// shards of 5, the flat gradient 9 elements (36 bytes), padded by F.pad to 10 for the
// reduce-scatter. With use_orig_params it is padded to a multiple of the world size: the
// gradient has 10 elements (the split's padding included) and needs no F.pad.
TEST(TorchFsdp1, PaddingOfTheFlatParameterOrOfTheGradient) {
  const std::vector<std::string> b_backward_unpadded = {
      "compute backward b",
      "alloc 19 36 s0 grad",
      "alloc 20 200 s0 grad",
      "free 17",
      "free 10",
      "free 15",
      "alloc 21 40 s2 grad",  // F.pad(unsharded_grad, [0, 1])
      "rs 2.0 g1 fp32 5 view",
      "free 21",
      "free 19",
  };
  const std::vector<std::string> events = Emit(Chain(false, 9), Fsdp1Options(2));
  const auto b = std::find(events.begin(), events.end(), "compute backward b");
  ASSERT_NE(b, events.end());
  EXPECT_EQ(std::vector<std::string>(b, b + b_backward_unpadded.size()), b_backward_unpadded);

  GenOptions orig = Fsdp1Options(2);
  orig.fsdp1.use_orig_params = true;
  // The same events as with 10 elements: the padding element is part of the flat parameter.
  EXPECT_EQ(Emit(Chain(false, 9), orig), Emit(Chain(false, 10), orig));
}

// use_orig_params=True: zero_grad drops the original parameters' .grad views, but
// flat_param.grad keeps the shard until the next root pre-forward.
TEST(TorchFsdp1, UseOrigParamsReleasesShardsAtTheNextRootPreForward) {
  GenOptions options = Fsdp1Options(2);
  options.fsdp1.use_orig_params = true;
  options.iterations = 2;
  const std::vector<std::string> events = Emit(Chain(), options);
  const std::vector<std::string> expected = {
      "phase zero_grad", "free 13",   "iteration 1",
      "phase forward",   "zero_grad", "alloc 22 24 s1 all_gather",
  };
  const auto zero = std::find(events.begin(), events.end(), "phase zero_grad");
  ASSERT_NE(zero, events.end());
  EXPECT_EQ(std::vector<std::string>(zero, zero + expected.size()), expected);
}

// A unit checkpointed with use_reentrant=False: its pre-backward hook runs before backward
// reaches the region (here at the recomputation's pre-forward, which FSDP then skips), so b is
// gathered (prefetched by the root) and a prefetched before b's forward is recomputed.
TEST(TorchFsdp1, CheckpointedUnitRecomputesUnderItsPreBackwardGather) {
  const std::vector<std::string> expected = Concat({
      kFullShardForward,
      {
          "alloc 15 40 s1 all_gather",  // the root's pre-backward hook prefetches b
          "compute backward head",
          "alloc 16 24 s0 grad",
          "alloc 17 200 s0 grad",
          "free 14",
          "free 12",
          "alloc 18 40 s1 all_gather",  // b's pre-backward hook prefetches a
          "compute recompute b",        // FSDP's forward hooks do nothing here
          "alloc 19 200 s0 activation",
          "compute backward b",
          "alloc 20 40 s0 grad",
          "alloc 21 200 s0 grad",
          "free 15",
          "rs 2.0 g1 fp32 5 view",
          "free 20",
          "free 17",  // the region returns
          "free 19",
          "free 10",
          "compute backward a",
          "alloc 22 40 s0 grad",
          "free 21",
          "free 18",
          "rs 1.0 g1 fp32 5 view",
          "free 22",
          "free 8",
          "rs 0.0 g1 fp32 3 view",
          "free 16",
      },
      kStepAndZeroGrad,
      {"free 13"},
  });
  EXPECT_EQ(Emit(Chain(true), Fsdp1Options(2)), expected);
}

// Adam's state is zeros_like each parameter the optimizer holds: the FlatParameter's padded
// shard (5 elements of a 9-element unit), or with use_orig_params each original parameter's
// part of the rank's shard, padding excluded: rank 1 holds elements 5..9 of a's 10, of which
// 4 are a parameter's.
TEST(TorchFsdp1, OptimizerStatePerShardOrPerOriginalParameterPart) {
  // The optimizer_state allocations never freed (the step's temporaries are freed within it).
  const auto state_bytes = [](const std::vector<std::string>& events) {
    std::vector<std::string> state;
    for (const std::string& e : events) {
      if (e.find("optimizer_state") == std::string::npos) continue;
      const std::string id = e.substr(6, e.find(' ', 6) - 6);
      if (std::find(events.begin(), events.end(), "free " + id) != events.end()) continue;
      state.push_back(e.substr(e.find(' ', 6)));
    }
    return state;
  };
  GenOptions options = Fsdp1Options(2);
  options.optimizer = OptimizerKind::kAdam;
  options.rank = 1;
  const std::vector<std::string> flat = {" 12 s0 optimizer_state", " 12 s0 optimizer_state",
                                         " 20 s0 optimizer_state", " 20 s0 optimizer_state",
                                         " 20 s0 optimizer_state", " 20 s0 optimizer_state"};
  EXPECT_EQ(state_bytes(Emit(Chain(false, 9), options)), flat);
  options.fsdp1.use_orig_params = true;
  const std::vector<std::string> orig = {" 12 s0 optimizer_state", " 12 s0 optimizer_state",
                                         " 16 s0 optimizer_state", " 16 s0 optimizer_state",
                                         " 16 s0 optimizer_state", " 16 s0 optimizer_state"};
  EXPECT_EQ(state_bytes(Emit(Chain(false, 9), options)), orig);
}

}  // namespace
}  // namespace bucketsim

namespace bucketsim {
namespace {

// A unit's own backward_prefetch (a recorded model's): the state whose hook runs decides. All
// BACKWARD_PRE but b's None: the root still prefetches b, but b's pre-backward does not prefetch
// a, which gathers in its own pre-backward, as with --backward-prefetch none; the rest is
// BACKWARD_PRE's.
TEST(TorchFsdp1, EachUnitsOwnBackwardPrefetchDecidesInItsHooks) {
  ModelProgram model = Chain();
  model.units[2].settings.backward_prefetch = BackwardPrefetch::kNone;
  const std::vector<std::string> events = Emit(model, Fsdp1Options(2));
  const auto at = std::find(events.begin(), events.end(), "compute backward b");
  ASSERT_NE(at, events.end());
  EXPECT_EQ(*(at - 1), "free 12");  // hb goes; no prefetch of a before b's backward
  const auto a = std::find(events.begin(), events.end(), "compute backward a");
  ASSERT_NE(a, events.end());
  EXPECT_EQ(*(a - 1), "alloc 20 40 s1 all_gather") << ::testing::PrintToString(events);
  model.units[2].settings.backward_prefetch = BackwardPrefetch::kPre;
  EXPECT_EQ(Emit(model, Fsdp1Options(2)), Emit(Chain(), Fsdp1Options(2)));
}

// CPUOffload(offload_params=True), fp32, FULL_SHARD: no shard on the device; each unshard copies
// the CPU shard to the device on the pre-unshard stream (flat_param_to), gathers from it and
// drops it. The root, still unsharded after forward, makes and drops that copy again in its
// pre-backward hook (its post-forward reshard pointed .data at the CPU shard). The reduced shards
// go at the end of backward (prepare_gradient_for_optim deletes `_saved_grad_shard`: the zero_grad
// event after the flush); the step runs on the CPU, and zero_grad has nothing left to free.
TEST(TorchFsdp1, CpuOffloadCopiesEachShardToTheDeviceAndKeepsGradientsUntilBackwardEnds) {
  GenOptions options = Fsdp1Options(2);
  options.offload_params = true;
  const std::vector<std::string> expected = {
      "alloc 1 100 s0 activation",
      "iteration 0",
      "phase forward",
      "alloc 2 24 s0 all_gather",  // lazy init, as without offload
      "free 2",
      "alloc 3 40 s0 all_gather",
      "free 3",
      "alloc 4 40 s0 all_gather",
      "free 4",
      "alloc 5 12 s3 all_gather",  // the root's shard copied to the device
      "alloc 6 24 s1 all_gather",
      "free 5",
      "alloc 7 20 s3 all_gather",
      "alloc 8 40 s1 all_gather",
      "free 7",
      "compute forward a",
      "alloc 9 200 s0 activation",
      "free 8",
      "alloc 10 20 s3 all_gather",
      "alloc 11 40 s1 all_gather",
      "free 10",
      "compute forward b",
      "alloc 12 200 s0 activation",
      "free 11",
      "compute forward head",
      "alloc 13 4 s0 activation",
      "mark after fwd",
      "phase backward",
      "alloc 14 4 s0 grad",
      "alloc 15 12 s3 all_gather",  // the root's pre-backward pre_unshard: copied, not gathered
      "free 15",
      "alloc 16 20 s3 all_gather",  // b prefetched
      "alloc 17 40 s1 all_gather",
      "free 16",
      "compute backward head",
      "alloc 18 24 s0 grad",
      "alloc 19 200 s0 grad",
      "free 14",
      "free 12",
      "alloc 20 20 s3 all_gather",
      "alloc 21 40 s1 all_gather",
      "free 20",
      "compute backward b",
      "alloc 22 40 s0 grad",
      "alloc 23 200 s0 grad",
      "free 19",
      "free 9",
      "free 17",
      "rs 2.0 g1 fp32 5 view",
      "free 22",
      "compute backward a",
      "alloc 24 40 s0 grad",
      "free 23",
      "free 21",
      "rs 1.0 g1 fp32 5 view",
      "free 24",
      "free 6",
      "rs 0.0 g1 fp32 3 view",
      "free 18",
      "flush",
      "zero_grad",  // the final callback: the device's reduced shards go
      "mark after bwd",
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "free 13",
  };
  EXPECT_EQ(Emit(Chain(), options), expected);
}

// Offloaded with bf16 parameters, each `_mp_shard` is cast from a transient fp32 device copy of
// the CPU shard (_local_shard.to(device)). SHARD_GRAD_OP keeps the unsharded parameters after
// forward, yet each pre-backward unshard (the root's, and its prefetch of b) still makes and frees
// `_mp_shard` and its copy: offloaded, pre_unshard does not skip a unit that needs no all-gather.
TEST(TorchFsdp1, CpuOffloadWithMixedPrecisionCastsFromADeviceCopy) {
  GenOptions options = Fsdp1Options(2);
  options.offload_params = true;
  options.compute_dtype = DType::kBFloat16;
  options.reduce_dtype = DType::kFloat32;
  options.fsdp1.sharding_strategy = ShardingStrategy::kShardGradOp;
  const std::vector<std::string> events = Emit(Chain(), options);
  const auto at = std::find(events.begin(), events.end(), "alloc 24 4 s0 grad");
  ASSERT_NE(at, events.end()) << ::testing::PrintToString(events);
  EXPECT_EQ(std::vector<std::string>(at - 23, at - 18),
            (std::vector<std::string>{
                "alloc 12 6 s3 all_gather",   // the root's _mp_shard (3 bf16 elements)
                "alloc 13 12 s3 all_gather",  // from a device copy of its fp32 shard
                "free 13",
                "alloc 14 12 s1 all_gather",  // the padded unsharded flat parameter
                "free 12",                    // post_unshard
            }));
  EXPECT_EQ(std::vector<std::string>(at + 1, at + 10),
            (std::vector<std::string>{
                "alloc 25 6 s3 all_gather",  // the root: still unsharded, yet cast again
                "alloc 26 12 s3 all_gather",
                "free 26",
                "free 25",
                "alloc 27 10 s3 all_gather",  // b, prefetched: likewise
                "alloc 28 20 s3 all_gather",
                "free 28",
                "free 27",
                "compute backward head",
            }));
}

// NO_SHARD offloaded: each unshard copies the whole flat parameter to the device, and its reshard
// drops the copy (_use_sharded_flat_param points .data back at the CPU one). The all-reduced
// gradients stay flat_param.grad on the device until the final callback makes `_cpu_grad` the
// gradient.
TEST(TorchFsdp1, CpuOffloadNoShardComputesWithADeviceCopy) {
  GenOptions options = Fsdp1Options(2);
  options.offload_params = true;
  options.fsdp1.sharding_strategy = ShardingStrategy::kNoShard;
  const std::vector<std::string> events = Emit(Chain(), options);
  const std::vector<std::string> forward(events.begin() + 3, events.begin() + 14);
  EXPECT_EQ(forward, (std::vector<std::string>{
                         "alloc 2 24 s3 all_gather",  // the root's 6 fp32 elements
                         "alloc 3 40 s3 all_gather",  // a's 10
                         "compute forward a",
                         "alloc 4 200 s0 activation",
                         "free 3",  // a's post-forward reshard
                         "alloc 5 40 s3 all_gather",
                         "compute forward b",
                         "alloc 6 200 s0 activation",
                         "free 5",
                         "compute forward head",
                         "alloc 7 4 s0 activation",
                     }));
  const std::vector<std::string> tail(events.end() - 11, events.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"flush", "zero_grad",
                                            "free 11",  // the root's gradient, then a's, then b's
                                            "free 16", "free 14", "mark after bwd", "phase step",
                                            "compute optimizer step", "mark after step",
                                            "phase zero_grad", "free 7"}));
}

// The lines of the trace that are the framework's collectives, or that come right before one.
std::vector<std::string> CollectivesInContext(const std::vector<std::string>& events) {
  std::vector<std::string> lines;
  for (std::size_t i = 1; i < events.size(); ++i) {
    if (events[i].starts_with("all_")) {
      lines.push_back(events[i - 1]);
      lines.push_back(events[i]);
    }
  }
  return lines;
}

// Each unshard all-gathers each rank's shard (3 elements of the root, 5 of a unit) into the
// padded unsharded flat parameter it has just allocated, over the shard group, on the unshard
// stream (fp _all_gather_flat_param); the chain gathers root, a, b in forward and b, a in
// backward (BACKWARD_PRE prefetches a in b's pre-backward).
TEST(TorchFsdp1Collectives, EachUnshardAllGathersIntoTheBufferItAllocated) {
  EXPECT_EQ(CollectivesInContext(testing::EmitSummary(Chain(), Fsdp1Options(2), true)),
            (std::vector<std::string>{
                "alloc 8 24 s1 all_gather", "all_gather 8 s1 g1 fp32 3",    // root
                "alloc 9 40 s1 all_gather", "all_gather 9 s1 g1 fp32 5",    // a
                "alloc 11 40 s1 all_gather", "all_gather 11 s1 g1 fp32 5",  // b
                "alloc 15 40 s1 all_gather", "all_gather 15 s1 g1 fp32 5",  // b, backward
                "alloc 18 40 s1 all_gather", "all_gather 18 s1 g1 fp32 5",  // a, prefetched
            }));
}

// With bf16 parameters the all-gather reads the bf16 `_mp_shard`, which goes after it.
TEST(TorchFsdp1Collectives, MixedPrecisionGathersTheLowPrecisionShard) {
  GenOptions options = Fsdp1Options(2);
  options.compute_dtype = DType::kBFloat16;
  const std::vector<std::string> events = testing::EmitSummary(Chain(), options, true);
  const auto gather = std::find(events.begin(), events.end(), "all_gather 16 s1 g1 bf16 3");
  ASSERT_NE(gather, events.end()) << ::testing::PrintToString(events);
  EXPECT_EQ(*(gather - 1), "alloc 16 12 s1 all_gather");
  EXPECT_EQ(*(gather - 2), "alloc 15 6 s3 all_gather");  // `_mp_shard`, on the pre-unshard stream
  EXPECT_EQ(*(gather + 1), "free 15");
}

// NO_SHARD gathers nothing; each post-backward all-reduces the flat gradient in place over the
// process group (rt _reduce_grad_no_shard), in the order backward reaches the units: b, a,
// then the root right after a (its head's gradient was waiting).
TEST(TorchFsdp1Collectives, NoShardAllReducesEachFlatGradient) {
  GenOptions options = Fsdp1Options(2);
  options.fsdp1.sharding_strategy = ShardingStrategy::kNoShard;
  EXPECT_EQ(CollectivesInContext(testing::EmitSummary(Chain(), options, true)),
            (std::vector<std::string>{"free 5", "all_reduce 11 s2 g1 fp32 10", "free 12",
                                      "all_reduce 13 s2 g1 fp32 10", "all_reduce 13 s2 g1 fp32 10",
                                      "all_reduce 9 s2 g1 fp32 6"}));
}

}  // namespace
}  // namespace bucketsim
