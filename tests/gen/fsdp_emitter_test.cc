// The emitter's backward working set on tiny programs, every event written out by hand: the
// activation gradients autograd makes (new, passed on, summed), their lifetimes, saved tensors
// released at their op's backward, checkpointed regions recomputed and held, autocast copies.
#include "gen/fsdp_emitter.h"
#include "gen/model_program.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/trace_checker.h"
#include "gen/program_builder.h"
#include "testing/recording_sink.h"
#include "tiny_fsdp.h"

namespace bucketsim {
namespace {

using testing::RecordingSink;
using testing::SummarizeAll;

// Two ranks (testing::TinyFsdpOptions: fp32, SGD, one shared group, one iteration).
GenOptions TinyOptions() { return testing::TinyFsdpOptions(2); }

std::vector<std::string> Emit(const ModelProgram& model, const GenOptions& options) {
  return testing::EmitSummary(model, options);
}

// root (no parameters) and `lin` (4 parameters: fp32 shard 2 x 4 = 8 bytes, gathered 16, full
// gradient 16); the batch x (100 bytes, no grad); lin: h = lin(x), saves x; act: a = f(h),
// saves a (its result); add: s = h + a (AddBackward0 passes its gradient to both); loss: a
// mean of s (its backward makes a gradient of s's size). With `checkpoint`, act and add are a
// checkpointed region that keeps h.
ModelProgram TinyModel(bool checkpoint) {
  ProgramBuilder program("tiny");
  program.AddInstance({"root", {}, true, false});
  const std::size_t lin = program.AddInstance({"lin", {{"flat_param_0", 4}}, true, true});
  program.AddInput(Tensor("x", 100, "fp32"));
  program.Gather(lin);
  program.Run("lin", 0, {lin}, {In("x")}, {Tensor("h", 200, "fp32")}, {Keep("x")});
  program.EndForward(lin);
  if (checkpoint) program.CheckpointBegin({Keep("h")});
  program.Run("act", 0, {}, {In("h")}, {Tensor("a", 200, "fp32")}, {Keep("a")});
  program.Run("add", 0, {}, {In("h", InputGrad::kPass), In("a", InputGrad::kPass)},
              {Tensor("s", 200, "fp32")});
  if (checkpoint) program.CheckpointEnd();
  program.Run("loss", 0, {}, {In("s")}, {Tensor("loss", 4, "fp32")});
  program.SetLoss("loss");
  return program.Take();
}

TEST(FsdpProgram, BackwardMakesActivationGradientsAsAutograd) {
  const std::vector<std::string> expected = {
      "alloc 1 8 s0 param",         // lin's fp32 shard
      "alloc 2 100 s0 activation",  // x, alive all run
      "iteration 0",
      "phase forward",
      "alloc 3 16 s1 all_gather",
      "compute forward lin",
      "alloc 4 200 s0 activation",  // h: read by act and add
      "free 3",                     // lin reshards
      "compute forward act",
      "alloc 5 200 s0 activation",  // a: read by add, saved by act
      "compute forward add",
      "alloc 6 200 s0 activation",  // s
      "free 4",                     // h: add was its last reader, nothing saves it
      "compute forward loss",
      "alloc 7 4 s0 activation",  // the loss, held by the loop
      "free 6",                   // s: only the loss read it
      "mark after fwd",           // live: 8 + 100 + 200 (a) + 4 = 312
      "phase backward",
      "alloc 8 4 s0 grad",  // ones_like(loss)
      "compute backward loss",
      "alloc 9 200 s0 grad",   // grad s (MeanBackward0 materialises it)
      "free 8",                // the loss's gradient goes when the node returns
      "compute backward add",  // grad h and grad a are grad s itself: nothing new
      "compute backward act",
      "alloc 10 200 s0 grad",  // act's gradient for h
      "free 5",                // a released (grad a, i.e. grad s, still held as grad h)
      "alloc 11 200 s0 grad",  // grad h = (grad s) + (act's gradient): a new tensor
      "free 9",
      "free 10",
      "alloc 12 16 s1 all_gather",  // lin's pre-backward re-gather
      "compute backward lin",
      "alloc 13 16 s0 grad",  // lin's full gradient; x needs none
      "free 11",              // grad h goes; x is released (still the batch)
      "free 12",
      "rs 1.0 g1 fp32 2 view",
      "free 13",
      "flush",
      "mark after bwd",
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "zero_grad",
      "free 7",  // the loss
  };
  EXPECT_EQ(Emit(TinyModel(false), TinyOptions()), expected);
}

TEST(FsdpProgram, CheckpointedRegionRecomputesAndHoldsItsOutputGradient) {
  const std::vector<std::string> expected = {
      "alloc 1 8 s0 param",
      "alloc 2 100 s0 activation",
      "iteration 0",
      "phase forward",
      "alloc 3 16 s1 all_gather",
      "compute forward lin",
      "alloc 4 200 s0 activation",  // h, kept by the region
      "free 3",
      "compute forward act",
      "alloc 5 200 s0 activation",  // a under no_grad: saved by nothing
      "compute forward add",
      "alloc 6 200 s0 activation",  // s, the region's output
      "free 5",                     // a: add read it last
      "compute forward loss",
      "alloc 7 4 s0 activation",
      "free 6",
      "mark after fwd",  // live: 8 + 100 + 200 (h) + 4
      "phase backward",
      "alloc 8 4 s0 grad",
      "compute backward loss",
      "alloc 9 200 s0 grad",
      "free 8",
      "compute recompute act",
      "alloc 10 200 s0 activation",  // a again, saved this time
      "compute recompute add",
      "alloc 11 200 s0 activation",  // s again, held by the region's backward
      "compute backward add",
      "compute backward act",
      "alloc 12 200 s0 grad",  // act's gradient for h
      "free 10",               // a released
      "alloc 13 200 s0 grad",  // grad h summed; grad s stays: the region's argument
      "free 12",
      "free 9",  // the region returns: grad s, recomputed s, kept h
      "free 11",
      "free 4",
      "alloc 14 16 s1 all_gather",
      "compute backward lin",
      "alloc 15 16 s0 grad",
      "free 13",
      "free 14",
      "rs 1.0 g1 fp32 2 view",
      "free 15",
      "flush",
      "mark after bwd",
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "zero_grad",
      "free 7",
  };
  EXPECT_EQ(Emit(TinyModel(true), TinyOptions()), expected);
}

// An autocast-style run: lin saves a cast weight copy (8 bytes, fp16) and its backward makes
// the copy's gradient (10 bytes) before the cast node turns it into the full gradient; the
// batch-like integer input gets no gradient; an alias output (a view) allocates nothing and
// passes its gradient on.
TEST(FsdpProgram, WorkspaceAliasesAndNonDifferentiableInputs) {
  ProgramBuilder program("tiny autocast");
  program.AddInstance({"root", {}, true, false});
  const std::size_t lin = program.AddInstance({"lin", {{"flat_param_0", 4}}, true, true});
  program.AddInput(Tensor("ids", 64, "int64"));
  program.Gather(lin);
  ForwardOp& op = program.Run("lin", 0, {lin}, {In("ids")}, {Tensor("h", 100, "fp16")},
                              {Keep("ids"), Fresh(8, "fp16", "weight cast")});
  op.workspace.push_back(Workspace(10, "fp16", "weight cast grad"));
  program.Run("view", 0, {}, {In("h", InputGrad::kPass)}, {Tensor("v", 100, "fp16", "h")});
  program.Run("loss", 0, {}, {In("v")}, {Tensor("loss", 2, "fp16")});
  program.EndForward(lin);
  program.SetLoss("loss");
  const std::vector<std::string> expected = {
      "alloc 1 8 s0 param",
      "alloc 2 64 s0 activation",
      "iteration 0",
      "phase forward",
      "alloc 3 16 s1 all_gather",
      "compute forward lin",
      "alloc 4 8 s0 activation",    // the weight copy, saved
      "alloc 5 100 s0 activation",  // h
      "compute forward view",       // v is h's storage
      "compute forward loss",
      "alloc 6 2 s0 activation",
      "free 5",  // h and v: nothing saves them
      "free 3",
      "mark after fwd",
      "phase backward",
      "alloc 7 2 s0 grad",
      "alloc 8 16 s1 all_gather",  // lin's pre-backward hook (its forward ended last)
      "compute backward loss",
      "alloc 9 100 s0 grad",
      "free 7",
      "compute backward view",  // grad h is grad v
      "compute backward lin",
      "alloc 10 16 s0 grad",  // full gradient
      "alloc 11 10 s0 grad",  // the weight copy's gradient; ids get none
      "free 9",               // grad h
      "free 4",               // the weight copy (ids stay: the batch)
      "free 11",              // cast into the full gradient
      "free 8",
      "rs 1.0 g1 fp32 2 view",
      "free 10",
      "flush",
      "mark after bwd",
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "zero_grad",
      "free 6",
  };
  EXPECT_EQ(Emit(program.Take(), TinyOptions()), expected);
}

TEST(FsdpProgram, SharedBnOwnGivesOwnGroupInstancesTheirOwnGroup) {
  ProgramBuilder program("groups");
  program.AddInstance({"root", {}, true, false});
  const std::size_t a = program.AddInstance({"a", {{"w", 4}}, true, true});
  const std::size_t bn = program.AddInstance({"bn", {{"w", 2}}, false, false, true});
  program.AddInput(Tensor("x", 8, "fp32"));
  program.Gather(a);
  program.Run("a", 0, {a}, {In("x")}, {Tensor("y", 8, "fp32")}, {Keep("x")});
  program.EndForward(a);
  program.Gather(bn);
  program.Run("bn", 0, {bn}, {In("y")}, {Tensor("loss", 4, "fp32")}, {Keep("y")});
  program.EndForward(bn);
  program.SetLoss("loss");
  GenOptions options = TinyOptions();
  options.group_layout = GroupLayout::kSharedBnOwn;
  RecordingSink recorder;
  ASSERT_TRUE(EmitFsdpTrace(program.Take(), options, recorder).ok());
  ASSERT_EQ(recorder.header.groups.size(), 2u);
  EXPECT_EQ(recorder.header.groups[0].id, 1u);
  EXPECT_EQ(recorder.header.groups[0].name, "global_group");
  EXPECT_EQ(recorder.header.groups[1].id, 2u);
  EXPECT_EQ(recorder.header.groups[1].name, "bn.process_group");
  std::vector<std::string> rs;
  for (const std::string& line : SummarizeAll(recorder)) {
    if (line.rfind("rs ", 0) == 0) rs.push_back(line);
  }
  EXPECT_EQ(rs, (std::vector<std::string>{"rs 2.0 g2 fp32 1 view", "rs 1.0 g1 fp32 2 view"}));
}

TEST(FsdpProgram, ValidationNamesTheJsonPointer) {
  const auto error = [](ModelProgram model) { return ValidateProgram(model).message(); };
  ModelProgram model = TinyModel(false);
  model.forward[1].inputs[0].tensor = "nope";
  EXPECT_EQ(error(model),
            "/forward/1/inputs/0: tensor 'nope' is not defined by an earlier run or input");
  model = TinyModel(false);
  model.loss = "x";
  EXPECT_EQ(error(model), "/loss: 'x' is not an output of a run");
  model = TinyModel(false);
  model.forward[4].outputs[0].id = "h";
  EXPECT_EQ(error(model), "/forward/4/outputs/0/id: tensor 'h' is defined twice");
  model = TinyModel(true);  // act reads h, which the region keeps; drop that
  model.forward[3].saves.clear();
  EXPECT_EQ(error(model),
            "/forward/4/inputs/0: tensor 'h' is made outside the checkpointed region that begins "
            "at /forward/3 and the region's checkpoint_begin does not save it: its backward could "
            "not recompute");
  model = TinyModel(false);
  model.forward[3].uses = {1};  // act after lin's end_forward
  EXPECT_EQ(error(model),
            "/forward/3/uses/0: instance 'lin' is not gathered here (uses must lie between its "
            "gather and its end_forward)");
  model = TinyModel(false);
  model.forward[1].outputs[0].dtype = "fp33";
  EXPECT_EQ(error(model), "/forward/1/outputs/0/dtype: 'fp33' is not a known dtype");
}

}  // namespace
}  // namespace bucketsim
