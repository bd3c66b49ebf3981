// gen program --batch-size and --seq-len (gen/program_batch.h): a program recorded at several
// batch sizes or sequence lengths put at another, every tensor and run by its growth; what
// cannot be scaled is refused and the program left as it was. Held against real runs at shapes
// not recorded by Tools.Oracle (tests/tools/oracle_test.py, BATCH_CASES).
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
ModelProgram Recorded() {
  ProgramBuilder program("batched");
  program.AddInstance({"root", {}, true, false});
  const std::size_t lin = program.AddInstance({"lin", {{"flat_param_0", 4}}, true, true});
  ProgramTensor x = Tensor("x", 32, "fp32");
  x.bytes_growth = {16};  // {per_sample, per_token, per_token2, ...}
  x.shape = std::vector<std::uint64_t>{2, 4};
  program.AddInput(x);
  program.Gather(lin);
  ProgramTensor h = Tensor("h", 64, "fp32");
  h.bytes_growth = {32};
  h.shape = std::vector<std::uint64_t>{2, 8};
  SavedTensor mask = Fresh(8, "bool", "mask");
  mask.fresh.bytes_growth = {4};
  ForwardOp& run = program.Run("lin", 100, {lin}, {In("x")}, {h}, {Keep("x"), mask});
  run.backward_flops = 300;
  run.flops_growth = {50};
  run.backward_flops_growth = Growth<double>{100};
  NewTensor workspace = Workspace(2, "bf16", "ws");
  workspace.bytes_growth = {1};
  run.workspace = {workspace};
  program.EndForward(lin);
  program.Run("loss", 0, {}, {In("h")}, {Tensor("loss", 4, "fp32")});
  program.SetLoss("loss");
  ModelProgram model = program.Take();
  model.batch = RecordedSizes{2, {2, 3, 4}};
  return model;
}

TEST(ScaleBatch, PutsEveryTensorAndRunAtTheSize) {
  ModelProgram model = Recorded();
  Result<BatchSummary> scaled = ScaleBatch(model, {.size = 6});
  ASSERT_TRUE(scaled.ok()) << scaled.status().ToString();
  ASSERT_TRUE(scaled->size);
  EXPECT_EQ(scaled->size->from, 2u);
  EXPECT_EQ(scaled->size->to, 6u);
  EXPECT_FALSE(scaled->seq_len);
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
  EXPECT_EQ(model.batch->at, 6u);
  EXPECT_EQ(model.description, "batched; batch size 6");
  // Down to the smallest size checked, and back: the program as recorded, but its shapes.
  ASSERT_TRUE(ScaleBatch(model, {.size = 2}).ok());
  EXPECT_EQ(model.inputs[0].bytes, 32u);
  EXPECT_EQ(model.forward[1].BackwardFlops(), 300.0);
  EXPECT_FALSE(testing::EmitSummary(model, testing::TinyFsdpOptions(2)).empty());
}

TEST(ScaleBatch, WithoutBackwardFlopsTheBackwardIsTwiceTheForward) {
  ModelProgram model = Recorded();
  model.forward[1].backward_flops.reset();
  model.forward[1].backward_flops_growth.reset();
  ASSERT_TRUE(ScaleBatch(model, {.size = 3}).ok());
  EXPECT_EQ(model.forward[1].flops, 150.0);
  EXPECT_EQ(model.forward[1].BackwardFlops(), 300.0);
}

TEST(ScaleBatch, RefusesWhatItCannotScale) {
  ModelProgram model = Recorded();
  const auto error = [&](std::uint64_t size) {
    return ScaleBatch(model, {.size = size}).status().message();
  };
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
            "tensor 'x' has 8 B at batch size 2 and would have less than none at batch size 1");
  EXPECT_EQ(model.inputs[0].bytes, 8u);  // unchanged
  model.batch.reset();
  EXPECT_EQ(error(4),
            "the program was recorded at one batch size: record it with "
            "tools/record_program.py --batch-sizes (a batch function that takes the size) to "
            "emit it at another");
}

