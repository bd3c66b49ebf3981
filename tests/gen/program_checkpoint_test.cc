// gen program --checkpoint (gen/program_checkpoint.h): a region placed on each call of the
// chosen module classes is the region a model checkpointed by hand has, event for event; the
// program's own regions come out; releases that would cross a region's edge are dropped; what
// cannot be done is refused with the classes there are.
#include "gen/program_checkpoint.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gen/program_builder.h"
#include "tiny_fsdp.h"

namespace bucketsim {
namespace {

std::vector<std::string> Emit(const ModelProgram& model) {
  return testing::EmitSummary(model, testing::TinyFsdpOptions(2));
}

// Two blocks, each an FSDP instance whose module is a "Block" holding a "Linear":
//   block k: gather; h = lin(x) (saves x); a = act(h) (saves a); y = out(a) (saves a; releases
//   h, a local alive until out has run); end_forward. Then loss = sum(y1).
// Block 1's first run releases y0 (the caller's variable, alive until block 1 has begun), a
// release that crosses a region's edge once block 1 is checkpointed. `regions`: each block's
// runs inside a checkpoint region that keeps its input, inside the FSDP hooks, as the recorder
// writes a block checkpointed by apply_activation_checkpointing; the crossing release is then
// not there (the region keeps y0).
ModelProgram TwoBlocks(bool regions) {
  ProgramBuilder program("two blocks");
  program.AddInstance({"root", {}, true, false});
  const std::size_t b0 = program.AddInstance({"blocks.0", {{"flat_param_0", 8}}, true, true});
  const std::size_t b1 = program.AddInstance({"blocks.1", {{"flat_param_0", 8}}, true, true});
  program.AddInput(Tensor("x", 64, "fp32"));
  std::string in = "x";
  for (std::size_t k = 0; k < 2; ++k) {
    const std::size_t unit = k == 0 ? b0 : b1;
    const std::string n = std::to_string(k);
    program.Gather(unit);
    if (regions) program.CheckpointBegin({Keep(in)});
    ForwardOp& lin = program.Run("blocks." + n + ".lin:mm", 0, {unit}, {In(in)},
                                 {Tensor("h" + n, 128, "fp32")}, {Keep(in)});
    if (k == 1 && !regions) lin.releases = {"y0"};
    program.Run("blocks." + n + ":act", 0, {}, {In("h" + n)}, {Tensor("a" + n, 128, "fp32")},
                {Keep("a" + n)});
    program
        .Run("blocks." + n + ":out", 0, {}, {In("a" + n)}, {Tensor("y" + n, 64, "fp32")},
             {Keep("a" + n)})
        .releases = {"h" + n};
    if (regions) program.CheckpointEnd();
    program.EndForward(unit);
    in = "y" + n;
  }
  program.Run("root:sum", 0, {}, {In(in)}, {Tensor("loss", 4, "fp32")});
  program.SetLoss("loss");
  ModelProgram model = program.Take();
  // Without regions: block k's gather at 5k, its runs 5k+1 .. 5k+3, its end_forward at 5k+4.
  if (!regions) {
    model.module_calls = {{"blocks.0", "Block", 1, 4},
                          {"blocks.0.lin", "Linear", 1, 2},
                          {"blocks.1", "Block", 6, 9},
                          {"blocks.1.lin", "Linear", 6, 7}};
  }
  return model;
}

CheckpointChoice Classes(std::vector<std::string> classes) {
  return {CheckpointChoice::Kind::kClasses, std::move(classes)};
}

TEST(CheckpointModules, ARegionPerCallIsTheRegionOfAModelCheckpointedByHand) {
  ModelProgram model = TwoBlocks(/*regions=*/false);
  Result<CheckpointSummary> placed = CheckpointModules(model, Classes({"Block"}));
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  EXPECT_EQ(placed->regions, 2u);
  EXPECT_EQ(placed->removed, 0u);
  EXPECT_EQ(placed->classes, std::vector<std::string>{"Block"});
  EXPECT_EQ(placed->kept_bytes, 64u);  // y0; x is an input, alive all run
  const ModelProgram by_hand = TwoBlocks(/*regions=*/true);
  EXPECT_EQ(Emit(model), Emit(by_hand));
  ASSERT_EQ(model.forward.size(), by_hand.forward.size());
  for (std::size_t i = 0; i < model.forward.size(); ++i) {
    EXPECT_EQ(model.forward[i].kind, by_hand.forward[i].kind) << i;
    EXPECT_EQ(model.forward[i].releases, by_hand.forward[i].releases) << i;
    ASSERT_EQ(model.forward[i].saves.size(), by_hand.forward[i].saves.size()) << i;
    for (std::size_t k = 0; k < model.forward[i].saves.size(); ++k) {
      EXPECT_EQ(model.forward[i].saves[k].tensor, by_hand.forward[i].saves[k].tensor) << i;
    }
  }
  EXPECT_TRUE(model.module_calls.empty());
}

// --checkpoint-impl no-reentrant: the same regions, non-reentrant (apply_activation_
// checkpointing's NO_REENTRANT): the model checkpointed by hand with use_reentrant=False.
TEST(CheckpointModules, NoReentrantRegionsAreTheModelsCheckpointedSo) {
  ModelProgram model = TwoBlocks(/*regions=*/false);
  CheckpointChoice choice = Classes({"Block"});
  choice.reentrant = false;
  ASSERT_TRUE(CheckpointModules(model, choice).ok());
  ModelProgram by_hand = TwoBlocks(/*regions=*/true);
  std::size_t regions = 0;
  for (ForwardOp& op : by_hand.forward) {
    if (op.kind != OpKind::kCheckpointBegin) continue;
    op.reentrant = false;
    ++regions;
  }
  EXPECT_EQ(regions, 2u);
  for (const ForwardOp& op : model.forward) {
    if (op.kind == OpKind::kCheckpointBegin) {
      EXPECT_FALSE(op.reentrant);
    }
  }
  EXPECT_EQ(Emit(model), Emit(by_hand));
  EXPECT_NE(Emit(model), Emit(TwoBlocks(/*regions=*/true)));
  ASSERT_TRUE(ParseCheckpointReentrant("no-reentrant").ok());
  EXPECT_FALSE(*ParseCheckpointReentrant("no-reentrant"));
  EXPECT_EQ(ParseCheckpointReentrant("NO_REENTRANT").status().message(),
            "'NO_REENTRANT': expected reentrant or no-reentrant (PyTorch's CheckpointImpl)");
}

TEST(CheckpointModules, NoneTakesTheProgramsOwnRegionsOut) {
  ModelProgram model = TwoBlocks(/*regions=*/true);
  Result<CheckpointSummary> placed = CheckpointModules(model, CheckpointChoice{});
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  EXPECT_EQ(placed->removed, 2u);
  EXPECT_EQ(placed->regions, 0u);
  // The plain program's only difference, block 1's release of y0 at its own reader, frees
  // nothing later.
  EXPECT_EQ(Emit(model), Emit(TwoBlocks(/*regions=*/false)));
}

TEST(CheckpointModules, RegionsReplaceTheProgramsOwn) {
  ModelProgram model = TwoBlocks(/*regions=*/true);
  model.module_calls = TwoBlocks(/*regions=*/false).module_calls;
  for (ModuleCall& call : model.module_calls) {  // each block's ops moved by its region's begin
    const std::size_t shift = call.name.starts_with("blocks.1") ? 3 : 1;
    call.begin += shift;
    call.end += shift;
  }
  Result<CheckpointSummary> placed = CheckpointModules(model, Classes({"Linear"}));
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  EXPECT_EQ(placed->removed, 2u);
  EXPECT_EQ(placed->regions, 2u);
  EXPECT_EQ(placed->classes, std::vector<std::string>{"Linear"});
  // Each region holds the Linear's one run and keeps its input.
  std::vector<OpKind> kinds;
  for (const ForwardOp& op : model.forward) kinds.push_back(op.kind);
  using K = OpKind;
  EXPECT_EQ(kinds, (std::vector<OpKind>{K::kGather, K::kCheckpointBegin, K::kRun, K::kCheckpointEnd,
                                        K::kRun, K::kRun, K::kEndForward, K::kGather,
                                        K::kCheckpointBegin, K::kRun, K::kCheckpointEnd, K::kRun,
                                        K::kRun, K::kEndForward, K::kRun}));
  EXPECT_EQ(model.forward[1].saves[0].tensor, "x");
  EXPECT_EQ(model.forward[8].saves[0].tensor, "y0");
  EXPECT_EQ(placed->kept_bytes, 64u);
}

TEST(CheckpointModules, ACallInsideAChosenOneIsLeftToIt) {
  ModelProgram model = TwoBlocks(/*regions=*/false);
  Result<CheckpointSummary> placed = CheckpointModules(model, Classes({"Linear", "Block"}));
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  EXPECT_EQ(placed->regions, 2u);
  EXPECT_EQ(placed->classes, std::vector<std::string>{"Block"});
  EXPECT_EQ(Emit(model), Emit(TwoBlocks(/*regions=*/true)));
}

TEST(CheckpointModules, AllIsEveryModuleFsdpWrapsButTheRoot) {
  ModelProgram model = TwoBlocks(/*regions=*/false);
  Result<CheckpointSummary> placed =
      CheckpointModules(model, CheckpointChoice{CheckpointChoice::Kind::kAll, {}});
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  EXPECT_EQ(placed->classes, std::vector<std::string>{"Block"});
  EXPECT_EQ(Emit(model), Emit(TwoBlocks(/*regions=*/true)));
}

// A module that holds FSDP units (both blocks' gathers and end_forwards inside its call): the
// region re-gathers them in its recompute.
TEST(CheckpointModules, ARegionMayHoldFsdpUnits) {
  ModelProgram model = TwoBlocks(/*regions=*/false);
  model.module_calls.push_back({"stage", "Stage", 0, 10});
  Result<CheckpointSummary> placed = CheckpointModules(model, Classes({"Stage"}));
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  EXPECT_EQ(placed->regions, 1u);
  EXPECT_EQ(model.forward.front().kind, OpKind::kCheckpointBegin);
  EXPECT_EQ(model.forward[11].kind, OpKind::kCheckpointEnd);
  EXPECT_FALSE(Emit(model).empty());
}

TEST(CheckpointModules, RefusesWhatItCannotDo) {
  ModelProgram model = TwoBlocks(/*regions=*/false);
  EXPECT_EQ(CheckpointModules(model, Classes({"Blok"})).status().message(),
            "no module of class 'Blok' runs in the program's forward; did you mean 'Block'? (its "
            "classes: Block, Linear)");
  for (ModuleCall& call : model.module_calls) call.name = "layers" + call.name.substr(6);
  EXPECT_EQ(
      CheckpointModules(model, CheckpointChoice{CheckpointChoice::Kind::kAll, {}})
          .status()
          .message(),
      "'all' checkpoints the modules FSDP wraps, and no instance but the root is a module of the "
      "program's forward: name the classes to checkpoint (its classes: Block, Linear)");
  model.module_calls.clear();
  const ModelProgram before = model;
  EXPECT_EQ(CheckpointModules(model, Classes({"Block"})).status().message(),
            "the program has no module calls (its \"modules\" key, which "
            "tools/record_program.py writes): record the model again to checkpoint its modules "
            "here");
  EXPECT_EQ(Emit(model), Emit(before));
  // none needs no calls.
  EXPECT_TRUE(CheckpointModules(model, CheckpointChoice{}).ok());
}

TEST(CheckpointModules, ParsesItsFlag) {
  EXPECT_EQ(ParseCheckpointChoice("none")->kind, CheckpointChoice::Kind::kNone);
  EXPECT_EQ(ParseCheckpointChoice("all")->kind, CheckpointChoice::Kind::kAll);
  Result<CheckpointChoice> two = ParseCheckpointChoice("Block,MLP");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->kind, CheckpointChoice::Kind::kClasses);
  EXPECT_EQ(two->classes, (std::vector<std::string>{"Block", "MLP"}));
  for (const char* bad : {"", "Block,", ",Block", "Block,,MLP", "all,Block", "Block,none"}) {
    EXPECT_EQ(ParseCheckpointChoice(bad).status().message(),
              fmt::format("'{}': expected none, all, or module class names separated by commas "
                          "(Block,MLP)",
                          bad));
  }
}

}  // namespace
}  // namespace bucketsim
