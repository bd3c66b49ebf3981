// gen program --wrap (gen/program_wrap.h): the instances made anew from the module calls, each
// parameter to the innermost wrapped module around it, gathers and reshards at the calls' edges,
// and what cannot be re-wrapped refused. Tools.Oracle's Rewrap holds re-wrapped recordings
// against recordings of that wrapping, event for event; Tools.Torch2FsdpOracle against real FSDP.
#include "gen/program_wrap.h"

#include <gtest/gtest.h>

#include "gen/program_builder.h"
#include "program_render.h"
#include "tiny_fsdp.h"

namespace bucketsim {
namespace {

// root owns emb.weight; instance blocks.0 (a Block) owns its Linear fc's weight and bias:
//   0 gather root, 1 emb (reads emb.weight), 2 gather blocks.0, 3 blocks.0.fc (reads both),
//   4 end_forward blocks.0, 5 end_forward root, 6 loss.
ModelProgram Recorded() {
  ProgramBuilder program("wrapped");
  program.AddInstance({"root", {{"flat_param_0", 4, {{"emb.weight", 4}}}}, true, false});
  const std::size_t block = program.AddInstance(
      {"blocks.0",
       {{"flat_param_0", 10, {{"blocks.0.fc.weight", 8}, {"blocks.0.fc.bias", 2}}}},
       true,
       true});
  program.AddInput(Tensor("x", 64, "int64"));
  program.Gather(0);
  program.Run("emb:embedding", 0, {0}, {In("x", InputGrad::kNone)}, {Tensor("e", 64, "fp32")})
      .param_reads = std::vector<std::string>{"emb.weight"};
  program.Gather(block);
  program.Run("blocks.0.fc:addmm", 0, {block}, {In("e")}, {Tensor("h", 64, "fp32")}, {Keep("e")})
      .param_reads = std::vector<std::string>{"blocks.0.fc.weight", "blocks.0.fc.bias"};
  program.EndForward(block);
  program.EndForward(0);
  program.Run("root:mean", 0, {}, {In("h")}, {Tensor("loss", 4, "fp32")});
  program.SetLoss("loss");
  ModelProgram model = program.Take();
  model.module_calls = {
      {"emb", "Embedding", 1, 2}, {"blocks.0", "Block", 3, 4}, {"blocks.0.fc", "Linear", 3, 4}};
  return model;
}

TEST(RewrapModules, EachModuleOfTheClassesItsOwnUnit) {
  ModelProgram model = Recorded();
  Result<WrapSummary> wrapped = RewrapModules(model, {"Linear", "Embedding"});
  ASSERT_TRUE(wrapped.ok()) << wrapped.status().ToString();
  EXPECT_EQ(wrapped->instances_before, 2u);
  EXPECT_EQ(wrapped->instances_after, 3u);
  ASSERT_EQ(model.units.size(), 3u);
  EXPECT_EQ(model.units[1].name, "emb");
  EXPECT_EQ(model.units[2].name, "blocks.0.fc");
  EXPECT_TRUE(model.units[0].params.empty());  // the root owns nothing now
  EXPECT_EQ(model.units[2].params[0].numel, 10u);
  EXPECT_EQ(model.units[2].params[0].views[1].name, "blocks.0.fc.bias");
  EXPECT_EQ(
      testing::RenderShape(model),
      (std::vector<std::string>{"gather root", "gather emb", "emb:embedding uses emb", "end emb",
                                "gather blocks.0.fc", "blocks.0.fc:addmm uses blocks.0.fc",
                                "end blocks.0.fc", "end root", "root:mean"}));
  // The calls in step: each holds its ops and the gathers of the units inside it, not its own.
  EXPECT_EQ(model.module_calls[0].begin, 2u);  // emb: its run only
  EXPECT_EQ(model.module_calls[0].end, 3u);
  EXPECT_EQ(model.module_calls[1].begin, 4u);  // blocks.0 holds blocks.0.fc's gather and end
  EXPECT_EQ(model.module_calls[1].end, 7u);
  EXPECT_EQ(model.module_calls[2].begin, 5u);
  EXPECT_EQ(model.module_calls[2].end, 6u);
  EXPECT_FALSE(testing::EmitSummary(model, testing::TinyFsdpOptions(2)).empty());
  // And back: the recorded wrapping, op for op.
  ASSERT_TRUE(RewrapModules(model, {"Block"}).ok());
  EXPECT_EQ(testing::RenderShape(model), testing::RenderShape(Recorded()));
  EXPECT_EQ(testing::EmitSummary(model, testing::TinyFsdpOptions(2)),
            testing::EmitSummary(Recorded(), testing::TinyFsdpOptions(2)));
}

TEST(RewrapModules, NoClassIsTheRootAlone) {
  ModelProgram model = Recorded();
  ASSERT_TRUE(RewrapModules(model, {}).ok());
  ASSERT_EQ(model.units.size(), 1u);
  EXPECT_EQ(model.units[0].params[0].numel, 14u);
  EXPECT_EQ(model.units[0].params[0].views[0].name, "emb.weight");
  EXPECT_EQ(testing::RenderShape(model),
            (std::vector<std::string>{"gather root", "emb:embedding uses root",
                                      "blocks.0.fc:addmm uses root", "end root", "root:mean"}));
}

TEST(RewrapModules, RefusesWhatFsdpCouldNotWrap) {
  const auto error = [](ModelProgram model, std::vector<std::string> classes) {
    return RewrapModules(model, classes).status().message();
  };
  EXPECT_EQ(error(Recorded(), {"Blok"}),
            "no module of class 'Blok' runs in the program's forward; did you mean 'Block'? (its "
            "classes: Embedding, Block, Linear)");
  ModelProgram twice = Recorded();
  twice.module_calls.push_back({"blocks.0.fc", "Linear", 3, 4});
  EXPECT_EQ(error(twice, {"Linear"}),
            "module 'blocks.0.fc' (Linear) is called more than once in the forward: FSDP gathers "
            "a unit once per forward, so it cannot be one here");
  ModelProgram old = Recorded();
  old.forward[3].param_reads.reset();
  EXPECT_EQ(error(old, {"Block"}),
            "/forward/3: run 'blocks.0.fc:addmm' has no param_reads (a program recorded before "
            "them): which parameters a run reads is what re-wrapping places");
  ModelProgram no_calls = Recorded();
  no_calls.module_calls.clear();
  EXPECT_EQ(error(no_calls, {"Block"}),
            "the program has no module calls (its \"modules\" key, which tools/record_program.py "
            "writes): record the model again to wrap it here");
  EXPECT_EQ(ParseWrapClasses("Block,").status().message(),
            "'Block,': expected none, or module class names separated by commas (Block,MLP)");
  EXPECT_TRUE(ParseWrapClasses("none")->empty());
}

}  // namespace
}  // namespace bucketsim
