// FSDP2's casts at the units' boundaries (gen/program_boundary_casts.h): cast_forward_inputs
// and the root's output_dtype as runs of their own, and where the emitter puts them.
#include "gen/program_boundary_casts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gen/model_program.h"
#include "gen/program_builder.h"
#include "program_render.h"
#include "tiny_fsdp.h"

namespace bucketsim {
namespace {

// A bf16 model with an fp32 input (an image): root (stem, head) -> b1 -> b2 -> head; the loss
// outside the root's forward. With `fp32_a` the stem's output `a`, b1's input, is fp32; with
// `checkpoint_b1` b1's call is a checkpointed region.
ModelProgram ImageModel(bool fp32_a = false, bool checkpoint_b1 = false) {
  ProgramBuilder program("boundary casts");
  const std::size_t root = program.AddInstance({"root", {{"flat_param_0", 8}}, true, true});
  const std::size_t b1 = program.AddInstance({"b1", {{"flat_param_0", 4}}, true, true});
  const std::size_t b2 = program.AddInstance({"b2", {{"flat_param_0", 4}}, true, true});
  program.AddInput(Tensor("img", 400, "fp32"));
  program.Gather(root);
  program.Run("stem", 0, {root}, {In("img")},
              {Tensor("a", fp32_a ? 400 : 200, fp32_a ? "fp32" : "bf16")}, {Keep("img")});
  program.BeginCall("b1", "Block");
  if (checkpoint_b1) program.CheckpointBegin({Keep("a")}, /*reentrant=*/false);
  program.Gather(b1);
  program.Run("b1", 0, {b1}, {In("a")}, {Tensor("h", 200, "bf16")}, {Keep("a")});
  program.EndForward(b1);
  if (checkpoint_b1) program.CheckpointEnd();
  program.EndCall();
  program.BeginCall("b2", "Block");
  program.Gather(b2);
  program.Run("b2", 0, {b2}, {In("h")}, {Tensor("y", 200, "bf16")}, {Keep("h")});
  program.EndForward(b2);
  program.EndCall();
  program.Run("head", 0, {root}, {In("y")}, {Tensor("logits", 300, "bf16")}, {Keep("y")});
  program.EndForward(root);
  program.Run("loss", 0, {}, {In("logits")}, {Tensor("loss", 4, "fp32")});
  program.SetLoss("loss");
  return program.Take();
}

// A root whose forward has no end_forward (the program may leave it out: it runs to the end)
// casts its inputs over the whole forward; output_dtype, which casts after that end, is refused.
// (tools/fuzz.sh program found the root's missing end stopping the casts on a check.)
TEST(BoundaryCasts, ARootWithoutEndForwardCastsItsInputsAndRefusesOutputDtype) {
  const auto model_of = [] {
    ProgramBuilder program("no end");
    const std::size_t root = program.AddInstance({"root", {{"flat_param_0", 8}}, true, true});
    program.AddInput(Tensor("img", 400, "fp32"));
    program.Gather(root);
    program.Run("stem", 0, {root}, {In("img")}, {Tensor("a", 200, "bf16")}, {Keep("img")});
    program.Run("loss", 0, {}, {In("a")}, {Tensor("loss", 4, "fp32")});
    program.SetLoss("loss");
    return program.Take();
  };
  ModelProgram inputs = model_of();
  Result<BoundaryCastSummary> added = InsertBoundaryCasts(inputs, {.inputs = DType::kBFloat16});
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(added->casts, 1u);  // the image
  ModelProgram outputs = model_of();
  Result<BoundaryCastSummary> refused =
      InsertBoundaryCasts(outputs, {.root_outputs = DType::kFloat32});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "the root 'root' has no end_forward, so the program does not say where its forward "
            "ends, after which output_dtype casts its outputs");
}

// param_dtype bf16 (cast_forward_inputs) and the root's output_dtype fp32: the root casts the
// fp32 image before its all-gather (b1's and b2's bf16 inputs pass), and the bf16 logits after
// its end_forward; what read the originals now reads the copies.
TEST(BoundaryCasts, TheRootCastsTheImageInAndTheLogitsOut) {
  ModelProgram model = ImageModel();
  Result<BoundaryCastSummary> added =
      InsertBoundaryCasts(model, {.inputs = DType::kBFloat16, .root_outputs = DType::kFloat32});
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(added->casts, 2u);
  EXPECT_EQ(added->bytes, 200u + 600u);  // the image's 100 elements in bf16, 150 logits in fp32
  EXPECT_EQ(testing::RenderShape(model),
            (std::vector<std::string>{"root:cast_forward_inputs", "gather root", "stem uses root",
                                      "gather b1", "b1 uses b1", "end b1", "gather b2",
                                      "b2 uses b2", "end b2", "head uses root", "end root",
                                      "root:cast_forward_outputs", "loss"}));
  const ForwardOp& in = model.forward[0];
  ASSERT_EQ(in.outputs.size(), 1u);
  EXPECT_EQ(in.outputs[0].id, "img.to_bf16");
  EXPECT_EQ(in.outputs[0].bytes, 200u);
  EXPECT_FALSE(in.in_post_forward_hook);
  EXPECT_EQ(model.forward[2].inputs[0].tensor, "img.to_bf16");
  EXPECT_EQ(model.forward[2].saves[0].tensor, "img.to_bf16");
  const ForwardOp& out = model.forward[11];
  EXPECT_EQ(out.inputs[0].tensor, "logits");
  EXPECT_EQ(out.outputs[0].id, "logits.to_fp32");
  EXPECT_EQ(out.outputs[0].dtype, "fp32");
  EXPECT_TRUE(out.in_post_forward_hook);
  EXPECT_EQ(model.forward[12].inputs[0].tensor, "logits.to_fp32");
  // The module calls moved with the ops they hold.
  ASSERT_EQ(model.module_calls.size(), 2u);
  EXPECT_EQ(model.forward[model.module_calls[0].begin].kind, OpKind::kGather);
  EXPECT_EQ(model.forward[model.module_calls[1].end - 1].kind, OpKind::kEndForward);
  EXPECT_TRUE(ValidateProgram(model).ok());
}

// FSDP2 casts every unit's inputs: b1's fp32 `a` too, before b1's gather. FSDP1
// (cast_root_forward_inputs) casts the root's alone.
TEST(BoundaryCasts, Fsdp2CastsEveryUnitsInputsFsdp1TheRootsAlone) {
  ModelProgram model = ImageModel(/*fp32_a=*/true);
  Result<BoundaryCastSummary> added = InsertBoundaryCasts(model, {.inputs = DType::kBFloat16});
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(added->casts, 2u);
  EXPECT_EQ(testing::RenderShape(model),
            (std::vector<std::string>{"root:cast_forward_inputs", "gather root", "stem uses root",
                                      "b1:cast_forward_inputs", "gather b1", "b1 uses b1", "end b1",
                                      "gather b2", "b2 uses b2", "end b2", "head uses root",
                                      "end root", "loss"}));
  EXPECT_EQ(model.forward[3].outputs[0].id, "a.to_bf16");
  EXPECT_EQ(model.forward[5].inputs[0].tensor, "a.to_bf16");
  EXPECT_EQ(model.forward[5].saves[0].tensor, "a.to_bf16");
  // b1's call holds its input cast, made by its pre-forward hook.
  EXPECT_EQ(model.module_calls[0].begin, 3u);
  ModelProgram fsdp1 = ImageModel(/*fp32_a=*/true);
  added = InsertBoundaryCasts(fsdp1, {.inputs = DType::kBFloat16, .inputs_root_only = true});
  ASSERT_TRUE(added.ok());
  EXPECT_EQ(added->casts, 1u);
  EXPECT_EQ(fsdp1.forward[0].name, "root:cast_forward_inputs");
  EXPECT_EQ(fsdp1.forward[4].inputs[0].tensor, "a");
}

// A checkpointed region inside the root that reads the model's input (which its begin need not
// keep: the loop holds it) reads the copy after the root's cast, and its begin keeps that
// (found by the program fuzzer: the rewrite made a program the checks refuse).
TEST(BoundaryCasts, ARegionThatReadsTheInputKeepsItsCopy) {
  ProgramBuilder program("region reads the input");
  const std::size_t root = program.AddInstance({"root", {{"flat_param_0", 8}}, true, true});
  program.AddInput(Tensor("x", 64, "fp32"));
  program.Gather(root);
  program.Run("fc", 0, {root}, {In("x")}, {Tensor("h", 128, "fp32")}, {Keep("x")});
  program.CheckpointBegin({Keep("h")});
  program.Run("relu", 0, {}, {In("x")}, {Tensor("y", 64, "fp32")}, {Keep("h")});
  program.CheckpointEnd();
  program.EndForward(root);
  program.Run("mean", 0, {}, {In("y")}, {Tensor("loss", 4, "fp32")});
  program.SetLoss("loss");
  ModelProgram model = program.Take();
  Result<BoundaryCastSummary> added =
      InsertBoundaryCasts(model, {.inputs = DType::kBFloat16, .inputs_root_only = true});
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  const ForwardOp& begin = model.forward[3];
  ASSERT_EQ(begin.kind, OpKind::kCheckpointBegin);
  ASSERT_EQ(begin.saves.size(), 2u);
  EXPECT_EQ(begin.saves[1].tensor, "x.to_bf16");
  EXPECT_EQ(model.forward[4].inputs[0].tensor, "x.to_bf16");
}

TEST(BoundaryCasts, NothingToCastChangesNothing) {
  ModelProgram model = ImageModel();
  const std::vector<std::string> before = testing::RenderShape(model);
  Result<BoundaryCastSummary> added =
      InsertBoundaryCasts(model, {.root_outputs = DType::kBFloat16});
  ASSERT_TRUE(added.ok());
  EXPECT_EQ(added->casts, 0u);  // the logits are bf16 already
  EXPECT_EQ(testing::RenderShape(model), before);
}

TEST(BoundaryCasts, RefusesWhatItCannotPlace) {
  // A cast b1 would need inside a checkpointed region (FSDP2 skips it in the recompute).
  ModelProgram model = ImageModel(/*fp32_a=*/true, /*checkpoint_b1=*/true);
  Result<BoundaryCastSummary> added = InsertBoundaryCasts(model, {.inputs = DType::kBFloat16});
  ASSERT_FALSE(added.ok());
  EXPECT_NE(added.status().message().find("unit 'b1' is inside a checkpointed region and its "
                                          "forward inputs would need a cast"),
            std::string::npos)
      << added.status().message();
  // The root's output_dtype where the root has no parameters (never gathered).
  ProgramBuilder program("no root parameters");
  program.AddInstance({"root", {}, true, false});
  const std::size_t l1 = program.AddInstance({"l1", {{"flat_param_0", 4}}, true, true});
  program.AddInput(Tensor("x", 100, "fp32"));
  program.Gather(l1);
  program.Run("l1", 0, {l1}, {In("x")}, {Tensor("y", 100, "fp32")}, {Keep("x")});
  program.EndForward(l1);
  program.SetLoss("y");
  ModelProgram rootless = program.Take();
  added = InsertBoundaryCasts(rootless, {.root_outputs = DType::kBFloat16});
  ASSERT_FALSE(added.ok());
  EXPECT_EQ(added.status().message(),
            "the root 'root' has no parameters of its own, so the program does not say where its "
            "forward ends, after which output_dtype casts its outputs");
}

// In the trace: the root's post-forward frees the last all-gather result (b2's) only when it
// returns, after its output cast (_fsdp_state.py _post_forward's local all_gather_state).
TEST(BoundaryCasts, TheRootsPostForwardFreesTheLastAllGatherAfterItsOutputCast) {
  GenOptions options = testing::TinyFsdpOptions(2);
  options.fsdp_impl = FsdpImpl::kFsdp2;
  options.compute_dtype = DType::kBFloat16;
  options.fsdp2.output_dtype = DType::kFloat32;
  const std::vector<std::string> events = testing::EmitSummary(ImageModel(), options);
  const auto cast =
      std::find(events.begin(), events.end(), "compute forward root:cast_forward_outputs");
  ASSERT_NE(cast, events.end()) << ::testing::PrintToString(events);
  ASSERT_GE(events.end() - cast, 4);
  EXPECT_EQ(cast[1].rfind("alloc ", 0), 0u);
  EXPECT_NE(cast[1].find(" 600 s0 activation"), std::string::npos) << cast[1];
  ASSERT_EQ(cast[2].rfind("free ", 0), 0u) << cast[2];
  // What it frees is b2's all-gather output, the last one allocated on the all-gather stream;
  // then _call_impl lets go of the bf16 logits (the alloc before the cast's compute).
  const std::string id = cast[2].substr(5);
  EXPECT_EQ(cast[3], "free " + cast[-1].substr(6, cast[-1].find(' ', 6) - 6));
  std::string last_output;
  for (auto it = events.begin(); it != cast; ++it) {
    if (it->rfind("alloc ", 0) == 0 && it->find(" s1 all_gather") != std::string::npos) {
      last_output = it->substr(6, it->find(' ', 6) - 6);
    }
  }
  EXPECT_EQ(id, last_output);
}

}  // namespace
}  // namespace bucketsim
