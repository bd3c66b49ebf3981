// The fairscale-convnet preset against hand-computed sizes for two small configurations, and
// against the parameter counts of reference/fsdp_semantics.md §3.2 for the test's own sizes.
#include "gen/convnet_preset.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/trace_checker.h"
#include "gen/program_render.h"
#include "testing/recording_sink.h"

namespace bucketsim {
namespace {

using testing::BackwardAllocs;
using testing::RecordingSink;
using testing::RenderProgram;
using testing::SummarizeAll;

RecordingSink Generate(const ConvnetConfig& config) {
  RecordingSink recorder;
  TraceChecker checker(&recorder);
  Status status = GenerateConvnet(config, checker);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return recorder;
}

// Bytes of live allocations of category `cat` at the first mark named `mark`.
Bytes LiveAtMark(const RecordingSink& trace, Category cat, const std::string& mark) {
  std::map<std::uint64_t, Bytes> live;
  for (const Event& e : trace.events) {
    if (e.kind == EventKind::kAlloc && e.category == cat) live[e.id] = e.bytes;
    if (e.kind == EventKind::kFree) live.erase(e.id);
    if (e.kind == EventKind::kMark && trace.header.names[e.name] == mark) break;
  }
  Bytes sum = 0;
  for (const auto& [id, bytes] : live) sum += bytes;
  return sum;
}

// Configuration C: hidden_dim 3, one 8x8 image, 2 ranks, fp32, one shared group, SGD momentum.
// Spatial size after the stem's k3 conv without padding: 8 - 2 = 6 (the k5 convs have
// padding 2 and keep it), so a feature map of C channels is C x 36 elements x 4 bytes.
//
// Parameters (numel, then the per-rank shard s = ceil(numel / 2) and its padding):
//   stem      Conv2d(3, 64, k3): 64*3*9 + 64 = 1792             s = 896, no padding
//   stem.1    BN(64): weight 64, bias 64 (not flattened)          s = 32 each, no padding
//   blocks    Conv2d(64, 3, k5): 3*64*25 + 3 = 4803
//             Conv2d(3, 3, k5):  3*3*25 + 3  = 228, twice
//             flat: 4803 + 228 + 228 = 5259                      s = 2630, 2*2630 - 5259 = 1
//             padded: chunk_and_pad makes 1 new chunk (2 - 5259 / 2630 = 1) of 2630 fp32
//             = 10520 bytes
//   blocks.1/.4/.7  BN(3): weight 3, bias 3                       s = 2 each; 1 new chunk of
//             2 fp32 = 8 bytes each
//   head      Linear(3, 10): 30 + 10 = 40                         s = 20, no padding
// Per-rank fp32 shards (init) = s * 4: 3584, 128, 128, 10520, 8 x 6, 80.
// All-gathers (fp32: ws * s * 4): stem 7168, stem.1 256 + 256, blocks 21040, BN(3) 16 + 16,
//   head 160. Full gradients (numel * 4): stem 7168, stem.1 256 + 256, blocks 21036,
//   BN(3) 12 + 12, head 160. Reduce-scatter per-rank numel: 896, 32, 32, 2630, 2 (x 6), 20.
// Activations (fp32): stem conv output 64*36*4 = 9216; stem BN output 9216 plus its batch mean
//   and inverse std 64*4 = 256 each; per block group: conv output 3*36*4 = 432, BN output 432,
//   mean and inverse std 3*4 = 12 each; head: the pooled features 3*4 = 12 and the logits
//   10*4 = 40. The input batch 1*3*8*8*4 = 768 bytes is made once.
ConvnetConfig ConfigC() {
  ConvnetConfig config;
  config.hidden_dim = 3;
  config.batch = 1;
  config.image_size = 8;
  config.world_size = 2;
  config.rank = 0;
  config.iterations = 1;
  return config;
}

TEST(ConvnetPreset, DefaultsAreTheFairscaleMemoryTest) {
  ConvnetConfig config;
  EXPECT_EQ(config.hidden_dim, 128);
  EXPECT_EQ(config.batch, 2);
  EXPECT_EQ(config.image_size, 224);
  EXPECT_EQ(config.world_size, 2);
  EXPECT_EQ(config.iterations, 4);
  EXPECT_EQ(config.compute_dtype, DType::kFloat32);
  EXPECT_EQ(config.optimizer, OptimizerKind::kSgdMomentum);
  EXPECT_EQ(config.group_layout, GroupLayout::kShared);
}

TEST(ConvnetPreset, HeaderOfConfigC) {
  RecordingSink trace = Generate(ConfigC());
  const TraceHeader& h = trace.header;
  EXPECT_EQ(h.description,
            "fairscale FSDP memory-test convnet, hidden_dim 3, input 1x3x8x8; fairscale FSDP rank "
            "0 of 2, compute fp32, reduce fp32, shared groups, sgd-momentum, 1 iterations");
  ASSERT_EQ(h.groups.size(), 1u);
  EXPECT_EQ(h.groups[0].ranks, (std::vector<int>{0, 1}));
  std::vector<std::string> names;
  std::vector<std::vector<Numel>> numels;
  for (const UnitInfo& instance : h.units) {
    names.push_back(instance.name);
    numels.emplace_back();
    for (const ParamInfo& param : instance.params) numels.back().push_back(param.numel);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"root", "stem", "stem.1", "blocks", "blocks.1",
                                             "blocks.4", "blocks.7", "head"}));
  EXPECT_EQ(numels, (std::vector<std::vector<Numel>>{
                        {}, {1792}, {64, 64}, {5259}, {3, 3}, {3, 3}, {3, 3}, {40}}));
  EXPECT_EQ(h.units[2].params[0].name, "weight");
  EXPECT_EQ(h.units[2].params[1].name, "bias");
}

