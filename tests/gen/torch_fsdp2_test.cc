// PyTorch FSDP2 (fully_shard, torch 2.6) in the emitter (src/gen/torch_fsdp2.cc) on tiny
// programs: every event of a training step written out and derived in the comments.
//
// The program: root (no parameters, not gathered) and two units, l1 and l2, each one flat
// parameter of two views, w (5 elements) and b (2): FSDP2 makes them four parameters. At
// world size 2 (testing::TinyFsdpOptions: fp32, SGD, one iteration) each is chunked on dim 0
// (1-D): w into chunks of 3 (rank 0: 3, rank 1: 2, padded to 3), b into chunks of 1. So a
// unit's padded shards are 3 + 1 elements (12 + 4 bytes); its all-gather output 2 x 4 x 4 =
// 32 bytes; its unsharded parameters 6 x 4 = 24 and 2 x 4 = 8 bytes; the gradients autograd
// makes are the unpadded views' (20 and 8 bytes).
#include <algorithm>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gen/fsdp_emitter.h"
#include "gen/model_program.h"
#include "gen/program_builder.h"
#include "tiny_fsdp.h"

namespace bucketsim {
namespace {

GenOptions Fsdp2Options(int world_size) {
  GenOptions options = testing::TinyFsdpOptions(world_size);
  options.fsdp_impl = FsdpImpl::kFsdp2;
  return options;
}

std::vector<std::string> Emit(const ModelProgram& model, const GenOptions& options) {
  return testing::EmitSummary(model, options);
}

GenParam Flat(const std::string& unit) {
  return {"flat_param_0", 7, {{unit + ".w", 5}, {unit + ".b", 2}}};
}

// x (100 bytes, no grad) -> l1: h = x W1 + b1 (saves x) -> l2: y = h W2 + b2 (saves h) ->
// loss = mean(y). With `checkpoint`, l2's whole forward is a checkpointed region.
ModelProgram TwoUnits(bool checkpoint = false) {
  ProgramBuilder program("fsdp2 tiny");
  program.AddInstance({"root", {}, true, false});
  const std::size_t l1 = program.AddInstance({"l1", {Flat("l1")}, true, true});
  const std::size_t l2 = program.AddInstance({"l2", {Flat("l2")}, true, true});
  program.AddInput(Tensor("x", 100, "fp32"));
  program.Gather(l1);
  program.Run("l1", 0, {l1}, {In("x")}, {Tensor("h", 200, "fp32")}, {Keep("x")}).param_reads =
      std::vector<std::string>{"l1.w", "l1.b"};
  program.EndForward(l1);
  if (checkpoint) program.CheckpointBegin({Keep("h")});
  program.Gather(l2);
  program.Run("l2", 0, {l2}, {In("h")}, {Tensor("y", 200, "fp32")}, {Keep("h")}).param_reads =
      std::vector<std::string>{"l2.w", "l2.b"};
  program.EndForward(l2);
  if (checkpoint) program.CheckpointEnd();
  program.Run("loss", 0, {}, {In("y")}, {Tensor("loss", 4, "fp32")});
  program.SetLoss("loss");
  return program.Take();
}

// reshard_after_forward=True (the default): each unit gathers in its pre-forward and frees in
// its post-forward; in backward it gathers again and prefetches the unit before it in
// post-forward order.
TEST(TorchFsdp2, ReshardAfterForwardTrue) {
  const GenOptions options = Fsdp2Options(2);
  const std::vector<std::string> expected = {
      "alloc 1 12 s0 param",
      "alloc 2 4 s0 param",
      "alloc 3 12 s0 param",
      "alloc 4 4 s0 param",
      "alloc 5 100 s0 activation",
      "iteration 0",
      "phase forward",
      "alloc 6 32 s1 all_gather",  // l1 all_gather_copy_in: output 2 x (3 + 1) x 4
      "alloc 7 24 s0 all_gather",  // copy-out: w unsharded, padded (6 x 4)
      "alloc 8 8 s0 all_gather",   // b unsharded (2 x 4)
      "compute forward l1",
      "alloc 9 200 s0 activation",
      "free 7",  // l1 post_forward: reshard (free_unsharded_param)
      "free 8",
      "alloc 10 32 s1 all_gather",  // l2 all_gather_copy_in
      "alloc 11 24 s0 all_gather",
      "alloc 12 8 s0 all_gather",
      // l1's all-gather output: taken out of all_gather_state before l2's copy-out, freed
      // after it, when wait_for_unshard's local that holds it goes
      "free 6",
      "compute forward l2",
      "alloc 13 200 s0 activation",
      "free 11",
      "free 12",
      "free 10",  // the root's post-forward frees the last all_gather_state
      "compute forward loss",
      "alloc 14 4 s0 activation",
      "free 13",
      "mark after fwd",
      "phase backward",
      "alloc 15 4 s0 grad",
      "compute backward loss",
      "alloc 16 200 s0 grad",
      "free 15",
      "alloc 17 32 s1 all_gather",  // l2 pre_backward: unshard
      "alloc 18 24 s0 all_gather",
      "alloc 19 8 s0 all_gather",
      "free 17",  // ... its output freed right after the copy-out (not in forward)
      "alloc 20 32 s1 all_gather",  // _backward_prefetch: l1's all-gather, pending
      "compute backward l2",
      "alloc 21 20 s0 grad",  // l2.w's gradient (5 x 4): a view's, no cat
      "alloc 22 8 s0 grad",
      "alloc 23 200 s0 grad",
      "free 16",
      "free 9",
      "free 18",  // l2 post_backward: reshard
      "free 19",
      "rs 2.0 g1 fp32 3 view",  // the policy allocates l2's reduce-scatter input here
      "free 21",                // unsharded_grads.clear() after the copy-in
      "free 22",
      "rs 2.1 g1 fp32 1 view",      // ... and its output here
      "alloc 24 24 s0 all_gather",  // l1 pre_backward: the prefetched all-gather's copy-out
      "alloc 25 8 s0 all_gather",
      "free 20",
      "compute backward l1",
      "alloc 26 20 s0 grad",
      "alloc 27 8 s0 grad",
      "free 23",
      "free 24",
      "free 25",
      "rs 1.0 g1 fp32 3 view",
      "free 26",
      "free 27",
      "rs 1.1 g1 fp32 1 view",
      "flush",  // the root's final callback drops the last reduce-scatter input
      "mark after bwd",
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "zero_grad",
      "free 14",
  };
  EXPECT_EQ(Emit(TwoUnits(), options), expected);
}

// reshard_after_forward=False: the unsharded parameters stay until the post-backward reshard;
// backward neither gathers nor prefetches (unshard is a no-op on an unsharded group).
TEST(TorchFsdp2, ReshardAfterForwardFalseKeepsTheUnshardedParametersUntilPostBackward) {
  GenOptions options = Fsdp2Options(2);
  options.reshard_after_forward = false;
  const std::vector<std::string> expected = {
      "alloc 1 12 s0 param",
      "alloc 2 4 s0 param",
      "alloc 3 12 s0 param",
      "alloc 4 4 s0 param",
      "alloc 5 100 s0 activation",
      "iteration 0",
      "phase forward",
      "alloc 6 32 s1 all_gather",
      "alloc 7 24 s0 all_gather",
      "alloc 8 8 s0 all_gather",
      "compute forward l1",
      "alloc 9 200 s0 activation",
      "alloc 10 32 s1 all_gather",
      "alloc 11 24 s0 all_gather",
      "alloc 12 8 s0 all_gather",
      "free 6",
      "compute forward l2",
      "alloc 13 200 s0 activation",
      "free 10",  // l2's all-gather output at the root's post-forward; 7, 8, 11, 12 stay
      "compute forward loss",
      "alloc 14 4 s0 activation",
      "free 13",
      "mark after fwd",
      "phase backward",
      "alloc 15 4 s0 grad",
      "compute backward loss",
      "alloc 16 200 s0 grad",
      "free 15",
      "compute backward l2",
      "alloc 17 20 s0 grad",
      "alloc 18 8 s0 grad",
      "alloc 19 200 s0 grad",
      "free 16",
      "free 9",
      "free 11",  // l2 post_backward: reshard_after_backward
      "free 12",
      "rs 2.0 g1 fp32 3 view",
      "free 17",
      "free 18",
      "rs 2.1 g1 fp32 1 view",
      "compute backward l1",
      "alloc 20 20 s0 grad",
      "alloc 21 8 s0 grad",
      "free 19",
      "free 7",
      "free 8",
      "rs 1.0 g1 fp32 3 view",
      "free 20",
      "free 21",
      "rs 1.1 g1 fp32 1 view",
      "flush",
      "mark after bwd",
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "zero_grad",
      "free 14",
  };
  EXPECT_EQ(Emit(TwoUnits(), options), expected);
}

// World size 4, reshard_after_forward=2: w is chunked by 2 (padded 2 x 4 = 8 elements), b by 1
// (4); after forward each parameter keeps a clone of its half of the unsharded one
// (_to_sharded_post_forward), and backward all-gathers from those over 2 ranks.
TEST(TorchFsdp2, ReshardAfterForwardToTwoOfFourRanksKeepsAHalfAndGathersFromIt) {
  GenOptions options = Fsdp2Options(4);
  options.reshard_after_forward_ranks = 2;
  const std::vector<std::string> expected = {
      "alloc 1 8 s0 param",
      "alloc 2 4 s0 param",
      "alloc 3 8 s0 param",
      "alloc 4 4 s0 param",
      "alloc 5 100 s0 activation",
      "iteration 0",
      "phase forward",
      "alloc 6 48 s1 all_gather",  // 4 ranks x (2 + 1) x 4
      "alloc 7 32 s0 all_gather",
      "alloc 8 16 s0 all_gather",
      "compute forward l1",
      "alloc 9 200 s0 activation",
      "alloc 10 16 s0 all_gather",  // w's post-forward half: 8 / 2 x 4
      "free 7",                     // ... then its unsharded tensor
      "alloc 11 8 s0 all_gather",
      "free 8",
      "alloc 12 48 s1 all_gather",
      "alloc 13 32 s0 all_gather",
      "alloc 14 16 s0 all_gather",
      "free 6",
      "compute forward l2",
      "alloc 15 200 s0 activation",
      "alloc 16 16 s0 all_gather",
      "free 13",
      "alloc 17 8 s0 all_gather",
      "free 14",
      "free 12",
      "compute forward loss",
      "alloc 18 4 s0 activation",
      "free 15",
      "mark after fwd",
      "phase backward",
      "alloc 19 4 s0 grad",
      "compute backward loss",
      "alloc 20 200 s0 grad",
      "free 19",
      "alloc 21 48 s1 all_gather",  // l2 gathers over 2 ranks: 2 x (4 + 2) x 4
      "alloc 22 32 s0 all_gather",
      "alloc 23 16 s0 all_gather",
      "free 16",  // to_unsharded frees the post-forward halves
      "free 17",
      "free 21",
      "alloc 24 48 s1 all_gather",
      "compute backward l2",
      "alloc 25 20 s0 grad",
      "alloc 26 8 s0 grad",
      "alloc 27 200 s0 grad",
      "free 20",
      "free 9",
      "free 22",
      "free 23",
      "rs 2.0 g1 fp32 2 view",
      "free 25",
      "free 26",
      "rs 2.1 g1 fp32 1 view",
      "alloc 28 32 s0 all_gather",
      "alloc 29 16 s0 all_gather",
      "free 10",
      "free 11",
      "free 24",
      "compute backward l1",
      "alloc 30 20 s0 grad",
      "alloc 31 8 s0 grad",
      "free 27",
      "free 28",
      "free 29",
      "rs 1.0 g1 fp32 2 view",
      "free 30",
      "free 31",
      "rs 1.1 g1 fp32 1 view",
      "flush",
      "mark after bwd",
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "zero_grad",
      "free 18",
  };
  EXPECT_EQ(Emit(TwoUnits(), options), expected);
}

// MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): the shards are cast into one flat
// bf16 copy-in tensor (the foreach-copy path), freed once the all-gather output exists; the
// unsharded parameters and their gradients are bf16; the requests are fp32 (the policy's
// input is then 2 x 4 x 4 bytes) and their output, fp32 like the parameters, is viewed.
TEST(TorchFsdp2, Bf16ParamsWithFp32ReduceCastTheShardsBeforeTheAllGather) {
  GenOptions options = Fsdp2Options(2);
  options.compute_dtype = DType::kBFloat16;
  options.reduce_dtype = DType::kFloat32;
  // The program's activations are fp32; the units' input casts are program_boundary_casts_test's.
  options.fsdp2.cast_forward_inputs = false;
  const std::vector<std::string> expected = {
      "alloc 1 12 s0 param",
      "alloc 2 4 s0 param",
      "alloc 3 12 s0 param",
      "alloc 4 4 s0 param",
      "alloc 5 100 s0 activation",
      "iteration 0",
      "phase forward",
      "alloc 6 8 s1 all_gather",   // flat bf16 copy-in: (3 + 1) x 2
      "alloc 7 16 s1 all_gather",  // all-gather output 2 x 4 x 2
      "free 6",
      "alloc 8 12 s0 all_gather",
      "alloc 9 4 s0 all_gather",
      "compute forward l1",
      "alloc 10 200 s0 activation",
      "free 8",
      "free 9",
      "alloc 11 8 s1 all_gather",
      "alloc 12 16 s1 all_gather",
      "free 11",
      "alloc 13 12 s0 all_gather",
      "alloc 14 4 s0 all_gather",
      "free 7",
      "compute forward l2",
      "alloc 15 200 s0 activation",
      "free 13",
      "free 14",
      "free 12",
      "compute forward loss",
      "alloc 16 4 s0 activation",
      "free 15",
      "mark after fwd",
      "phase backward",
      "alloc 17 4 s0 grad",
      "compute backward loss",
      "alloc 18 200 s0 grad",
      "free 17",
      "alloc 19 8 s1 all_gather",
      "alloc 20 16 s1 all_gather",
      "free 19",
      "alloc 21 12 s0 all_gather",
      "alloc 22 4 s0 all_gather",
      "free 20",
      "alloc 23 8 s1 all_gather",
      "alloc 24 16 s1 all_gather",
      "free 23",
      "compute backward l2",
      "alloc 25 10 s0 grad",  // l2.w gradient in bf16: 5 x 2
      "alloc 26 4 s0 grad",
      "alloc 27 200 s0 grad",
      "free 18",
      "free 10",
      "free 21",
      "free 22",
      "rs 2.0 g1 fp32 3 view",
      "free 25",
      "free 26",
      "rs 2.1 g1 fp32 1 view",
      "alloc 28 12 s0 all_gather",
      "alloc 29 4 s0 all_gather",
      "free 24",
      "compute backward l1",
      "alloc 30 10 s0 grad",
      "alloc 31 4 s0 grad",
      "free 27",
      "free 28",
      "free 29",
      "rs 1.0 g1 fp32 3 view",
      "free 30",
      "free 31",
      "rs 1.1 g1 fp32 1 view",
      "flush",
      "mark after bwd",
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "zero_grad",
      "free 16",
  };
  EXPECT_EQ(Emit(TwoUnits(), options), expected);
}

// World size 1: FSDP2 does not special-case it: the shard is the whole parameter, the
// all-gather and the reduce-scatter still run (and allocate).
TEST(TorchFsdp2, OneRankGathersAndReducesLikeAnyOther) {
  const GenOptions options = Fsdp2Options(1);
  const std::vector<std::string> expected = {
      "alloc 1 20 s0 param",
      "alloc 2 8 s0 param",
      "alloc 3 20 s0 param",
      "alloc 4 8 s0 param",
      "alloc 5 100 s0 activation",
      "iteration 0",
      "phase forward",
      "alloc 6 28 s1 all_gather",
      "alloc 7 20 s0 all_gather",
      "alloc 8 8 s0 all_gather",
      "compute forward l1",
      "alloc 9 200 s0 activation",
      "free 7",
      "free 8",
      "alloc 10 28 s1 all_gather",
      "alloc 11 20 s0 all_gather",
      "alloc 12 8 s0 all_gather",
      "free 6",
      "compute forward l2",
      "alloc 13 200 s0 activation",
      "free 11",
      "free 12",
      "free 10",
      "compute forward loss",
      "alloc 14 4 s0 activation",
      "free 13",
      "mark after fwd",
      "phase backward",
      "alloc 15 4 s0 grad",
      "compute backward loss",
      "alloc 16 200 s0 grad",
      "free 15",
      "alloc 17 28 s1 all_gather",
      "alloc 18 20 s0 all_gather",
      "alloc 19 8 s0 all_gather",
      "free 17",
      "alloc 20 28 s1 all_gather",
      "compute backward l2",
      "alloc 21 20 s0 grad",
      "alloc 22 8 s0 grad",
      "alloc 23 200 s0 grad",
      "free 16",
      "free 9",
      "free 18",
      "free 19",
      "rs 2.0 g1 fp32 5 view",
      "free 21",
      "free 22",
      "rs 2.1 g1 fp32 2 view",
      "alloc 24 20 s0 all_gather",
      "alloc 25 8 s0 all_gather",
      "free 20",
      "compute backward l1",
      "alloc 26 20 s0 grad",
      "alloc 27 8 s0 grad",
      "free 23",
      "free 24",
      "free 25",
      "rs 1.0 g1 fp32 5 view",
      "free 26",
      "free 27",
      "rs 1.1 g1 fp32 2 view",
      "flush",
      "mark after bwd",
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "zero_grad",
      "free 14",
  };
  EXPECT_EQ(Emit(TwoUnits(), options), expected);
}

// Rank 1: w's chunk is 2 of 5 elements, stored padded to 3; lazy_init's reset_sharded_param
// replaces the shorter local tensor by a new padded one (b's chunk is full: nothing).
TEST(TorchFsdp2, ARankWithAShortChunkRepadsItsShardAtLazyInit) {
  GenOptions options = Fsdp2Options(2);
  options.rank = 1;
  const std::vector<std::string> expected = {
      "alloc 1 12 s0 param",
      "alloc 2 4 s0 param",
      "alloc 3 12 s0 param",
      "alloc 4 4 s0 param",
      "alloc 5 100 s0 activation",
      "iteration 0",
      "phase forward",
      "alloc 6 12 s0 param",  // reset_sharded_param: l1.w's new padded shard
      "free 1",               // ... the old one goes
      "alloc 7 12 s0 param",
      "free 3",
      "alloc 8 32 s1 all_gather",
      "alloc 9 24 s0 all_gather",
      "alloc 10 8 s0 all_gather",
      "compute forward l1",
      "alloc 11 200 s0 activation",
      "free 9",
      "free 10",
      "alloc 12 32 s1 all_gather",
      "alloc 13 24 s0 all_gather",
      "alloc 14 8 s0 all_gather",
      "free 8",
      "compute forward l2",
      "alloc 15 200 s0 activation",
      "free 13",
      "free 14",
      "free 12",
      "compute forward loss",
      "alloc 16 4 s0 activation",
      "free 15",
      "mark after fwd",
      "phase backward",
      "alloc 17 4 s0 grad",
      "compute backward loss",
      "alloc 18 200 s0 grad",
      "free 17",
      "alloc 19 32 s1 all_gather",
      "alloc 20 24 s0 all_gather",
      "alloc 21 8 s0 all_gather",
      "free 19",
      "alloc 22 32 s1 all_gather",
      "compute backward l2",
      "alloc 23 20 s0 grad",
      "alloc 24 8 s0 grad",
      "alloc 25 200 s0 grad",
      "free 18",
      "free 11",
      "free 20",
      "free 21",
      "rs 2.0 g1 fp32 3 view",
      "free 23",
      "free 24",
      "rs 2.1 g1 fp32 1 view",
      "alloc 26 24 s0 all_gather",
      "alloc 27 8 s0 all_gather",
      "free 22",
      "compute backward l1",
      "alloc 28 20 s0 grad",
      "alloc 29 8 s0 grad",
      "free 25",
      "free 26",
      "free 27",
      "rs 1.0 g1 fp32 3 view",
      "free 28",
      "free 29",
      "rs 1.1 g1 fp32 1 view",
      "flush",
      "mark after bwd",
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "zero_grad",
      "free 16",
  };
  EXPECT_EQ(Emit(TwoUnits(), options), expected);
}

// l2 under a (non-reentrant) checkpoint: its pre-backward hook fires on its output's gradient,
// before the recomputation, whose forward hooks then do nothing.
TEST(TorchFsdp2, CheckpointedUnitGathersInItsPreBackwardBeforeTheRecompute) {
  const GenOptions options = Fsdp2Options(2);
  const std::vector<std::string> expected = {
      "alloc 1 12 s0 param",
      "alloc 2 4 s0 param",
      "alloc 3 12 s0 param",
      "alloc 4 4 s0 param",
      "alloc 5 100 s0 activation",
      "iteration 0",
      "phase forward",
      "alloc 6 32 s1 all_gather",
      "alloc 7 24 s0 all_gather",
      "alloc 8 8 s0 all_gather",
      "compute forward l1",
      "alloc 9 200 s0 activation",
      "free 7",
      "free 8",
      "alloc 10 32 s1 all_gather",
      "alloc 11 24 s0 all_gather",
      "alloc 12 8 s0 all_gather",
      "free 6",
      "compute forward l2",
      "alloc 13 200 s0 activation",
      "free 11",
      "free 12",
      "free 10",
      "compute forward loss",
      "alloc 14 4 s0 activation",
      "free 13",
      "mark after fwd",
      "phase backward",
      "alloc 15 4 s0 grad",
      "compute backward loss",
      "alloc 16 200 s0 grad",
      "free 15",
      "alloc 17 32 s1 all_gather",  // l2 pre_backward, then the prefetch of l1 (20)
      "alloc 18 24 s0 all_gather",
      "alloc 19 8 s0 all_gather",
      "free 17",
      "alloc 20 32 s1 all_gather",
      "compute recompute l2",
      "alloc 21 200 s0 activation",  // the recomputed y
      "compute backward l2",
      "alloc 22 20 s0 grad",
      "alloc 23 8 s0 grad",
      "alloc 24 200 s0 grad",
      "free 18",
      "free 19",
      "rs 2.0 g1 fp32 3 view",
      "free 22",
      "free 23",
      "rs 2.1 g1 fp32 1 view",
      "free 16",
      "free 21",
      "free 9",
      "alloc 25 24 s0 all_gather",
      "alloc 26 8 s0 all_gather",
      "free 20",
      "compute backward l1",
      "alloc 27 20 s0 grad",
      "alloc 28 8 s0 grad",
      "free 24",
      "free 25",
      "free 26",
      "rs 1.0 g1 fp32 3 view",
      "free 27",
      "free 28",
      "rs 1.1 g1 fp32 1 view",
      "flush",
      "mark after bwd",
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "zero_grad",
      "free 14",
  };
  EXPECT_EQ(Emit(TwoUnits(/*checkpoint=*/true), options), expected);
}

// The same region non-reentrant: what it keeps (h, 9) belongs to its _CheckpointFrame, which
// dies with the last saved-tensor holder of its nodes, l2's backward: before l2's post_backward
// and its reduce-scatters, where the reentrant region's ctx keeps h until its backward node
// returns, after them.
TEST(TorchFsdp2, ANonReentrantRegionsKeptInputsGoWithItsLastSavingNode) {
  const GenOptions options = Fsdp2Options(2);
  ModelProgram model = TwoUnits(/*checkpoint=*/true);
  const auto at = [](const std::vector<std::string>& events, const std::string& event) {
    return std::find(events.begin(), events.end(), event) - events.begin();
  };
  const std::vector<std::string> reentrant = Emit(model, options);
  EXPECT_GT(at(reentrant, "free 9"), at(reentrant, "rs 2.1 g1 fp32 1 view"));
  for (ForwardOp& op : model.forward) {
    if (op.kind == OpKind::kCheckpointBegin) op.reentrant = false;
  }
  const std::vector<std::string> events = Emit(model, options);
  // The recompute stops at l2, its one saving run, before its kernel (its saves, h and its
  // weight, are packed first): nothing is rerun.
  const std::vector<std::string> backward = {
      "compute backward l2",
      "alloc 21 20 s0 grad",
      "alloc 22 8 s0 grad",
      "alloc 23 200 s0 grad",  // grad h
      "free 16",               // grad y, l2's incoming gradient
      "free 9",                // h: l2's save, and the frame's
      "free 18",               // post_backward: reshard, then reduce-scatter
      "free 19",
      "rs 2.0 g1 fp32 3 view",
  };
  EXPECT_NE(std::search(events.begin(), events.end(), backward.begin(), backward.end()),
            events.end())
      << ::testing::PrintToString(
             std::vector<std::string>(events.begin() + at(events, "phase backward"), events.end()));
}

// set_modules_to_forward_prefetch([l2]) on l1 and set_modules_to_backward_prefetch([l1]) on
// l2 (--modules-to-forward-prefetch 1 --modules-to-backward-prefetch 1): l1's pre-forward
// all-gathers l2 after its own copy-out, before l1 computes; in backward l2's explicit list
// stands in for the implicit prefetch (the same unit here: the events are the implicit run's).
TEST(TorchFsdp2, ExplicitPrefetchGathersTheListedUnitsAfterTheCopyOut) {
  GenOptions options = Fsdp2Options(2);
  options.fsdp2.forward_prefetch_modules = 1;
  const std::vector<std::string> events = Emit(TwoUnits(), options);
  const std::vector<std::string> forward = {
      "phase forward",
      "alloc 6 32 s1 all_gather",  // l1 all_gather_copy_in
      "alloc 7 24 s0 all_gather",  // l1 copy-out
      "alloc 8 8 s0 all_gather",
      "alloc 9 32 s1 all_gather",  // l2 prefetched: its all-gather output, no copy-out yet
      "compute forward l1",
      "alloc 10 200 s0 activation",
      "free 7",  // l1 post_forward
      "free 8",
      "alloc 11 24 s0 all_gather",  // l2 pre_forward: unshard is a no-op, wait_for_unshard
      "alloc 12 8 s0 all_gather",   // copies out
      "free 6",                     // l1's all-gather output, the previous all_gather_state
      "compute forward l2",
  };
  EXPECT_NE(std::search(events.begin(), events.end(), forward.begin(), forward.end()), events.end())
      << ::testing::PrintToString(events);
  options.fsdp2.forward_prefetch_modules = 0;
  options.fsdp2.backward_prefetch_modules = 1;
  EXPECT_EQ(Emit(TwoUnits(), options), Emit(TwoUnits(), Fsdp2Options(2)));
  // The setting says how to get it.
  options.fsdp2.forward_prefetch_modules = 2;
  EXPECT_NE(TorchFsdpSetting(options).find(
                "then set_modules_to_forward_prefetch as PyTorch's FSDP2 example "
                "(num_to_forward_prefetch=2), then set_modules_to_backward_prefetch as PyTorch's "
                "FSDP2 example (num_to_backward_prefetch=1)"),
            std::string::npos)
      << TorchFsdpSetting(options);
}

// A recorded model's units with settings of their own (FsdpUnit::settings, by instance
// name) are emitted as the same settings given for every unit would be: explicit lists as
// --modules-to-forward-prefetch 1 makes them, reshard_after_forward=False on each unit as the
// option. A unit that keeps its own (l2) while the other follows the option gathers only once.
TEST(TorchFsdp2, AUnitsOwnSettingsAreItsOwn) {
  GenOptions n_ahead = Fsdp2Options(2);
  n_ahead.fsdp2.forward_prefetch_modules = 1;
  ModelProgram listed = TwoUnits();
  listed.units[1].settings.modules_to_forward_prefetch = std::vector<std::string>{"l2"};
  EXPECT_EQ(Emit(listed, Fsdp2Options(2)), Emit(TwoUnits(), n_ahead));

  GenOptions kept = Fsdp2Options(2);
  kept.reshard_after_forward = false;
  ModelProgram own = TwoUnits();
  for (std::size_t f : {1, 2}) {
    own.units[f].settings.reshard_after_forward = UnitSettings::Reshard{false, 0};
  }
  EXPECT_EQ(Emit(own, Fsdp2Options(2)), Emit(TwoUnits(), kept));

  ModelProgram last_kept = TwoUnits();
  last_kept.units[2].settings.reshard_after_forward = UnitSettings::Reshard{false, 0};
  const auto gathers = [](const std::vector<std::string>& events) {
    return std::count_if(events.begin(), events.end(),
                         [](const std::string& e) { return e.starts_with("all_gather"); });
  };
  EXPECT_EQ(gathers(testing::EmitSummary(TwoUnits(), Fsdp2Options(2), true)), 4);
  EXPECT_EQ(gathers(testing::EmitSummary(last_kept, Fsdp2Options(2), true)), 3);
}

TEST(TorchFsdp2, UnitSettingsThatCannotBeEmittedAreErrors) {
  testing::RecordingSink sink;
  ModelProgram unknown = TwoUnits();
  unknown.units[1].settings.modules_to_backward_prefetch = std::vector<std::string>{"l3"};
  EXPECT_EQ(EmitFsdpTrace(unknown, Fsdp2Options(2), sink).message(),
            "fsdp2: unit l1 prefetches l3, which is not a unit of this model");
  ModelProgram meshes = TwoUnits();
  meshes.units[1].settings.reshard_after_forward = UnitSettings::Reshard{true, 2};
  meshes.units[2].settings.reshard_after_forward = UnitSettings::Reshard{true, 4};
  EXPECT_EQ(EmitFsdpTrace(meshes, Fsdp2Options(8), sink).message(),
            "fsdp2: units reshard after forward to meshes of 2 and 4 ranks; one size is modelled");
  meshes.units[2].settings.reshard_after_forward = UnitSettings::Reshard{true, 3};
  EXPECT_EQ(EmitFsdpTrace(meshes, Fsdp2Options(8), sink).message(),
            "fsdp2: unit l2 reshards after forward to 3 ranks, which does not divide its shard "
            "group's 8");
}

// l2.b read by no run (a dead branch): no gradient reaches it, so l2's post-backward reduces
// l2.w alone (foreach_reduce's fsdp_params_with_grad) and says so first ("no_grad": the policy
// sizes the input without it), its .grad stays None and Adam makes no state for it
// (`if p.grad is not None`): three parameters' exp_avg and exp_avg_sq, not four.
TEST(TorchFsdp2, AParameterWithoutAGradientIsLeftOutOfTheReductionAndTheStep) {
  ModelProgram model = TwoUnits();
  model.forward[4].param_reads = std::vector<std::string>{"l2.w"};
  GenOptions options = Fsdp2Options(2);
  options.optimizer = OptimizerKind::kAdam;
  const std::vector<std::string> events = Emit(model, options);
  const auto at = std::find(events.begin(), events.end(), "compute backward l2");
  ASSERT_NE(at, events.end()) << ::testing::PrintToString(events);
  EXPECT_EQ(std::vector<std::string>(at + 1, at + 10),
            (std::vector<std::string>{
                "alloc 21 20 s0 grad",  // l2.w's gradient (5 elements), none for l2.b
                "alloc 22 200 s0 grad", "free 16", "free 9", "free 18", "free 19",
                "rs 2.1 g1 fp32 1 no_grad",  // first: l2.b is left out
                "rs 2.0 g1 fp32 3 view",
                "free 21",  // one request alone: the gradient goes after it
            }));
  EXPECT_EQ(std::count_if(events.begin(), events.end(),
                          [](const std::string& e) { return e.ends_with(" no_grad"); }),
            1);
  std::vector<std::string> state;
  for (const std::string& e : events) {
    if (e.starts_with("alloc ") && e.ends_with(" optimizer_state")) state.push_back(e);
  }
  ASSERT_GE(state.size(), 6u);
  EXPECT_EQ(std::vector<std::string>(state.begin(), state.begin() + 6),
            (std::vector<std::string>{
                "alloc 27 12 s0 optimizer_state", "alloc 28 12 s0 optimizer_state",  // l1.w
                "alloc 29 4 s0 optimizer_state", "alloc 30 4 s0 optimizer_state",    // l1.b
                "alloc 31 12 s0 optimizer_state", "alloc 32 12 s0 optimizer_state",  // l2.w
            }));
  // The step's temporaries follow: no fourth parameter's state (l2.b's, 4 bytes).
  EXPECT_EQ(state[6], "alloc 33 12 s0 optimizer_state");
}

// Adam at rank 1: torch.optim's state (zeros_like of the sharded parameter) is this rank's
// chunk without padding, two fp32 tensors per parameter: w's 2 elements, b's 1 (the step's
// temporaries, freed within it, are optimizer_step_test's).
TEST(TorchFsdp2, OptimizerStateIsTheUnpaddedLocalShard) {
  GenOptions options = Fsdp2Options(2);
  options.rank = 1;
  options.optimizer = OptimizerKind::kAdam;
  const std::vector<std::string> events = Emit(TwoUnits(), options);
  std::vector<std::string> state;
  for (const std::string& line : events) {
    if (line.find("optimizer_state") == std::string::npos) continue;
    const std::string id = line.substr(6, line.find(' ', 6) - 6);
    if (std::find(events.begin(), events.end(), "free " + id) == events.end()) {
      state.push_back(line);
    }
  }
  EXPECT_EQ(state, (std::vector<std::string>{
                       "alloc 30 8 s0 optimizer_state", "alloc 31 8 s0 optimizer_state",
                       "alloc 32 4 s0 optimizer_state", "alloc 33 4 s0 optimizer_state",
                       "alloc 34 8 s0 optimizer_state", "alloc 35 8 s0 optimizer_state",
                       "alloc 36 4 s0 optimizer_state", "alloc 37 4 s0 optimizer_state"}));
}

// CPUOffloadPolicy: the shards live on the CPU (nothing at init); each all-gather copies them
// to the device (.to(device): 12 and 4 bytes), then the output (32 bytes), then drops the
// copies.
TEST(TorchFsdp2, OffloadedShardsAreCopiedToTheDeviceForEachAllGather) {
  GenOptions options = Fsdp2Options(2);
  options.offload_params = true;
  const std::vector<std::string> events = Emit(TwoUnits(), options);
  const std::vector<std::string> head(events.begin(), events.begin() + 9);
  EXPECT_EQ(head, (std::vector<std::string>{"alloc 1 100 s0 activation", "iteration 0",
                                            "phase forward", "alloc 2 12 s1 all_gather",
                                            "alloc 3 4 s1 all_gather", "alloc 4 32 s1 all_gather",
                                            "free 2", "free 3", "alloc 5 24 s0 all_gather"}));
  // The reduced gradients go to the CPU (shard "offload"): no view of the output is kept.
  const auto count = [&](const std::string& suffix) {
    return std::count_if(events.begin(), events.end(), [&](const std::string& e) {
      return e.rfind("rs ", 0) == 0 && e.size() > suffix.size() &&
             e.compare(e.size() - suffix.size(), suffix.size(), suffix) == 0;
    });
  };
  EXPECT_EQ(count(" offload"), 4);
  EXPECT_EQ(count(" view"), 0);
}

// Dim-0 sharding (the program's dim0): l1.w is 1 x 6 (a ViT-style position embedding), so
// torch.chunk gives rank 0 its one row, all 6 elements, and rank 1 nothing; both ranks keep a
// padded shard of chunk 0's 6 (24 bytes), and the all-gather output is 2 x (6 + 1) x 4 = 56
// bytes. Taken as 1-D it would be chunks of 3 (12 bytes, a 32-byte output).
TEST(TorchFsdp2, ShardsEachParameterAlongDimZero) {
  ModelProgram model = TwoUnits();
  model.units[1].params = {{"flat_param_0", 8, {{"l1.w", 6, 1}, {"l1.b", 2}}}};
  for (int rank : {0, 1}) {
    GenOptions options = Fsdp2Options(2);
    options.rank = rank;
    const std::vector<std::string> events = Emit(model, options);
    ASSERT_GE(events.size(), 8u);
    EXPECT_EQ(events[0], "alloc 1 24 s0 param") << "rank " << rank;
    EXPECT_EQ(events[1], "alloc 2 4 s0 param");
    // Rank 1 re-pads its shorter shards at lazy init first (the ids after them shift).
    EXPECT_NE(std::find_if(events.begin(), events.end(),
                           [](const std::string& e) { return e.ends_with(" 56 s1 all_gather"); }),
              events.end())
        << ::testing::PrintToString(events);
  }
  ModelProgram flat = model;
  flat.units[1].params[0].views[0].dim0 = 0;  // not recorded: 1-D
  const std::vector<std::string> events = Emit(flat, Fsdp2Options(2));
  EXPECT_EQ(events[0], "alloc 1 12 s0 param");
}

}  // namespace
}  // namespace bucketsim

