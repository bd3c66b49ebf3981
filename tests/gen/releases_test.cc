// A run's `releases`: tensors the model's code keeps in a Python variable until that run has
// run, which matters in a checkpointed region's forward under no_grad (nothing else keeps a
// tensor there) and in its recompute; every event written out by hand.
#include <gtest/gtest.h>

#include <algorithm>

#include <sstream>
#include <string>
#include <vector>

#include "engine/trace_checker.h"
#include "gen/model_program.h"
#include "gen/program_builder.h"
#include "gen/program_regions.h"
#include "io/model_program_file.h"
#include "testing/recording_sink.h"
#include "tiny_fsdp.h"

namespace bucketsim {
namespace {

// Two ranks (testing::TinyFsdpOptions: fp32, SGD, one shared group, one iteration).
GenOptions TinyOptions() { return testing::TinyFsdpOptions(2); }

std::vector<std::string> Emit(const ModelProgram& model) {
  return testing::EmitSummary(model, TinyOptions());
}

// lin (4 parameters): h = lin(x); a checkpointed region that keeps h: a = f(h) (saves a),
// b = g(a), c = k(b), which releases a (a local variable alive until k has run); loss: a mean
// of c.
ModelProgram RegionWithALocal() {
  ProgramBuilder program("releases");
  program.AddInstance({"root", {}, true, false});
  const std::size_t lin = program.AddInstance({"lin", {{"flat_param_0", 4}}, true, true});
  program.AddInput(Tensor("x", 100, "fp32"));
  program.Gather(lin);
  program.Run("lin", 0, {lin}, {In("x")}, {Tensor("h", 200, "fp32")}, {Keep("x")});
  program.EndForward(lin);
  program.CheckpointBegin({Keep("h")});
  program.Run("a", 0, {}, {In("h")}, {Tensor("a", 200, "fp32")}, {Keep("a")});
  program.Run("b", 0, {}, {In("a")}, {Tensor("b", 200, "fp32")});
  program.Run("c", 0, {}, {In("b")}, {Tensor("c", 200, "fp32")}).releases = {"a"};
  program.CheckpointEnd();
  program.Run("loss", 0, {}, {In("c")}, {Tensor("loss", 4, "fp32")});
  program.SetLoss("loss");
  return program.Take();
}

TEST(Releases, ALocalOutlivesItsLastReaderInTheRegionAndItsRecompute) {
  const std::vector<std::string> expected = {
      "alloc 1 8 s0 param",
      "alloc 2 100 s0 activation",
      "iteration 0",
      "phase forward",
      "alloc 3 16 s1 all_gather",
      "compute forward lin",
      "alloc 4 200 s0 activation",  // h, kept by the region
      "free 3",
      "compute forward a",
      "alloc 5 200 s0 activation",  // a: no_grad, so only its variable keeps it after b
      "compute forward b",
      "alloc 6 200 s0 activation",  // b
      "compute forward c",
      "alloc 7 200 s0 activation",  // c
      "free 6",                     // b: c read it last
      "free 5",                     // a: c released it (without releases: after b)
      "compute forward loss",
      "alloc 8 4 s0 activation",
      "free 7",
      "mark after fwd",
      "phase backward",
      "alloc 9 4 s0 grad",
      "compute backward loss",
      "alloc 10 200 s0 grad",  // grad c
      "free 9",
      "compute recompute a",
      "alloc 11 200 s0 activation",  // a, saved this time
      "compute recompute b",
      "alloc 12 200 s0 activation",
      "compute recompute c",
      "alloc 13 200 s0 activation",  // c, held by the region's backward
      "free 12",                     // b; a stays: saved
      "compute backward c",
      "alloc 14 200 s0 grad",  // grad b
      "compute backward b",
      "alloc 15 200 s0 grad",  // grad a
      "free 14",
      "compute backward a",
      "alloc 16 200 s0 grad",  // grad h
      "free 15",
      "free 11",  // a released by its backward
      "free 10",  // the region returns: grad c, recomputed c, kept h
      "free 13",
      "free 4",
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
      "free 8",
  };
  EXPECT_EQ(Emit(RegionWithALocal()), expected);
}

// The same region non-reentrant (torch 2.x's use_reentrant=False): its recompute waits for the
// backward of a, its last run that saves anything (the first to unpack a saved tensor), and
// stops after it: b and c are not recomputed, and nothing holds their outputs or the gradient
// of c past their own use.
TEST(Releases, ANonReentrantRegionRecomputesUpToItsLastSaveWhenItIsUnpacked) {
  ModelProgram model = RegionWithALocal();
  model.forward[3].reentrant = false;
  const std::vector<std::string> events = Emit(model);
  const std::vector<std::string> backward = {
      "phase backward",
      "alloc 9 4 s0 grad",
      "compute backward loss",
      "alloc 10 200 s0 grad",  // grad c
      "free 9",
      "compute backward c",    // c's and b's backward first: they save nothing
      "alloc 11 200 s0 grad",  // grad b
      "free 10",               // grad c: c's backward has run
      "compute backward b",
      "alloc 12 200 s0 grad",  // grad a
      "free 11",
      "compute recompute a",  // a's backward unpacks its save: the recompute, a alone
      "alloc 13 200 s0 activation",
      "compute backward a",
      "alloc 14 200 s0 grad",  // grad h
      "free 12",
      "free 13",  // a's save goes with its backward
      "free 4",   // the region's saves (h) at its begin
  };
  EXPECT_NE(std::search(events.begin(), events.end(), backward.begin(), backward.end()),
            events.end())
      << ::testing::PrintToString(events);
  EXPECT_EQ(std::count(events.begin(), events.end(), "compute recompute b"), 0);
  // The program file says it ("reentrant": false, absent when true) and reads it back.
  std::ostringstream out;
  WriteProgram(model, out);
  EXPECT_NE(
      out.str().find(R"({"op":"checkpoint_begin","saves":[{"tensor":"h"}],"reentrant":false})"),
      std::string::npos)
      << out.str();
  Result<ModelProgram> back = ParseProgram("m.json", out.str());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->forward[3].reentrant);
  EXPECT_EQ(Emit(*back), events);
}

// The region's plan (gen/program_regions.h): ops 3..7 are the region (begin 3, runs a b c,
// end 7); reentrant, the recompute reruns a..c at the region's end; non-reentrant, it reruns
// a alone (the last run that saves), started by a's backward, whose release of its saves also
// lets go of the region's own (the frame's).
TEST(Releases, TheRegionsPlanSaysWhereEachRecomputeStartsAndStops) {
  constexpr std::size_t kNone = CheckpointRegions::kNone;
  ModelProgram model = RegionWithALocal();
  CheckpointRegions regions = FindCheckpointRegions(model);
  EXPECT_EQ(regions.region, (std::vector<std::size_t>{kNone, kNone, kNone, 3, 3, 3, 3, 3, kNone}));
  EXPECT_EQ(regions.stop[3], 6u);
  EXPECT_EQ(regions.trigger, std::vector<std::size_t>(9, kNone));
  EXPECT_EQ(regions.frame_release, std::vector<std::size_t>(9, kNone));
  EXPECT_TRUE(regions.Reruns(6));
  EXPECT_FALSE(regions.Reruns(7));
  model.forward[3].reentrant = false;
  regions = FindCheckpointRegions(model);
  EXPECT_EQ(regions.stop[3], 4u);
  EXPECT_EQ(regions.trigger[4], 7u);
  // a is also its first run that saves: its backward lets go of the region's frame.
  EXPECT_EQ(regions.frame_release[4], 3u);
  EXPECT_EQ(std::count(regions.frame_release.begin(), regions.frame_release.end(), kNone), 8);
  EXPECT_TRUE(regions.Reruns(4));
  EXPECT_FALSE(regions.Reruns(5));
}

// lin (4 parameters): t = lin(x); u = b(t); a checkpointed region whose begin keeps t and u, and
// whose one run reads u: v = c(u); loss: a mean of v. t's last reader (b) runs before the region
// begins: the begin's save keeps it alive all the same (until the region's backward), as it does
// for a run that saves a tensor it does not read (`gen program --checkpoint` places such begins:
// a block that saves by reference what an earlier block made). The emitter used to free t after
// b and then abort at the begin (a program the checks accept, found by the program fuzzer).
ModelProgram BeginKeepsATensorPastItsLastReader() {
  ProgramBuilder program("begin keeps");
  program.AddInstance({"root", {}, true, false});
  const std::size_t lin = program.AddInstance({"lin", {{"flat_param_0", 4}}, true, true});
  program.AddInput(Tensor("x", 100, "fp32"));
  program.Gather(lin);
  program.Run("lin", 0, {lin}, {In("x")}, {Tensor("t", 200, "fp32")}, {Keep("x")});
  program.EndForward(lin);
  program.Run("b", 0, {}, {In("t")}, {Tensor("u", 200, "fp32")});
  program.CheckpointBegin({Keep("t"), Keep("u")});
  program.Run("c", 0, {}, {In("u")}, {Tensor("v", 200, "fp32")}, {Keep("u")});
  program.CheckpointEnd();
  program.Run("loss", 0, {}, {In("v")}, {Tensor("loss", 4, "fp32")});
  program.SetLoss("loss");
  return program.Take();
}

TEST(Releases, ARegionsBeginKeepsATensorPastItsLastReader) {
  const std::vector<std::string> events = Emit(BeginKeepsATensorPastItsLastReader());
  const std::vector<std::string> forward = {
      "compute forward lin",
      "alloc 4 200 s0 activation",  // t
      "free 3",
      "compute forward b",
      "alloc 5 200 s0 activation",  // u; t stays: the begin keeps it
      "compute forward c",
      "alloc 6 200 s0 activation",  // v; u stays: the begin keeps it
      "compute forward loss"};
  const auto at = std::search(events.begin(), events.end(), forward.begin(), forward.end());
  ASSERT_NE(at, events.end()) << ::testing::PrintToString(events);
  // t and u are freed when the region's backward returns, after c's backward.
  const auto c_backward = std::find(events.begin(), events.end(), "compute backward c");
  ASSERT_NE(c_backward, events.end());
  const auto free_t = std::find(c_backward, events.end(), "free 4");
  const auto free_u = std::find(c_backward, events.end(), "free 5");
  EXPECT_NE(free_t, events.end()) << ::testing::PrintToString(events);
  EXPECT_NE(free_u, events.end());
  EXPECT_EQ(std::find(events.begin(), c_backward, "free 4"), c_backward);
}

TEST(Releases, ValidationNamesTheJsonPointer) {
  const auto error = [](const ModelProgram& model) { return ValidateProgram(model).message(); };
  ModelProgram model = RegionWithALocal();
  model.forward[6].releases = {"h"};  // made before the region
  EXPECT_EQ(error(model),
            "/forward/6/releases/0: tensor 'h' is made outside checkpointed regions and released "
            "in one (whose recompute would release it again)");
  model.forward[6].releases = {"x"};
  EXPECT_EQ(error(model),
            "/forward/6/releases/0: tensor 'x' is not made by this run or an "
            "earlier one");
  model.forward[6].releases = {"a"};
  model.forward[5].releases = {"a"};
  EXPECT_EQ(error(model), "/forward/6/releases/0: tensor 'a' is released twice");
}

// Autocast's cache holds the weight copies a checkpointed region makes until the forward's
// autocast exits (the recorder's second run sees them die after the last run): a release by a
// run after the region. The forward holds b until the loss has run; the recompute holds it until
// the recompute ends (its own autocast exits), not until its backward returns.
TEST(Releases, ACacheHoldsATensorPastItsRegion) {
  ModelProgram model = RegionWithALocal();
  model.forward[8].releases = {"b"};  // the loss run, after the region
  ASSERT_TRUE(ValidateProgram(model).ok()) << ValidateProgram(model).message();
  const std::vector<std::string> events = Emit(model);
  const std::vector<std::string> forward = {
      "compute forward c",
      "alloc 7 200 s0 activation",  // c
      "free 5",                     // a: c released it; b stays, held past the region
      "compute forward loss",
      "alloc 8 4 s0 activation",
      "free 7",
      "free 6",  // b: the loss released it
      "mark after fwd"};
  EXPECT_NE(std::search(events.begin(), events.end(), forward.begin(), forward.end()), events.end())
      << ::testing::PrintToString(events);
  const std::vector<std::string> recompute = {
      "compute recompute c",
      "alloc 13 200 s0 activation",  // c, held by the region's backward
      "free 12",                     // b: the recompute has ended
      "compute backward c"};
  EXPECT_NE(std::search(events.begin(), events.end(), recompute.begin(), recompute.end()),
            events.end())
      << ::testing::PrintToString(events);
  // Every storage is freed by the end (the trace checker), none twice.
  EXPECT_EQ(std::count(events.begin(), events.end(), "free 12"), 1);
}

TEST(Releases, ProgramFileRoundTripsThem) {
  const ModelProgram model = RegionWithALocal();
  std::ostringstream out;
  WriteProgram(model, out);
  EXPECT_NE(out.str().find(R"("releases":["a"])"), std::string::npos);
  Result<ModelProgram> read = ParseProgram("m.json", out.str());
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->forward[6].releases, (std::vector<std::string>{"a"}));
  EXPECT_EQ(Emit(*read), Emit(model));
}

}  // namespace
}  // namespace bucketsim
