// gen program --batch-size (gen/program_batch.h): a program recorded at several batch sizes
// put at another, every tensor and run by what each sample adds; what cannot be scaled is
// refused and the program left as it was. Held against real runs at sizes not recorded by
// Tools.Oracle (tests/tools/oracle_test.py, BATCH_CASES).
#include "gen/program_batch.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "gen/program_builder.h"
#include "tiny_fsdp.h"

namespace bucketsim {
namespace {

// lin (4 parameters), at batch size 2 of 2, 3, 4: x (32 B, 16 per sample) -> h (64 B + 32 per
// sample; 100 FLOPs + 50 per sample, backward 300 + 100) -> loss (4 B, a scalar); lin saves a
// mask of 8 B + 4 per sample and its backward makes a 2 B + 1 workspace.
FsdpModel Recorded() {
  ProgramBuilder program("batched");
  program.AddInstance({"root", {}, true, false});
  const std::size_t lin = program.AddInstance({"lin", {{"flat_param_0", 4}}, true, true});
  ProgramTensor x = Tensor("x", 32, "fp32");
  x.bytes_per_sample = 16;
  x.shape = std::vector<std::uint64_t>{2, 4};
  program.AddInput(x);
  program.Gather(lin);
  ProgramTensor h = Tensor("h", 64, "fp32");
  h.bytes_per_sample = 32;
  h.shape = std::vector<std::uint64_t>{2, 8};
  SavedTensor mask = Fresh(8, "bool", "mask");
  mask.fresh.bytes_per_sample = 4;
  ForwardOp& run = program.Run("lin", 100, {lin}, {In("x")}, {h}, {Keep("x"), mask});
  run.backward_flops = 300;
  run.flops_per_sample = 50;
  run.backward_flops_per_sample = 100;
  NewTensor workspace = Workspace(2, "bf16", "ws");
  workspace.bytes_per_sample = 1;
  run.workspace = {workspace};
  program.EndForward(lin);
  program.Run("loss", 0, {}, {In("h")}, {Tensor("loss", 4, "fp32")});
  program.SetLoss("loss");
  FsdpModel model = program.Take();
  model.batch = BatchSizes{2, {2, 3, 4}};
  return model;
}

TEST(ScaleBatch, PutsEveryTensorAndRunAtTheSize) {
  FsdpModel model = Recorded();
  Result<BatchSummary> scaled = ScaleBatch(model, 6);
  ASSERT_TRUE(scaled.ok()) << scaled.status().ToString();
  EXPECT_EQ(scaled->from, 2u);
  EXPECT_EQ(scaled->to, 6u);
  EXPECT_EQ(scaled->bytes_before, 32u + 8u + 64u + 2u + 4u);
  EXPECT_EQ(scaled->bytes_after, 96u + 24u + 192u + 6u + 4u);
  EXPECT_EQ(model.inputs[0].bytes, 96u);
  EXPECT_FALSE(model.inputs[0].shape);  // which dimension grew is not recorded
  const ForwardOp& run = model.forward[1];
  EXPECT_EQ(run.outputs[0].bytes, 192u);
  EXPECT_EQ(run.saves[1].fresh.bytes, 24u);
  EXPECT_EQ(run.workspace[0].bytes, 6u);
  EXPECT_EQ(run.flops, 300.0);
  EXPECT_EQ(run.BackwardFlops(), 700.0);
  EXPECT_EQ(model.forward[3].outputs[0].bytes, 4u);  // the loss: no per-sample part
  EXPECT_EQ(model.batch->size, 6u);
  EXPECT_EQ(model.description, "batched; batch size 6");
  // Down to the smallest size checked, and back: the program as recorded, but its shapes.
  ASSERT_TRUE(ScaleBatch(model, 2).ok());
  EXPECT_EQ(model.inputs[0].bytes, 32u);
  EXPECT_EQ(model.forward[1].BackwardFlops(), 300.0);
  EXPECT_FALSE(testing::EmitSummary(model, testing::TinyFsdpOptions(2)).empty());
}

TEST(ScaleBatch, WithoutBackwardFlopsTheBackwardIsTwiceTheForward) {
  FsdpModel model = Recorded();
  model.forward[1].backward_flops.reset();
  model.forward[1].backward_flops_per_sample.reset();
  ASSERT_TRUE(ScaleBatch(model, 3).ok());
  EXPECT_EQ(model.forward[1].flops, 150.0);
  EXPECT_EQ(model.forward[1].BackwardFlops(), 300.0);
}

TEST(ScaleBatch, RefusesWhatItCannotScale) {
  FsdpModel model = Recorded();
  const auto error = [&](std::uint64_t size) { return ScaleBatch(model, size).status().message(); };
  EXPECT_EQ(error(1),
            "1 is below the smallest batch size the recording checked (2): the model may run "
            "other ops there (at batch size 1 PyTorch can take a view where a larger batch "
            "copies); record at 1 too");
  EXPECT_EQ(error(std::uint64_t{1} << 62), fmt::format("at batch size {} tensor 'x' would need "
                                                       "more than 1 PiB",
                                                       std::uint64_t{1} << 62));
  model.inputs[0].bytes = 8;  // 16 B per sample: less than nothing at batch size 1
  model.batch->checked = {1, 2, 3};
  EXPECT_EQ(error(1),
            "tensor 'x' has 8 B at batch size 2 and 16 B more per sample: none left at 1");
  EXPECT_EQ(model.inputs[0].bytes, 8u);  // unchanged
  model.batch.reset();
  EXPECT_EQ(error(4),
            "the program was recorded at one batch size: record it with "
            "tools/record_program.py --batch-sizes (a batch function that takes the size) to "
            "emit it at another");
}

}  // namespace
}  // namespace bucketsim