namespace bucketsim {
namespace {

std::vector<std::string> Collectives(const std::vector<std::string>& events) {
  std::vector<std::string> lines;
  for (const std::string& line : events) {
    if (line.starts_with("all_")) lines.push_back(line);
  }
  return lines;
}

// reshard_after_forward=2 on 4 ranks, as rank 3: forward gathers each unit's 3 elements a rank
// over the shard group; backward gathers from the post-forward shards (6 elements a rank) over
// the post-forward mesh's row {2, 3}, which the header declares (_get_post_forward_mesh_info).
TEST(TorchFsdp2Collectives, PostForwardShardsGatherOverThePostForwardMesh) {
  GenOptions options = Fsdp2Options(4);
  options.reshard_after_forward_ranks = 2;
  options.rank = 3;
  const std::vector<std::string> events = testing::EmitSummary(TwoUnits(), options, true);
  EXPECT_EQ(Collectives(events),
            (std::vector<std::string>{"all_gather 10 s2 g1 fp32 3", "all_gather 16 s2 g1 fp32 3",
                                      "all_gather 25 s2 g3 fp32 6", "all_gather 28 s2 g3 fp32 6"}));
  // all_gather_copy_in allocates the output, then the all-gather fills it.
  const auto first = std::find(events.begin(), events.end(), "all_gather 10 s2 g1 fp32 3");
  ASSERT_NE(first, events.end());
  EXPECT_EQ(*(first - 1), "alloc 10 48 s1 all_gather");
  const TraceHeader header = testing::EmitHeader(TwoUnits(), options);
  ASSERT_EQ(header.groups.size(), 2u);
  EXPECT_EQ(header.groups[1].id, 3u);
  EXPECT_EQ(header.groups[1].ranks, (std::vector<int>{2, 3}));
  EXPECT_FALSE(header.replicate_group);
  EXPECT_EQ(header.WrittenSchemaVersion(), 6);  // its requests may say no_grad
}

// With a param dtype the all-gather moves the cast shards: bf16.
TEST(TorchFsdp2Collectives, MixedPrecisionGathersInTheParamDtype) {
  GenOptions options = Fsdp2Options(2);
  options.compute_dtype = DType::kBFloat16;
  EXPECT_EQ(Collectives(testing::EmitSummary(TwoUnits(), options, true)),
            (std::vector<std::string>{"all_gather 8 s2 g1 bf16 4", "all_gather 14 s2 g1 bf16 4",
                                      "all_gather 22 s2 g1 bf16 4", "all_gather 26 s2 g1 bf16 4"}));
}

// HSDP on a 2x2 mesh, as rank 1: shard group {0, 1}, replicas {1, 3}, named as the group every
// reduced shard is all-reduced over (foreach_reduce's all_reduce_group).
TEST(TorchFsdp2Collectives, HsdpNamesItsReplicateGroup) {
  GenOptions options = Fsdp2Options(4);
  options.group_layout = GroupLayout::kHsdp;
  options.hsdp_shard_size = 2;
  options.hsdp_replicas = 2;
  options.rank = 1;
  const TraceHeader header = testing::EmitHeader(TwoUnits(), options);
  ASSERT_EQ(header.groups.size(), 2u);
  EXPECT_EQ(header.groups[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(header.groups[1].ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(header.replicate_group, std::optional<GroupId>(header.groups[1].id));
}

}  // namespace
}  // namespace bucketsim