// Configuration D: hidden_dim 5, two 6x6 images, 4 ranks (this is rank 2), bf16 mixed
// precision (reduce in bf16), one group object per FSDP instance, Adam, blocks checkpointed.
// Spatial size 6 - 2 = 4, 16 positions; a C-channel feature map in bf16 is 2*C*16*2 bytes.
//
// Parameters, shards (s = ceil(numel / 4)) and padding:
//   stem    1792                                  s = 448, none
//   stem.1  64, 64                                 s = 16 each, none
//   blocks  5*64*25 + 5 = 8005, 5*5*25 + 5 = 630 twice: 9265   s = 2317 (4*2317 = 9268):
//           4 - 9265 / 2317 = 1 new chunk of 2317 bf16 = 4634 bytes
//   BN(5)   5, 5                                   s = 2 each: 4 - 5 / 2 = 2 new chunks of 2
//           fp32 = 16 bytes (BN wrappers are fp32: mixed_precision=False)
//   head    5*10 + 10 = 60                         s = 15, none
// All-gathers, mixed-precision instances (cast shard s*2 on the all-gather stream, then
//   4*s*2): stem 896 then 3584, blocks 4634 then 18536, head 30 then 120; BN wrappers in fp32
//   without a cast: stem.1 4*16*4 = 256 per parameter, BN(5) 4*2*4 = 32 per parameter.
// Reduce-scatters: main instances in bf16, cast back to fp32; BN in fp32, kept as views.
// Activations (bf16): the root's cast of the input 2*3*6*6*2 = 432 (the fp32 batch
//   2*3*6*6*4 = 864 is made once); stem conv 2*64*16*2 = 4096; stem BN 4096 + 256 + 256;
//   the blocks are checkpointed and keep nothing beyond the stem's output; head: pooled
//   2*5*2 = 20 and logits 2*10*2 = 40.
ConvnetConfig ConfigD() {
  ConvnetConfig config;
  config.hidden_dim = 5;
  config.batch = 2;
  config.image_size = 6;
  config.world_size = 4;
  config.rank = 2;
  config.iterations = 1;
  config.compute_dtype = DType::kBFloat16;
  config.group_layout = GroupLayout::kPerInstance;
  config.optimizer = OptimizerKind::kAdam;
  config.activation_checkpointing = true;
  return config;
}

