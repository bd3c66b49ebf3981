// Per-parameter gradients (a run's `param_reads`, a flat parameter's `views`), every event
// written out by hand: a parameter's gradient is made at the backward of the run that reads
// it, a parameter read twice gets the sum of both (InputBuffer), a flat parameter's view
// gradients are concatenated into the flat gradient at the instance's post-backward point
// (SplitWithSizesBackward, with zeros for a view nobody read), a checkpointed region's runs
// make theirs after the recompute; the reader checks every name.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "engine/trace_checker.h"
#include "gen/model_program.h"
#include "gen/program_builder.h"
#include "io/model_program_file.h"
#include "testing/recording_sink.h"
#include "tiny_fsdp.h"

namespace bucketsim {
namespace {

GenOptions Options(int world_size) { return testing::TinyFsdpOptions(world_size); }

std::vector<std::string> Emit(const ModelProgram& model, const GenOptions& options) {
  return testing::EmitSummary(model, options);
}

// root (no parameters) and `lin` with `params`; the batch x (100 bytes, no grad); mm1: h =
// f(x, w), saves x, reads w; mm2: y = g(h, w, b), saves h, reads w and b (w is read twice, as
// a tied weight is); loss: a mean of y. With `checkpoint`, mm2 is a checkpointed region that
// keeps h.
ModelProgram TwoReaders(std::vector<GenParam> params, bool checkpoint = false) {
  ProgramBuilder program("param reads");
  program.AddInstance({"root", {}, true, false});
  const std::size_t lin = program.AddInstance({"lin", std::move(params), true, true});
  program.AddInput(Tensor("x", 100, "fp32"));
  program.Gather(lin);
  program.Run("mm1", 0, {lin}, {In("x")}, {Tensor("h", 200, "fp32")}, {Keep("x")}).param_reads =
      std::vector<std::string>{"w"};
  if (checkpoint) program.CheckpointBegin({Keep("h")});
  program.Run("mm2", 0, {lin}, {In("h")}, {Tensor("y", 200, "fp32")}, {Keep("h")}).param_reads =
      std::vector<std::string>{"w", "b"};
  if (checkpoint) program.CheckpointEnd();
  program.EndForward(lin);
  program.Run("loss", 0, {}, {In("y")}, {Tensor("loss", 4, "fp32")});
  program.SetLoss("loss");
  return program.Take();
}

// Own parameters w (4 elements) and b (2) on two ranks: shards of 2 and 1 elements (8 and 4
// bytes), gathered 16 and 8 bytes, gradients 16 and 8 bytes.
TEST(ParamReads, OwnParametersGetTheirGradientAtTheirReadersBackward) {
  const std::vector<std::string> expected = {
      "alloc 1 8 s0 param",         // w's shard
      "alloc 2 4 s0 param",         // b's shard
      "alloc 3 100 s0 activation",  // x
      "iteration 0",
      "phase forward",
      "alloc 4 16 s1 all_gather",  // w gathered
      "alloc 5 8 s1 all_gather",   // b gathered
      "compute forward mm1",
      "alloc 6 200 s0 activation",  // h, saved by mm2
      "compute forward mm2",
      "alloc 7 200 s0 activation",  // y
      "free 4",                     // lin reshards
      "free 5",
      "compute forward loss",
      "alloc 8 4 s0 activation",  // the loss
      "free 7",                   // y: nothing saves it
      "mark after fwd",           // live: 12 + 100 + 200 (h) + 4 = 316
      "phase backward",
      "alloc 9 4 s0 grad",  // ones_like(loss)
      "compute backward loss",
      "alloc 10 200 s0 grad",  // grad y
      "free 9",
      "alloc 11 16 s1 all_gather",  // pre-backward re-gather
      "alloc 12 8 s1 all_gather",
      "compute backward mm2",
      "alloc 13 16 s0 grad",   // w's gradient from mm2
      "alloc 14 8 s0 grad",    // b's gradient: b is read by mm2 alone, so this is b.grad
      "alloc 15 200 s0 grad",  // grad h
      "free 10",               // grad y goes when mm2's node returns
      "free 6",                // h released
      "compute backward mm1",
      "alloc 16 16 s0 grad",  // w's gradient from mm1; x needs none
      "free 15",              // grad h
      "alloc 17 16 s0 grad",  // w's two gradients summed into a new tensor
      "free 13",
      "free 16",
      // lin's post-backward hook, per parameter: free the gathered copy, reduce, free the grad.
      "free 11",
      "rs 1.0 g1 fp32 2 view",
      "free 17",
      "free 12",
      "rs 1.1 g1 fp32 1 view",
      "free 14",
      "flush",
      "mark after bwd",
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "zero_grad",
      "free 8",
  };
  EXPECT_EQ(Emit(TwoReaders({{"w", 4}, {"b", 2}}), Options(2)), expected);
}

// One flat parameter of 8 elements with views w (4), b (2) and u (2, read by no run): shard 4
// elements (16 bytes), gathered 32 bytes; view gradients 16, 8 and 8 bytes.
TEST(ParamReads, ViewGradientsAreConcatenatedAtThePostBackwardHook) {
  const std::vector<std::string> expected = {
      "alloc 1 16 s0 param",
      "alloc 2 100 s0 activation",
      "iteration 0",
      "phase forward",
      "alloc 3 32 s1 all_gather",
      "compute forward mm1",
      "alloc 4 200 s0 activation",  // h
      "compute forward mm2",
      "alloc 5 200 s0 activation",  // y
      "free 3",
      "compute forward loss",
      "alloc 6 4 s0 activation",
      "free 5",
      "mark after fwd",
      "phase backward",
      "alloc 7 4 s0 grad",
      "compute backward loss",
      "alloc 8 200 s0 grad",  // grad y
      "free 7",
      "alloc 9 32 s1 all_gather",
      "compute backward mm2",
      "alloc 10 16 s0 grad",   // view w's gradient
      "alloc 11 8 s0 grad",    // view b's gradient
      "alloc 12 200 s0 grad",  // grad h
      "free 8",
      "free 4",
      "compute backward mm1",
      "alloc 13 16 s0 grad",  // view w's second gradient
      "free 12",
      "alloc 14 16 s0 grad",  // summed
      "free 10",
      "free 13",
      // SplitWithSizesBackward: zeros for u, the flat gradient while the views' are alive
      // (live grads here: 16 + 8 + 8 + 32 = 64, twice the flat gradient), then they go.
      "alloc 15 8 s0 grad",
      "alloc 16 32 s0 grad",
      "free 15",
      "free 14",
      "free 11",
      // The hook as without views.
      "free 9",
      "rs 1.0 g1 fp32 4 view",
      "free 16",
      "flush",
      "mark after bwd",
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "zero_grad",
      "free 6",
  };
  GenParam flat{"flat_param_0", 8};
  flat.views = {{"w", 4}, {"b", 2}, {"u", 2}};
  EXPECT_EQ(Emit(TwoReaders({flat}), Options(2)), expected);
}

// Under mixed precision the view gradients and the flat gradient are in the compute dtype
// (bf16: 8, 4 and 4 bytes; flat 16), as the gathered parameter is; the program's activations
// and their gradients keep the bytes the program gives them.
TEST(ParamReads, ViewGradientsAreInTheComputeDtype) {
  GenParam flat{"flat_param_0", 8};
  flat.views = {{"w", 4}, {"b", 2}, {"u", 2}};
  GenOptions options = Options(2);
  options.compute_dtype = DType::kBFloat16;
  std::vector<std::string> grads;
  for (const std::string& event : Emit(TwoReaders({flat}), options)) {
    if (event.starts_with("alloc") && event.ends_with(" s0 grad")) grads.push_back(event);
  }
  // Ids 3, 4 and 10, 11 are the gathers (the bf16 cast shard, then the full parameter).
  EXPECT_EQ(grads, (std::vector<std::string>{
                       "alloc 8 4 s0 grad",     // ones_like(loss)
                       "alloc 9 200 s0 grad",   // grad y
                       "alloc 12 8 s0 grad",    // w from mm2
                       "alloc 13 4 s0 grad",    // b
                       "alloc 14 200 s0 grad",  // grad h
                       "alloc 15 8 s0 grad",    // w from mm1
                       "alloc 16 8 s0 grad",    // w summed
                       "alloc 17 4 s0 grad",    // zeros for u
                       "alloc 18 16 s0 grad",   // the flat gradient
                   }));
}

// One rank under bf16 mixed precision with a flat parameter: nothing is sharded, the
// parameter's bf16 copy (16 bytes) lives as the gathered one would; the view gradients are
// concatenated as on two ranks, and the post-reduction hook keeps an fp32 copy (32 bytes) of
// the flat gradient as .grad until zero_grad.
TEST(ParamReads, OneRankKeepsTheConcatenatedGradientInFp32) {
  GenParam flat{"flat_param_0", 8};
  flat.views = {{"w", 4}, {"b", 2}, {"u", 2}};
  GenOptions options = Options(1);
  options.compute_dtype = DType::kBFloat16;
  const std::vector<std::string> expected = {
      "alloc 1 32 s0 param",  // the whole fp32 parameter
      "alloc 2 100 s0 activation",
      "iteration 0",
      "phase forward",
      "alloc 3 16 s1 all_gather",  // its bf16 copy
      "compute forward mm1",
      "alloc 4 200 s0 activation",
      "compute forward mm2",
      "alloc 5 200 s0 activation",
      "free 3",
      "compute forward loss",
      "alloc 6 4 s0 activation",
      "free 5",
      "mark after fwd",
      "phase backward",
      "alloc 7 4 s0 grad",
      "compute backward loss",
      "alloc 8 200 s0 grad",
      "free 7",
      "alloc 9 16 s1 all_gather",  // cast again for backward
      "compute backward mm2",
      "alloc 10 8 s0 grad",  // w
      "alloc 11 4 s0 grad",  // b
      "alloc 12 200 s0 grad",
      "free 8",
      "free 4",
      "compute backward mm1",
      "alloc 13 8 s0 grad",
      "free 12",
      "alloc 14 8 s0 grad",  // w summed
      "free 10",
      "free 13",
      "alloc 15 4 s0 grad",   // zeros for u
      "alloc 16 16 s0 grad",  // the flat bf16 gradient
      "free 15",
      "free 14",
      "free 11",
      "free 9",
      "alloc 17 32 s2 grad",  // its fp32 copy, kept
      "free 16",
      "flush",
      "mark after bwd",
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "zero_grad",
      "free 17",
      "free 6",
  };
  EXPECT_EQ(Emit(TwoReaders({flat}), options), expected);
}

// One rank (FSDP does not shard: the fp32 parameters are used as they are, nothing gathered),
// mm2 checkpointed: its parameter gradients are made at its backward after the recompute, and
// kept as .grad until zero_grad.
TEST(ParamReads, CheckpointedRunMakesItsGradientsAfterTheRecompute) {
  const std::vector<std::string> expected = {
      "alloc 1 16 s0 param",  // w, whole
      "alloc 2 8 s0 param",   // b
      "alloc 3 100 s0 activation",
      "iteration 0",
      "phase forward",
      "compute forward mm1",
      "alloc 4 200 s0 activation",  // h, kept by the region
      "compute forward mm2",
      "alloc 5 200 s0 activation",  // y under no_grad
      "compute forward loss",
      "alloc 6 4 s0 activation",
      "free 5",
      "mark after fwd",  // live: 24 + 100 + 200 + 4
      "phase backward",
      "alloc 7 4 s0 grad",
      "compute backward loss",
      "alloc 8 200 s0 grad",  // grad y, the region's argument
      "free 7",
      "compute recompute mm2",
      "alloc 9 200 s0 activation",  // y again
      "compute backward mm2",
      "alloc 10 16 s0 grad",   // w's gradient from mm2
      "alloc 11 8 s0 grad",    // b.grad
      "alloc 12 200 s0 grad",  // grad h
      "free 8",                // the region returns: grad y, recomputed y, kept h
      "free 9",
      "free 4",
      "compute backward mm1",
      "alloc 13 16 s0 grad",
      "free 12",
      "alloc 14 16 s0 grad",  // w.grad: the sum
      "free 10",
      "free 13",
      "flush",
      "mark after bwd",  // live: 24 + 100 + 4 + 16 + 8 (the gradients kept)
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "zero_grad",
      "free 14",
      "free 11",
      "free 6",
  };
  EXPECT_EQ(Emit(TwoReaders({{"w", 4}, {"b", 2}}, /*checkpoint=*/true), Options(1)), expected);
}

// A run that reads none of an instance's parameters in backward (param_reads empty) makes no
// gradient; a parameter no run reads gets a zero stand-in at the hook, as before param_reads,
// so that every parameter is reduced once.
TEST(ParamReads, UnreadParameterGetsAStandInAtTheHook) {
  ModelProgram model = TwoReaders({{"w", 4}, {"b", 2}});
  model.forward[2].param_reads = std::vector<std::string>{"w"};  // mm2 no longer reads b
  std::vector<std::string> tail;
  bool in_hook = false;
  for (const std::string& event : Emit(model, Options(2))) {
    in_hook = in_hook || event == "free 11";
    if (in_hook) tail.push_back(event);
    if (event == "flush") break;
  }
  EXPECT_EQ(tail, (std::vector<std::string>{"free 11", "rs 1.0 g1 fp32 2 view", "free 16",
                                            "alloc 17 8 s0 grad", "free 12",
                                            "rs 1.1 g1 fp32 1 view", "free 17", "flush"}));
}

// Autocast: mm reads a cast copy of w (saved, 8 bytes fp16) and its backward makes the copy's
// gradient (workspace, 8 bytes); w's gradient (fp32, 16 bytes) is made by the cast node
// (ToCopyBackward), which runs after mm's node has returned: its output gradient freed and
// its saves released.
TEST(ParamReads, ACastCopysNodeMakesTheGradientAfterTheRunReturns) {
  ProgramBuilder program("autocast");
  program.AddInstance({"root", {}, true, false});
  const std::size_t lin = program.AddInstance({"lin", {{"w", 4}}, true, true});
  program.AddInput(Tensor("x", 100, "fp32"));
  program.Gather(lin);
  ForwardOp& mm = program.Run("mm", 0, {lin}, {In("x")}, {Tensor("h", 100, "fp16")},
                              {Keep("x"), Fresh(8, "fp16", "w cast")});
  mm.workspace.push_back(Workspace(8, "fp16", "w cast grad"));
  mm.param_reads = std::vector<std::string>{"w"};
  program.EndForward(lin);
  program.Run("loss", 0, {}, {In("h")}, {Tensor("loss", 2, "fp16")});
  program.SetLoss("loss");
  const std::vector<std::string> expected = {
      "alloc 1 8 s0 param",
      "alloc 2 100 s0 activation",
      "iteration 0",
      "phase forward",
      "alloc 3 16 s1 all_gather",
      "compute forward mm",
      "alloc 4 8 s0 activation",    // the cast copy, saved
      "alloc 5 100 s0 activation",  // h
      "free 3",
      "compute forward loss",
      "alloc 6 2 s0 activation",
      "free 5",
      "mark after fwd",
      "phase backward",
      "alloc 7 2 s0 grad",
      "compute backward loss",
      "alloc 8 100 s0 grad",  // grad h
      "free 7",
      "alloc 9 16 s1 all_gather",
      "compute backward mm",
      "alloc 10 8 s0 grad",  // the cast copy's gradient
      "free 8",              // mm returns: grad h goes, the cast copy is released
      "free 4",
      "alloc 11 16 s0 grad",  // ToCopyBackward: w's gradient in fp32
      "free 10",
      "free 9",
      "rs 1.0 g1 fp32 2 view",
      "free 11",
      "flush",
      "mark after bwd",
      "phase step",
      "compute optimizer step",
      "mark after step",
      "phase zero_grad",
      "zero_grad",
      "free 6",
  };
  EXPECT_EQ(Emit(program.Take(), Options(2)), expected);
}

TEST(ParamReads, ValidationNamesTheJsonPointer) {
  const auto error = [](const ModelProgram& model) { return ValidateProgram(model).message(); };
  GenParam flat{"flat_param_0", 8};
  flat.views = {{"w", 4}, {"b", 2}, {"u", 2}};

  ModelProgram model = TwoReaders({{"w", 4}, {"b", 2}});
  model.forward[2].param_reads = std::vector<std::string>{"w", "q"};
  EXPECT_EQ(error(model),
            "/forward/2/param_reads/1: 'q' is no parameter (a view's name, or a parameter without "
            "views) of the instances the run uses ('lin')");
  model.forward[2].param_reads = std::vector<std::string>{"w", "w"};
  EXPECT_EQ(error(model), "/forward/2/param_reads/1: 'w' is read twice by the run");
  model.forward[2].param_reads.reset();
  EXPECT_EQ(error(model),
            "/forward/2: run 'mm2' uses parameters but has no param_reads, while /forward/1 has "
            "them: give param_reads on every run that uses parameters, or on none");
  model = TwoReaders({{"w", 4}, {"b", 2}});
  model.forward[2].uses.clear();
  EXPECT_EQ(error(model),
            "/forward/2/param_reads/0: 'w' is no parameter (a view's name, or a parameter "
            "without views) of the instances the run uses (none)");

  model = TwoReaders({flat});
  model.forward[1].param_reads = std::vector<std::string>{"flat_param_0"};
  EXPECT_EQ(error(model),
            "/forward/1/param_reads/0: 'flat_param_0' is no parameter (a view's name, or a "
            "parameter without views) of the instances the run uses ('lin')");
  model = TwoReaders({flat});
  model.units[1].params[0].views[2].numel = 3;
  EXPECT_EQ(error(model),
            "/instances/1/params/0/views: the views of 'flat_param_0' have 9 elements in all, the "
            "parameter 8 (a flat parameter is its views concatenated, no padding)");
  model = TwoReaders({flat});
  model.units[1].params[0].views[2].name = "w";
  EXPECT_EQ(error(model),
            "/instances/1/params/0/views/2/name: 'w' names two parameters of "
            "instance 'lin'");
  model = TwoReaders({flat});
  model.units[1].params[0].views[2].numel = 0;
  EXPECT_EQ(error(model),
            "/instances/1/params/0/views/2/numel: view 'u' has 0 elements (at "
            "least 1, at most the parameter's 8)");
}

// Views and param_reads are written and read back unchanged, and the reader's errors name the
// file.
TEST(ParamReads, ProgramFileRoundTripsViewsAndParamReads) {
  GenParam flat{"flat_param_0", 8};
  flat.views = {{"w", 4}, {"b", 2}, {"u", 2}};
  const ModelProgram model = TwoReaders({flat});
  std::ostringstream out;
  WriteProgram(model, out);
  EXPECT_NE(out.str().find(R"("views":[{"name":"w","numel":4},{"name":"b","numel":2})"),
            std::string::npos);
  EXPECT_NE(out.str().find(R"("param_reads":["w","b"])"), std::string::npos);
  Result<ModelProgram> read = ParseProgram("m.json", out.str());
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  std::ostringstream again;
  WriteProgram(*read, again);
  EXPECT_EQ(again.str(), out.str());
  EXPECT_EQ(Emit(*read, Options(2)), Emit(model, Options(2)));

  std::string bad = out.str();
  bad.replace(bad.find(R"("param_reads":["w","b"])"), 23, R"("param_reads":["w","z"])");
  Result<ModelProgram> wrong = ParseProgram("m.json", bad);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(),
            "m.json: /forward/2/param_reads/1: 'z' is no parameter (a view's name, or a parameter "
            "without views) of the instances the run uses ('lin')");
  bad = out.str();
  const std::string views =
      R"("views":[{"name":"w","numel":4},{"name":"b","numel":2},{"name":"u","numel":2}])";
  bad.replace(bad.find(views), views.size(), R"("views":[])");
  wrong = ParseProgram("m.json", bad);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(),
            "m.json: /instances/1/params/0/views: must list at least one view (leave it out for a "
            "parameter of its own)");
}

}  // namespace
}  // namespace bucketsim
