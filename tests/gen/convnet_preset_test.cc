// The fairscale-convnet preset against hand-computed sizes for two small configurations, and
// against the parameter counts of reference/fsdp_semantics.md §3.2 for the test's own sizes.
#include "gen/convnet_preset.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "engine/trace_checker.h"
#include "testing/recording_sink.h"

namespace bucketsim {
namespace {

using testing::RecordingSink;
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
  for (const FsdpInstance& instance : h.fsdp) {
    names.push_back(instance.name);
    numels.emplace_back();
    for (const ParamInfo& param : instance.params) numels.back().push_back(param.numel);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"root", "stem", "stem.1", "blocks", "blocks.1",
                                             "blocks.4", "blocks.7", "head"}));
  EXPECT_EQ(numels, (std::vector<std::vector<Numel>>{
                        {}, {1792}, {64, 64}, {5259}, {3, 3}, {3, 3}, {3, 3}, {40}}));
  EXPECT_EQ(h.fsdp[2].params[0].name, "weight");
  EXPECT_EQ(h.fsdp[2].params[1].name, "bias");
}

// The whole run of configuration C, event by event. Reading guide: the stem's forward gathers
// the stem conv, then its BN wrapper (kept gathered: auto_wrap_bn's reshard_after_forward=False),
// then reshards the stem; backward is the forward in reverse: the head's pre-backward hook
// re-gathers it, each BN's post-backward hook reduces weight then bias, the blocks' flat
// gradient appears in the backward of their last conv and is reduced once the first conv's
// backward is done.
TEST(ConvnetPreset, WholeRunOfConfigC) {
  RecordingSink trace = Generate(ConfigC());
  const std::vector<std::string> expected = {
      // init: fp32 shards, the input batch
      "alloc 1 3584 s0 param", "alloc 2 128 s0 param", "alloc 3 128 s0 param",
      "alloc 4 10520 s0 param", "alloc 5 8 s0 param", "alloc 6 8 s0 param", "alloc 7 8 s0 param",
      "alloc 8 8 s0 param", "alloc 9 8 s0 param", "alloc 10 8 s0 param", "alloc 11 80 s0 param",
      "alloc 12 768 s0 activation", "iteration 0", "phase forward", "alloc 13 7168 s1 all_gather",
      "compute forward stem.0", "alloc 14 9216 s0 activation", "alloc 15 256 s1 all_gather",
      "alloc 16 256 s1 all_gather", "compute forward stem.1", "alloc 17 9216 s0 activation",
      "alloc 18 256 s0 activation", "alloc 19 256 s0 activation", "free 13",
      "alloc 20 21040 s1 all_gather", "compute forward blocks.0", "alloc 21 432 s0 activation",
      "alloc 22 16 s1 all_gather", "alloc 23 16 s1 all_gather", "compute forward blocks.1",
      "alloc 24 432 s0 activation", "alloc 25 12 s0 activation", "alloc 26 12 s0 activation",
      "compute forward blocks.3", "alloc 27 432 s0 activation", "alloc 28 16 s1 all_gather",
      "alloc 29 16 s1 all_gather", "compute forward blocks.4", "alloc 30 432 s0 activation",
      "alloc 31 12 s0 activation", "alloc 32 12 s0 activation", "compute forward blocks.6",
      "alloc 33 432 s0 activation", "alloc 34 16 s1 all_gather", "alloc 35 16 s1 all_gather",
      "compute forward blocks.7", "alloc 36 432 s0 activation", "alloc 37 12 s0 activation",
      "alloc 38 12 s0 activation", "compute forward blocks.9", "free 20",
      "alloc 39 160 s1 all_gather", "compute forward head", "alloc 40 12 s0 activation",
      "alloc 41 40 s0 activation", "free 39", "mark after fwd", "phase backward",
      // head
      "alloc 42 160 s1 all_gather", "compute backward head", "alloc 43 160 s0 grad", "free 41",
      "free 40", "free 42", "rs 7.0 g1 fp32 20 view", "free 43",
      // blocks: re-gather, pool, the third group
      "alloc 44 21040 s1 all_gather", "compute backward blocks.9", "compute backward blocks.7",
      "alloc 45 12 s0 grad", "alloc 46 12 s0 grad", "free 38", "free 37", "free 36", "free 34",
      "alloc 47 8 s2 grad", "rs 6.0 g1 fp32 2 view", "free 47", "free 45", "free 35",
      "alloc 48 8 s2 grad", "rs 6.1 g1 fp32 2 view", "free 48", "free 46",
      "compute backward blocks.6", "alloc 49 21036 s0 grad", "free 33",
      // the second group
      "compute backward blocks.4", "alloc 50 12 s0 grad", "alloc 51 12 s0 grad", "free 32",
      "free 31", "free 30", "free 28", "alloc 52 8 s2 grad", "rs 5.0 g1 fp32 2 view", "free 52",
      "free 50", "free 29", "alloc 53 8 s2 grad", "rs 5.1 g1 fp32 2 view", "free 53", "free 51",
      "compute backward blocks.3", "free 27",
      // the first group, then the blocks' flat gradient
      "compute backward blocks.1", "alloc 54 12 s0 grad", "alloc 55 12 s0 grad", "free 26",
      "free 25", "free 24", "free 22", "alloc 56 8 s2 grad", "rs 4.0 g1 fp32 2 view", "free 56",
      "free 54", "free 23", "alloc 57 8 s2 grad", "rs 4.1 g1 fp32 2 view", "free 57", "free 55",
      "compute backward blocks.0", "free 21", "free 44", "alloc 58 10520 s2 grad",
      "rs 3.0 g1 fp32 2630 view", "free 58", "free 49",
      // stem
      "alloc 59 7168 s1 all_gather", "compute backward stem.1", "alloc 60 256 s0 grad",
      "alloc 61 256 s0 grad", "free 19", "free 18", "free 17", "free 15", "rs 2.0 g1 fp32 32 view",
      "free 60", "free 16", "rs 2.1 g1 fp32 32 view", "free 61", "compute backward stem.0",
      "alloc 62 7168 s0 grad", "free 14", "free 59", "rs 1.0 g1 fp32 896 view", "free 62", "flush",
      "mark after bwd", "phase step",
      // SGD momentum: one fp32 buffer per parameter shard
      "alloc 63 3584 s0 optimizer_state", "alloc 64 128 s0 optimizer_state",
      "alloc 65 128 s0 optimizer_state", "alloc 66 10520 s0 optimizer_state",
      "alloc 67 8 s0 optimizer_state", "alloc 68 8 s0 optimizer_state",
      "alloc 69 8 s0 optimizer_state", "alloc 70 8 s0 optimizer_state",
      "alloc 71 8 s0 optimizer_state", "alloc 72 8 s0 optimizer_state",
      "alloc 73 80 s0 optimizer_state", "compute optimizer step", "mark after step",
      "phase zero_grad", "zero_grad"};
  EXPECT_EQ(SummarizeAll(trace), expected);
  // Activations alive after forward: 9216 + (9216 + 256 + 256) + 3 * (432 + 432 + 12 + 12)
  // + 12 + 40 = 21660, plus the input 768.
  EXPECT_EQ(LiveAtMark(trace, Category::kActivation, "after fwd"), 21660u + 768u);
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
    EXPECT_EQ(trace.header.groups[f].name, trace.header.fsdp[f].name + ".process_group");
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

TEST(ConvnetPreset, ConfigDAllocationsByCategory) {
  RecordingSink trace = Generate(ConfigD());
  std::vector<Bytes> all_gather, grad_post_backward, activations_forward;
  bool forward = false;
  for (const Event& e : trace.events) {
    if (e.kind == EventKind::kPhase) forward = e.phase == Phase::kForward;
    if (e.kind != EventKind::kAlloc) continue;
    if (e.category == Category::kAllGather && forward) all_gather.push_back(e.bytes);
    if (e.category == Category::kGrad && e.stream == 2) grad_post_backward.push_back(e.bytes);
    if (e.category == Category::kActivation && forward) activations_forward.push_back(e.bytes);
  }
  // Forward gathers: stem (cast 896, full 3584), stem.1 (256, 256), blocks (4634, 18536),
  // the three BN(5) wrappers (32, 32 each), head (30, 120).
  EXPECT_EQ(all_gather, (std::vector<Bytes>{896, 3584, 256, 256, 4634, 18536, 32, 32, 32, 32, 32,
                                            32, 30, 120}));
  // chunk_and_pad on the post_backward stream: BN(5) 16 per parameter, blocks 4634.
  EXPECT_EQ(grad_post_backward, (std::vector<Bytes>{16, 16, 16, 16, 16, 16, 4634}));
  // Forward activations: input cast 432, stem 4096 / 4096, 256, 256; the checkpointed blocks
  // run under no_grad (each allocation freed before the next run): conv 2*5*16*2 = 320, BN
  // 320, 20, 20, three times; head 20, 40.
  EXPECT_EQ(activations_forward, (std::vector<Bytes>{432, 4096, 4096, 256, 256, 320, 320, 20, 20,
                                                     320, 320, 20, 20, 320, 320, 20, 20, 20, 40}));
  // Alive after forward: 432 + 4096 + 4096 + 256 + 256 + 20 + 40 = 9196, plus the batch 864.
  EXPECT_EQ(LiveAtMark(trace, Category::kActivation, "after fwd"), 9196u + 864u);
  // Adam: two fp32 shards per parameter, (448 + 16 + 16 + 2317 + 6 * 2 + 15) * 4 * 2.
  EXPECT_EQ(LiveAtMark(trace, Category::kOptimizerState, "after step"),
            (448u + 16 + 16 + 2317 + 6 * 2 + 15) * 4 * 2);
}

TEST(ConvnetPreset, ConfigDRecomputesTheBlocks) {
  RecordingSink trace = Generate(ConfigD());
  std::vector<std::string> spans;
  for (const std::string& line : SummarizeAll(trace)) {
    if (line.rfind("compute recompute", 0) == 0) spans.push_back(line.substr(8));
  }
  EXPECT_EQ(spans, (std::vector<std::string>{"recompute blocks.0", "recompute blocks.1",
                                             "recompute blocks.3", "recompute blocks.4",
                                             "recompute blocks.6", "recompute blocks.7",
                                             "recompute blocks.9"}));
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
    for (const FsdpInstance& instance : trace.header.fsdp) {
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

// fairscale's test (fsdp, no_ckpt, hidden_dim 128): "after fwd" - "start" is 337 MiB of
// activations: two 2x64x222x222 fp32 maps in the stem (24.06 MiB each) and six 2x128x222x222
// maps in the blocks (48.13 MiB each), i.e. 2*25233408 + 6*50466816 bytes, plus the small BN
// statistics and head tensors.
TEST(ConvnetPreset, FullSizeActivationsMatchTheTestsMeasurement) {
  ConvnetConfig config;
  config.iterations = 1;
  RecordingSink trace = Generate(config);
  const Bytes maps = 2 * 25233408ull + 6 * 50466816ull;
  const Bytes stats = 2 * 64 * 4 + 3 * 2 * 128 * 4;
  const Bytes head = 2 * 128 * 4 + 2 * 10 * 4;
  const Bytes input = 2 * 3 * 224 * 224 * 4;
  EXPECT_EQ(LiveAtMark(trace, Category::kActivation, "after fwd"), maps + stats + head + input);
  EXPECT_EQ((maps + (1 << 19)) >> 20, 337u);
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
      {[](ConvnetConfig& c) { c.world_size = 1; }, "world_size"},
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
