// Selective activation checkpointing (gen/program_checkpoint.h's SavePolicy, model_program.h's
// ForwardOp::policy_saved) as torch 2.6 runs it (reference/cuda_from_cpu.md 1.3, 1.4): what the
// policy saves is cached in forward and not recomputed; a cached tensor autograd saves goes at
// its last user's backward, one it does not at the end of the recompute, and the one an early
// stop never reaches with the region's frame. Event for event on a tiny program, and the
// policy's parsing, counting and errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "gen/program_builder.h"
#include "gen/program_checkpoint.h"
#include "tiny_fsdp.h"

namespace bucketsim {
namespace {

std::vector<std::string> Emit(const ModelProgram& model) {
  return testing::EmitSummary(model, testing::TinyFsdpOptions(2));
}

// lin (a unit: 4 parameters) makes h from the batch x; then a block, one module call "Block":
//   up:mm     p = mm(h)   saves h
//   act:gelu  a = gelu(p) saves p
//   down:mm   q = mm(a)   saves a
//   add       s = q + h   (AddBackward0: saves nothing)
// and loss = sum(s). Every tensor 200 B but the batch (100) and the loss (4).
ModelProgram Block() {
  ProgramBuilder program("sac");
  program.AddInstance({"root", {}, true, false});
  const std::size_t lin = program.AddInstance({"lin", {{"flat_param_0", 4}}, true, true});
  program.AddInput(Tensor("x", 100, "fp32"));
  program.Gather(lin);
  program.Run("lin", 0, {lin}, {In("x")}, {Tensor("h", 200, "fp32")}, {Keep("x")});
  program.EndForward(lin);
  program.Run("block.up:mm", 0, {}, {In("h")}, {Tensor("p", 200, "fp32")}, {Keep("h")});
  program.Run("block.act:gelu", 0, {}, {In("p")}, {Tensor("a", 200, "fp32")}, {Keep("p")});
  program.Run("block.down:mm", 0, {}, {In("a")}, {Tensor("q", 200, "fp32")}, {Keep("a")});
  program.Run("block:add", 0, {}, {In("q", InputGrad::kPass), In("h", InputGrad::kPass)},
              {Tensor("s", 200, "fp32")});
  program.Run("loss", 0, {}, {In("s")}, {Tensor("loss", 4, "fp32")});
  program.SetLoss("loss");
  ModelProgram model = program.Take();
  model.module_calls = {{"block", "Block", 3, 7}};
  return model;
}

ModelProgram Checkpointed(const std::string& save, bool early_stop = true) {
  ModelProgram model = Block();
  CheckpointChoice choice{CheckpointChoice::Kind::kClasses, {"Block"}};
  choice.reentrant = false;
  choice.early_stop = early_stop;
  if (!save.empty()) choice.save = *ParseSavePolicy(save);
  Result<CheckpointSummary> placed = CheckpointModules(model, choice);
  EXPECT_TRUE(placed.ok()) << placed.status().ToString();
  return model;
}

// Both mms saved ("mm"), early stop on (torch 2.6's default).
TEST(SelectiveCheckpointing, TheCacheKeepsWhatThePolicySavesUntilTorchLetsGoOfIt) {
  const std::vector<std::string> expected = {
      "alloc 1 8 s0 param",
      "alloc 2 100 s0 activation",
      "iteration 0",
      "phase forward",
      "alloc 3 16 s1 all_gather",
      "compute forward lin",
      "alloc 4 200 s0 activation",  // h: kept by the region (_NoopSaveInputs)
      "free 3",
      "compute forward block.up:mm",
      "alloc 5 200 s0 activation",  // p: cached
      "compute forward block.act:gelu",
      "alloc 6 200 s0 activation",  // a: saved by nothing in a region's forward
      "compute forward block.down:mm",
      "alloc 7 200 s0 activation",  // q: cached
      "free 6",                     // a: down read it last
      "compute forward block:add",
      "alloc 8 200 s0 activation",
      "compute forward loss",
      "alloc 9 4 s0 activation",
      "free 8",
      "mark after fwd",  // h, p, q: full checkpointing keeps h alone
      "phase backward",
      "alloc 10 4 s0 grad",
      "compute backward loss",
      "alloc 11 200 s0 grad",
      "free 10",
      "compute backward block:add",
      // The recompute, at the backward of the region's last saving run: up comes from the
      // cache (no compute, no memory), act reruns, down, where it stops, comes from the cache
      // too but is never popped.
      "compute recompute block.act:gelu",
      "alloc 12 200 s0 activation",  // a again, saved by down
      "compute backward block.down:mm",
      "alloc 13 200 s0 grad",
      "free 12",
      "compute backward block.act:gelu",
      "alloc 14 200 s0 grad",
      "free 13",
      "free 5",  // p: popped at the recompute's end, then held by act's node until now
      "compute backward block.up:mm",
      "alloc 15 200 s0 grad",
      "free 14",
      "free 7",  // q: down's entry, never popped, goes with the frame (the first saving run's
      "free 4",  // backward), as the region's kept input does
      "alloc 16 200 s0 grad",
      "free 11",
      "free 15",
      "alloc 17 16 s1 all_gather",
      "compute backward lin",
      "alloc 18 16 s0 grad",
      "free 16",
      "free 17",
      "rs 1.0 g1 fp32 2 view",
      "free 18",
      "flush",
      "mark after bwd",
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "zero_grad",
      "free 9",
  };
  EXPECT_EQ(Emit(Checkpointed("mm")), expected);
}

// Without early stop the recompute runs the region to its end: down's entry is popped there and,
// saved by no node, goes when the recompute ends; add is recomputed.
TEST(SelectiveCheckpointing, WithoutEarlyStopAnEntryNoNodeSavesGoesWhenTheRecomputeEnds) {
  const std::vector<std::string> events = Emit(Checkpointed("mm", /*early_stop=*/false));
  const std::vector<std::string> recompute = {
      "compute recompute block.act:gelu",
      "alloc 12 200 s0 activation",
      "compute recompute block:add",
      "alloc 13 200 s0 activation",
      "free 13",
      "free 7",  // q
      "compute backward block.down:mm",
  };
  const auto at = std::search(events.begin(), events.end(), recompute.begin(), recompute.end());
  EXPECT_NE(at, events.end()) << fmt::format("{}", fmt::join(events, "\n"));
}

// Without a policy too, an early stop ends before the kernel of a run that saves only what it
// reads (autograd packs those first): down:mm is never recomputed, its output never made
// again (reference/cuda_from_cpu.md 1.4: a Llama block's w2 mm); without early stop it is.
TEST(SelectiveCheckpointing, AnEarlyStopEndsBeforeTheLastSavingRunsKernel) {
  const auto has = [](const std::vector<std::string>& events, const std::string& event) {
    return std::find(events.begin(), events.end(), event) != events.end();
  };
  const std::vector<std::string> early = Emit(Checkpointed(""));
  EXPECT_TRUE(has(early, "compute recompute block.act:gelu"));
  EXPECT_FALSE(has(early, "compute recompute block.down:mm"));
  const std::vector<std::string> whole = Emit(Checkpointed("", /*early_stop=*/false));
  EXPECT_TRUE(has(whole, "compute recompute block.down:mm"));
  EXPECT_TRUE(has(whole, "compute recompute block:add"));
}

// Full checkpointing (no policy) keeps h alone after forward and recomputes every run; "mm/2"
// saves up alone (the 2nd mm of each region forward is recomputed); a policy of an op no run is
// saves nothing and is refused.
TEST(SelectiveCheckpointing, CountedRulesAndWhatTheySave) {
  ModelProgram full = Checkpointed("");
  for (const ForwardOp& op : full.forward) EXPECT_FALSE(op.policy_saved) << op.name;
  ModelProgram model = Block();
  CheckpointChoice choice{CheckpointChoice::Kind::kClasses, {"Block"}};
  choice.reentrant = false;
  choice.save = *ParseSavePolicy("aten.mm.default/2");
  Result<CheckpointSummary> placed = CheckpointModules(model, choice);
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  EXPECT_EQ(placed->saved_runs, (std::map<std::string, std::size_t>{{"mm", 1}}));
  EXPECT_EQ(placed->saved_bytes, 200u);
  std::vector<std::string> saved;
  for (const ForwardOp& op : model.forward) {
    if (op.policy_saved) saved.push_back(op.name);
  }
  EXPECT_EQ(saved, std::vector<std::string>{"block.up:mm"});
  EXPECT_NE(model.description.find("selective: saving aten.mm.default/2"), std::string::npos);

  model = Block();
  choice.save = *ParseSavePolicy("mm,max");
  placed = CheckpointModules(model, choice);
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ(placed->unmatched_ops, std::vector<std::string>{"max"});

  model = Block();
  choice.save = *ParseSavePolicy("bmm");
  EXPECT_EQ(CheckpointModules(model, choice).status().message(),
            "--checkpoint-save bmm: the policy saves none of the checkpointed calls' runs (their "
            "ops: mm x2, add x1, gelu x1; a recorded program names each run MODULE:OP, OP the "
            "ATen op's packet)");
  choice.reentrant = true;
  choice.save = *ParseSavePolicy("mm");
  EXPECT_NE(CheckpointModules(model, choice)
                .status()
                .message()
                .find("selective checkpointing needs non-reentrant regions"),
            std::string::npos);
  choice.save.reset();
  choice.early_stop = false;
  EXPECT_NE(CheckpointModules(model, choice)
                .status()
                .message()
                .find("early stop is a setting of non-reentrant regions"),
            std::string::npos);
}

// Layer-level: of the calls, the N-th, 2N-th, ... get a region (torchtitan's count).
TEST(SelectiveCheckpointing, EveryNthCallGetsARegion) {
  ModelProgram model = Block();
  // A second call of the class: four more runs after the first.
  ModelProgram two = Block();
  two.module_calls = {{"block", "Block", 3, 5}, {"block2", "Block", 5, 7}};
  CheckpointChoice choice{CheckpointChoice::Kind::kClasses, {"Block"}};
  choice.every = 2;
  Result<CheckpointSummary> placed = CheckpointModules(two, choice);
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  EXPECT_EQ(placed->calls, 2u);
  EXPECT_EQ(placed->regions, 1u);
  // The region is on the second call: its begin comes right before down:mm.
  for (std::size_t i = 0; i + 1 < two.forward.size(); ++i) {
    if (two.forward[i].kind == OpKind::kCheckpointBegin) {
      EXPECT_EQ(two.forward[i + 1].name, "block.down:mm");
    }
  }
  EXPECT_NE(two.description.find("(every 2 of 2 calls)"), std::string::npos) << two.description;
  choice.every = 3;
  placed = CheckpointModules(model, choice);
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ(placed->regions, 0u);
}

TEST(SelectiveCheckpointing, ParsesPolicies) {
  Result<SavePolicy> titan = ParseSavePolicy("torchtitan");
  ASSERT_TRUE(titan.ok());
  ASSERT_EQ(titan->rules.size(), 6u);
  EXPECT_EQ(titan->rules[0].ops, std::vector<std::string>{"mm"});
  EXPECT_EQ(titan->rules[0].recompute_every, 2u);
  EXPECT_EQ(titan->rules[2].ops, std::vector<std::string>{"_scaled_dot_product_flash_attention"});
  Result<SavePolicy> later = ParseSavePolicy("torchtitan-2026");
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->rules[0].ops, (std::vector<std::string>{"mm", "linear"}));
  Result<SavePolicy> mixed = ParseSavePolicy(
      "torch.ops.aten.mm.default+aten.addmm/3;_c10d_functional.reduce_scatter_tensor.default");
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->rules[0].ops, (std::vector<std::string>{"mm", "addmm"}));
  EXPECT_EQ(mixed->rules[0].recompute_every, 3u);
  EXPECT_EQ(mixed->rules[1].ops, std::vector<std::string>{"reduce_scatter_tensor"});
  const std::string usage =
      " (expected torchtitan, torchtitan-2026, or ops separated by commas, each OP or "
      "OP[+OP...]/N: their calls share a counter and every N-th is recomputed, as "
      "mm,_scaled_dot_product_flash_attention or mm/2)";
  EXPECT_EQ(ParseSavePolicy("mm/1").status().message(),
            "'mm/1': 'mm/1': after '/' comes how often a call is recomputed, an integer of 2 or "
            "more" +
                usage);
  EXPECT_EQ(ParseSavePolicy("mm,,max").status().message(), "'mm,,max': '' names no op" + usage);
  EXPECT_EQ(ParseSavePolicy("mm,aten.mm.default").status().message(),
            "'mm,aten.mm.default': 'mm' is named twice" + usage);
  EXPECT_EQ(ParseSavePolicy("mm+bmm").status().message(),
            "'mm+bmm': 'mm+bmm': ops joined by '+' share a counter, which needs /N" + usage);
  EXPECT_EQ(RunOpName("layers.0.attention.wq:mm"), "mm");
  EXPECT_EQ(RunOpName("block0"), "block0");
}

}  // namespace
}  // namespace bucketsim