// The example GPT's kinds of growth with the sequence length s (recorded at batch size 2 and
// s = 16 of 16, 24, 32, 40): tokens (int64) 8 B x b x s; the causal mask (bool) s x s, no batch;
// the scores (fp32, 4 heads) 16 B x b x s x s; a run of 10 FLOPs x b x s x s.
ModelProgram RecordedBySeq() {
  ProgramBuilder program("shaped");
  program.AddInstance({"root", {}, true, false});
  const std::size_t lin = program.AddInstance({"lin", {{"flat_param_0", 4}}, true, true});
  ProgramTensor tokens = Tensor("tokens", 8 * 2 * 16, "int64");
  // bytes(b, s) = 8bs: about (2, 16), 8s0 = 128 per sample, 8b0 = 16 per token, 8 per both.
  tokens.bytes_growth = {128, 16, 0, 8, 0};
  program.AddInput(tokens);
  program.Gather(lin);
  ProgramTensor mask = Tensor("mask", 16 * 16, "bool");
  mask.bytes_growth = {0, 2 * 16, 1, 0, 0};  // s^2: 2 s0 per token, 1 per token^2
  ProgramTensor scores = Tensor("scores", 16 * 2 * 16 * 16, "fp32");
  // 16 b s^2: per sample 16 s0^2, per token 32 b0 s0, per token^2 16 b0, per both 32 s0, 16.
  scores.bytes_growth = {16 * 16 * 16, 32 * 2 * 16, 16 * 2, 32 * 16, 16};
  ForwardOp& run = program.Run("scores", 10 * 2 * 16 * 16, {lin}, {In("tokens")}, {mask, scores});
  run.flops_growth = {10 * 16 * 16, 20 * 2 * 16, 10 * 2, 20 * 16, 10};
  program.EndForward(lin);
  program.Run("loss", 0, {}, {In("scores")}, {Tensor("loss", 4, "fp32")});
  program.SetLoss("loss");
  ModelProgram model = program.Take();
  model.batch = RecordedSizes{2, {2, 3, 4}};
  model.seq = RecordedSizes{16, {16, 24, 32, 40}};
  return model;
}

TEST(ScaleBatch, PutsTheProgramAtAnotherSequenceLengthAndBatchSize) {
  ModelProgram model = RecordedBySeq();
  Result<BatchSummary> scaled = ScaleBatch(model, {.size = 6, .seq_len = 64});
  ASSERT_TRUE(scaled.ok()) << scaled.status().ToString();
  ASSERT_TRUE(scaled->size && scaled->seq_len);
  EXPECT_EQ(scaled->seq_len->from, 16u);
  EXPECT_EQ(scaled->seq_len->to, 64u);
  EXPECT_EQ(model.inputs[0].bytes, 8u * 6 * 64);
  const ForwardOp& run = model.forward[1];
  EXPECT_EQ(run.outputs[0].bytes, 64u * 64);
  EXPECT_EQ(run.outputs[1].bytes, 16u * 6 * 64 * 64);
  EXPECT_EQ(run.flops, 10.0 * 6 * 64 * 64);
  EXPECT_EQ(run.BackwardFlops(), 2 * 10.0 * 6 * 64 * 64);  // twice the forward's, grown
  EXPECT_EQ(model.description, "shaped; batch size 6, sequence length 64");
  // The growth is re-centred at the new shape: from there to another gives what the recorded
  // program gives there directly, the length alone moving too.
  ASSERT_TRUE(ScaleBatch(model, {.size = 3, .seq_len = 24}).ok());
  ModelProgram direct = RecordedBySeq();
  ASSERT_TRUE(ScaleBatch(direct, {.size = 3, .seq_len = 24}).ok());
  EXPECT_EQ(model.forward[1].outputs[1].bytes, 16u * 3 * 24 * 24);
  EXPECT_EQ(model.forward[1].outputs[1].bytes_growth, direct.forward[1].outputs[1].bytes_growth);
  EXPECT_EQ(model.forward[1].flops_growth, direct.forward[1].flops_growth);
  ASSERT_TRUE(ScaleBatch(model, {.seq_len = 40}).ok());
  EXPECT_EQ(model.forward[1].outputs[0].bytes, 40u * 40);
  EXPECT_EQ(model.inputs[0].bytes, 8u * 3 * 40);
  EXPECT_EQ(model.seq->at, 40u);
  EXPECT_EQ(model.batch->at, 3u);
  EXPECT_FALSE(testing::EmitSummary(model, testing::TinyFsdpOptions(2)).empty());
}

TEST(ScaleBatch, RefusesALengthItCannotReach) {
  ModelProgram model = RecordedBySeq();
  const auto error = [&](BatchShape to) { return ScaleBatch(model, to).status().message(); };
  EXPECT_EQ(error({.seq_len = 8}),
            "8 is below the smallest sequence length the recording checked (16): the model may "
            "run other ops there (at batch size 1 PyTorch can take a view where a larger batch "
            "copies); record at 8 too");
  EXPECT_EQ(error({.size = 4, .seq_len = std::uint64_t{1} << 40}),
            fmt::format("at batch size 4, sequence length {} tensor 'mask' would need more "
                        "than 1 PiB",
                        std::uint64_t{1} << 40));
  EXPECT_EQ(model.inputs[0].bytes, 8u * 2 * 16);  // unchanged
  // As recorded: nothing to do, nothing said.
  Result<BatchSummary> same = ScaleBatch(model, {.size = 2, .seq_len = 16});
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->size || same->seq_len);
  model.seq.reset();
  EXPECT_EQ(error({.seq_len = 32}),
            "the program was recorded at one sequence length: record it with "
            "tools/record_program.py --seq-lens (a batch function that takes seq_len=) to emit "
            "it at another");
}

}  // namespace
}  // namespace bucketsim