TEST(ConvnetPreset, ConfigDGroupsAndReduceScatters) {
  RecordingSink trace = Generate(ConfigD());
  ASSERT_EQ(trace.header.groups.size(), 8u);  // one per instance, the root's included
  for (std::size_t f = 0; f < 8; ++f) {
    EXPECT_EQ(trace.header.groups[f].id, f + 1);
    EXPECT_EQ(trace.header.groups[f].ranks, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(trace.header.groups[f].name, trace.header.units[f].name + ".process_group");
  }
  std::vector<std::string> rs;
  for (const std::string& line : SummarizeAll(trace)) {
    if (line.rfind("rs ", 0) == 0) rs.push_back(line);
  }
  EXPECT_EQ(rs, (std::vector<std::string>{
                    "rs 7.0 g8 bf16 15 cast", "rs 6.0 g7 fp32 2 view", "rs 6.1 g7 fp32 2 view",
                    "rs 5.0 g6 fp32 2 view", "rs 5.1 g6 fp32 2 view", "rs 4.0 g5 fp32 2 view",
                    "rs 4.1 g5 fp32 2 view", "rs 3.0 g4 bf16 2317 cast", "rs 2.0 g3 fp32 16 view",
                    "rs 2.1 g3 fp32 16 view", "rs 1.0 g2 bf16 448 cast"}));
  for (const Event& e : trace.events) {
    if (e.kind == EventKind::kReduceScatter && e.shard_mode == ShardMode::kCast) {
      EXPECT_EQ(e.cast_dtype, DType::kFloat32);
    }
  }
}

// reference/fsdp_semantics.md §3.2: total parameters and per-rank shards at ws 2.
TEST(ConvnetPreset, ReferenceParameterCounts) {
  for (auto [hidden_dim, total, per_rank] :
       {std::tuple<int, Numel, Numel>{128, 1028362, 514181}, {512, 13938058, 6969029}}) {
    ConvnetConfig config;
    config.hidden_dim = hidden_dim;
    config.iterations = 1;
    RecordingSink trace = Generate(config);
    Numel numel = 0;
    for (const UnitInfo& instance : trace.header.units) {
      for (const ParamInfo& param : instance.params) numel += param.numel;
    }
    EXPECT_EQ(numel, total) << hidden_dim;
    Numel shard = 0;
    for (const Event& e : trace.events) {
      if (e.kind == EventKind::kReduceScatter) shard += e.numel;
    }
    EXPECT_EQ(shard, per_rank) << hidden_dim;
  }
}

// Without flatten_parameters, configuration C's stem, blocks and head instances own each
// weight and bias: the stem conv 64·3·3² = 1728 and 64, the block convs 3·64·5² = 4800,
// 3·3·5² = 225 twice, with 3 each, the head 3·10 = 30 and 10; flattened, their sums 1792,
// 5259 and 40. The BN instances never flatten.
TEST(ConvnetPreset, UnflattenedInstancesOwnEachWeightAndBias) {
  ConvnetConfig config = ConfigC();
  using Params = std::vector<std::pair<std::string, Numel>>;
  const auto params = [&](std::size_t instance) {
    Result<ModelProgram> program = ConvnetProgram(config);
    EXPECT_TRUE(program.ok());
    Params out;
    for (const GenParam& p : program->units.at(instance).params) out.emplace_back(p.name, p.numel);
    return out;
  };
  EXPECT_EQ(params(1), (Params{{"flat_param_0", 1792}}));
  EXPECT_EQ(params(3), (Params{{"flat_param_0", 5259}}));
  EXPECT_EQ(params(7), (Params{{"flat_param_0", 40}}));
  config.flatten_parameters = false;
  EXPECT_EQ(params(1), (Params{{"0.weight", 1728}, {"0.bias", 64}}));
  EXPECT_EQ(params(2), (Params{{"weight", 64}, {"bias", 64}}));
  EXPECT_EQ(params(3), (Params{{"0.weight", 4800},
                               {"0.bias", 3},
                               {"3.weight", 225},
                               {"3.bias", 3},
                               {"6.weight", 225},
                               {"6.bias", 3}}));
  EXPECT_EQ(params(7), (Params{{"weight", 30}, {"bias", 10}}));
}

// Configuration C as a program: conv, BN (its own instance, gathered around it), in-place ReLU
// (an alias of the BN's output that saves itself) per group; pool, Flatten (a view that passes
// its gradient on), head, and the mean loss. Instances: 0 root, 1 stem, 2 stem.1, 3 blocks,
// 4..6 the blocks' BNs, 7 head. The inputs are the BNs' buffers (running mean and variance
// C·4 bytes each, num_batches_tracked 8) and the batch.
std::vector<std::string> ProgramC(bool checkpointing) {
  std::vector<std::string> lines = {
      "inputs stem.1.running_mean:256 stem.1.running_var:256 stem.1.num_batches_tracked:8 "
      "blocks.1.running_mean:12 blocks.1.running_var:12 blocks.1.num_batches_tracked:8 "
      "blocks.4.running_mean:12 blocks.4.running_var:12 blocks.4.num_batches_tracked:8 "
      "blocks.7.running_mean:12 blocks.7.running_var:12 blocks.7.num_batches_tracked:8 batch:768",
      "gather 1",
      "stem.0 uses=[1] in=[batch] out=[stem.0.out:9216] saves=[batch]",
      "gather 2",
      "stem.1 uses=[2] in=[stem.0.out] out=[stem.1.out:9216] "
      "saves=[stem.0.out, 256 fp32 save_mean, 256 fp32 save_invstd]",
      "end 2",
      "stem.2 in=[stem.1.out] out=[stem.2.out:9216@stem.1.out] saves=[stem.2.out]",
      "end 1",
      "gather 3",
  };
  if (checkpointing) lines.push_back("checkpoint_begin saves=[stem.2.out]");
  std::string x = "stem.2.out";
  for (int g = 0; g < 3; ++g) {
    const std::string conv = fmt::format("blocks.{}", 3 * g);
    const std::string bn = fmt::format("blocks.{}", 3 * g + 1);
    const std::string relu = fmt::format("blocks.{}", 3 * g + 2);
    lines.push_back(fmt::format("{0} uses=[3] in=[{1}] out=[{0}.out:432] saves=[{1}]", conv, x));
    lines.push_back(fmt::format("gather {}", 4 + g));
    lines.push_back(
        fmt::format("{0} uses=[{1}] in=[{2}.out] out=[{0}.out:432] "
                    "saves=[{2}.out, 12 fp32 save_mean, 12 fp32 save_invstd]",
                    bn, 4 + g, conv));
    lines.push_back(fmt::format("end {}", 4 + g));
    lines.push_back(
        fmt::format("{0} in=[{1}.out] out=[{0}.out:432@{1}.out] saves=[{0}.out]", relu, bn));
    x = relu + ".out";
  }
  lines.push_back("blocks.9 in=[blocks.8.out] out=[blocks.9.out:12]");
  lines.push_back("blocks.10 in=[blocks.9.out:pass] out=[blocks.10.out:12@blocks.9.out]");
  if (checkpointing) lines.push_back("checkpoint_end");
  for (const char* line :
       {"end 3", "gather 7",
        "head uses=[7] in=[blocks.10.out] out=[head.out:40] saves=[blocks.10.out]", "end 7",
        "loss in=[head.out] out=[loss:4]", "loss loss"}) {
    lines.push_back(line);
  }
  return lines;
}

TEST(ConvnetPreset, ProgramOfConfigC) {
  for (bool checkpointing : {false, true}) {
    ConvnetConfig config = ConfigC();
    config.activation_checkpointing = checkpointing;
    Result<ModelProgram> program = ConvnetProgram(config);
    ASSERT_TRUE(program.ok());
    EXPECT_EQ(RenderProgram(*program), ProgramC(checkpointing)) << checkpointing;
  }
}

// After forward, configuration C keeps: the BNs' buffers 256 + 256 + 8 + 3 x (12 + 12 + 8) =
// 616; the batch 768; the stem conv's output 9216 (the BN's
// input) and the BN's statistics 256 + 256; the BN/ReLU output 9216; per block group the
// conv's output 432, statistics 12 + 12 and the BN/ReLU output 432 (888, three times: 2664);
// the pooled features 12 (the head's input, through the Flatten view); the loss 4. The logits
// (40) are freed: the mean saves nothing. Total 23008. With the blocks checkpointed only the
// region's input stays of the blocks (the stem's output, kept anyway) and the pooled features:
// 616 + 768 + 9216 + 512 + 9216 + 12 + 4 = 20344.
TEST(ConvnetPreset, ForwardKeepsWhatEachOpSaves) {
  ConvnetConfig config = ConfigC();
  EXPECT_EQ(LiveAtMark(Generate(config), Category::kActivation, "after fwd"), 23008u);
  config.activation_checkpointing = true;
  EXPECT_EQ(LiveAtMark(Generate(config), Category::kActivation, "after fwd"), 20344u);
}

// The default-stream gradients of configuration C's backward, in order. Each parameter's
// gradient comes at the backward of the op that reads it (param_reads), before the op's input
// gradient; a flat parameter's is the cat of its views' at its instance's post-backward hook:
// ones_like(loss) 4; loss: grad logits 40; head: weight 30·4 = 120, bias 40, grad pooled 12;
// the head's hook: cat 160; Flatten passes it; pool: grad of the last ReLU output 432; ReLU:
// grad of the BN output 432; BN: weight and bias 12 + 12 (own parameters), grad conv output
// 432; conv blocks.6: weight 225·4 = 900, bias 12, grad input 432; then ReLU 432, BN 12 12 432,
// conv blocks.3 900 12 432, ReLU 432, BN 12 12 432, conv blocks.0: weight 4800·4 = 19200, bias
// 12, grad of the stem's output 64·36·4 = 9216; the blocks' hook: cat 5259·4 = 21036; stem
// ReLU 9216; stem BN 256 256 9216; stem conv: weight 1728·4 = 6912, bias 256 (the batch gets
// no gradient); the stem's hook: cat 7168. The same with the blocks checkpointed.
TEST(ConvnetPreset, BackwardMakesTheGradientsOfEveryOp) {
  const std::vector<Bytes> expected = {4,    40,    120,  40,  12,  160,  432,  432,   12,
                                       12,   432,   900,  12,  432, 432,  12,   12,    432,
                                       900,  12,    432,  432, 12,  12,   432,  19200, 12,
                                       9216, 21036, 9216, 256, 256, 9216, 6912, 256,   7168};
  for (bool checkpointing : {false, true}) {
    ConvnetConfig config = ConfigC();
    config.activation_checkpointing = checkpointing;
    EXPECT_EQ(BackwardAllocs(Generate(config).events, Category::kGrad, 0), expected);
  }
}

// Under autocast (fp16; parameters fp32): the stem conv saves the fp16 cast of the batch
// (3·64·2 = 384) and of its weight (64·3·9 = 1728 elements, 3456 bytes), and its backward
// makes the fp16 gradient of weight and bias (1792·2 = 3584); activations are fp16 (the stem's
// output 64·36·2 = 4608); the BN statistics stay fp32.
TEST(ConvnetPreset, AutocastSavesCastCopies) {
  ConvnetConfig config = ConfigC();
  config.autocast = DType::kFloat16;
  Result<ModelProgram> program = ConvnetProgram(config);
  ASSERT_TRUE(program.ok());
  const std::vector<std::string> lines = RenderProgram(*program);
  EXPECT_EQ(lines[2],
            "stem.0 uses=[1] in=[batch] out=[stem.0.out:4608] "
            "saves=[384 fp16 input cast, 3456 fp16 weight cast] ws=[3584 fp16]");
  EXPECT_EQ(lines[4],
            "stem.1 uses=[2] in=[stem.0.out] out=[stem.1.out:4608] "
            "saves=[stem.0.out, 256 fp32 save_mean, 256 fp32 save_invstd]");
}

// What forward keeps under fp16 autocast, configuration C: the BN buffers 616 and the fp32
// batch 768; the stem conv's saved input cast 384 and weight copy 3456, its output 4608 (the
// BN's input), the BN statistics 256 + 256 (fp32), the BN/ReLU output 4608; the block convs'
// weight copies 4800·2 = 9600 and 225·2 = 450 twice; per block group the conv's output 3·36·2
// = 216, statistics 12 + 12 and the BN/ReLU output 216 (456, three times: 1368); the pooled
// features 6 (fp16), the head's weight copy 30·2 = 60, the fp16 loss 2. Total 26888.
TEST(ConvnetPreset, AutocastForwardKeepsCastCopies) {
  ConvnetConfig config = ConfigC();
  config.autocast = DType::kFloat16;
  EXPECT_EQ(LiveAtMark(Generate(config), Category::kActivation, "after fwd"), 26888u);
}

// The default-stream gradients of configuration C's backward under fp16 autocast, in order:
// parameter gradients fp32 (the instances compute in fp32), activation gradients fp16, and each
// conv's or linear's weight-copy gradient (weight and bias, fp16) in its workspace; a conv's or
// linear's node makes its input gradient and the copy's gradient, the parameters' fp32
// gradients come after it returns (ToCopyBackward): ones_like(loss) 2; loss: grad logits 10·2
// = 20; head: grad pooled 3·2 = 6, copy gradient 40·2 = 80, weight 30·4 = 120, bias 40; its
// hook 160; pool 216; ReLU 216; BN 12 12 216 (own fp32 parameters, no copies); conv blocks.6:
// 216, copy gradient 228·2 = 456, 900, 12; ReLU 216, BN 12 12 216, blocks.3 216 456 900 12,
// ReLU 216, BN 12 12 216; blocks.0: grad of the stem's output 2304·2 = 4608, copy gradient
// 4803·2 = 9606, 19200, 12; the blocks' hook 21036; stem ReLU 4608; BN 256 256 4608; stem conv
// (the batch gets none): copy gradient 1792·2 = 3584, 6912, 256; its hook 7168.
TEST(ConvnetPreset, AutocastBackwardMakesEachGradientInItsDtype) {
  ConvnetConfig config = ConfigC();
  config.autocast = DType::kFloat16;
  const std::vector<Bytes> expected = {
      2,    20,   6,     80, 120,   40,   160, 216, 216,  12,   12,   216, 216, 456,
      900,  12,   216,   12, 12,    216,  216, 456, 900,  12,   216,  12,  12,  216,
      4608, 9606, 19200, 12, 21036, 4608, 256, 256, 4608, 3584, 6912, 256, 7168};
  EXPECT_EQ(BackwardAllocs(Generate(config).events, Category::kGrad, 0), expected);
}

// The memory test's groups at #633/#650: one group object for root, stem, blocks and head, one
// of its own for each of the four BN wrappers.
TEST(ConvnetPreset, SharedBnOwnGroups) {
  ConvnetConfig config = ConfigC();
  config.group_layout = GroupLayout::kSharedBnOwn;
  const RecordingSink trace = Generate(config);
  std::vector<std::string> groups;
  for (const ProcessGroup& group : trace.header.groups) {
    groups.push_back(fmt::format("{} {}", group.id, group.name));
  }
  EXPECT_EQ(groups, (std::vector<std::string>{
                        "1 global_group", "2 stem.1.process_group", "3 blocks.1.process_group",
                        "4 blocks.4.process_group", "5 blocks.7.process_group"}));
}

TEST(ConvnetPreset, InvalidConfigsNameTheField) {
  struct Case {
    void (*mutate)(ConvnetConfig&);
    const char* field;
  };
  const Case cases[] = {
      {[](ConvnetConfig& c) { c.hidden_dim = 0; }, "hidden_dim"},
      {[](ConvnetConfig& c) { c.batch = -1; }, "batch"},
      {[](ConvnetConfig& c) { c.image_size = 2; }, "image_size"},
      {[](ConvnetConfig& c) { c.world_size = 0; }, "world_size"},
      {[](ConvnetConfig& c) { c.hidden_dim = 1 << 30; }, "1 PiB"},
  };
  for (const Case& c : cases) {
    ConvnetConfig config = ConfigC();
    c.mutate(config);
    RecordingSink sink;
    Status status = GenerateConvnet(config, sink);
    EXPECT_FALSE(status.ok()) << c.field;
    EXPECT_NE(status.message().find(c.field), std::string::npos) << status.message();
    EXPECT_TRUE(sink.events.empty()) << c.field;
  }
}

}  // namespace
}  // namespace bucketsim
