#include "gen/transformer_preset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "engine/trace_checker.h"
#include "gen/program_render.h"
#include "testing/recording_sink.h"

#if __has_include("io/trace_writer.h")
#include "io/trace_reader.h"
#include "io/trace_writer.h"
#define BUCKETSIM_HAVE_TRACE_WRITER 1
#endif

namespace bucketsim {
namespace {

using testing::BackwardAllocs;
using testing::RecordingSink;
using testing::RenderProgram;

// Generates through the TraceChecker, so every trace in these tests also obeys the consumer's
// rules (frees of live ids, rs and flush only in backward, view/cast only on a cleared grad).
RecordingSink Generate(const TransformerConfig& config) {
  RecordingSink recorder;
  TraceChecker checker(&recorder);
  Status status = GenerateTransformer(config, checker);
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_TRUE(recorder.ended);
  return recorder;
}

// Mixed precision, the PR #633 layout. Hand arithmetic, h = 64, a = 4, s = 32, b = 2, V = 128,
// ws = 4, c = g = 2 (bf16):
//   embedding numel (V + s) h = 160 * 64 = 10240        shard s = 10240 / 4 = 2560
//   block numel 12h^2 + 13h = 49152 + 832 = 49984        shard 49984 / 4 = 12496
//   head numel 2h + Vh = 128 + 8192 = 8320               shard 8320 / 4 = 2080
//   (all divide by 4: no chunk padding)
//   fp32 shards (s * 4): 10240, 49984, 8320
//   _fp16_shard (s * 2): 5120, 24992, 4160
//   all-gather (ws * s * 2): 20480, 99968, 16640
//   full grad (numel * 2): 20480, 99968, 16640
//   activations, sbh = 32 * 2 * 64 = 4096, as^2b = 4 * 1024 * 2 = 8192:
//     embedding output 2 sbh = 8192
//     block attention (5e+1) sbh = 11 * 4096 = 45056
//           scores (2e+1) as^2b = 5 * 8192 = 40960
//           mlp (9e+1) sbh = 19 * 4096 = 77824
//           layernorm 2e sbh = 4 * 4096 = 16384
//           total 180224 = sbh (34 + 5as/h) = 4096 * (34 + 5*4*32/64) = 4096 * 44
//     head logits e s b V = 2 * 32 * 2 * 128 = 16384; fp32 loss input 4 s b V = 32768
//   Adam state: two s * 4 tensors per instance: 10240 x2, 49984 x2 (x2 blocks), 8320 x2
TransformerConfig MixedPrecisionConfig() {
  TransformerConfig config;
  config.layers = 2;
  config.hidden = 64;
  config.heads = 4;
  config.seq = 32;
  config.micro_batch = 2;
  config.vocab = 128;
  config.world_size = 4;
  config.rank = 0;
  config.iterations = 2;
  config.compute_dtype = DType::kBFloat16;
  config.reduce_dtype = DType::kBFloat16;
  config.group_layout = GroupLayout::kPerInstance;
  config.optimizer = OptimizerKind::kAdam;
  config.bucket_cap_mb = 0.25;
  return config;
}

// Full fp32, the HEAD layout. h = 32, a = 2, s = 16, b = 1, V = 64, ws = 2, c = g = 4:
//   embedding numel (64 + 16) * 32 = 2560     shard 1280
//   block numel 12 * 1024 + 13 * 32 = 12704   shard 6352
//   head numel 2 * 32 + 64 * 32 = 2112        shard 1056
//   fp32 shards: 5120, 25408, 4224; no _fp16_shard
//   all-gather (2 * s * 4) = full grad (numel * 4): 10240, 50816, 8448
//   activations, sbh = 16 * 32 = 512, as^2b = 2 * 256 = 512, e = 4:
//     embedding 4 * 512 = 2048
//     block attention 21 * 512 = 10752, scores 9 * 512 = 4608, mlp 37 * 512 = 18944,
//           layernorm 8 * 512 = 4096
//     head logits 4 * 16 * 64 = 4096, fp32 loss input 4 * 16 * 64 = 4096
//   SGD momentum: one s * 4 buffer per instance: 5120, 25408, 4224
TransformerConfig Fp32Config() {
  TransformerConfig config;
  config.layers = 1;
  config.hidden = 32;
  config.heads = 2;
  config.seq = 16;
  config.micro_batch = 1;
  config.vocab = 64;
  config.world_size = 2;
  config.rank = 1;
  config.iterations = 1;
  config.compute_dtype = DType::kFloat32;
  config.reduce_dtype = DType::kFloat32;
  config.group_layout = GroupLayout::kShared;
  config.optimizer = OptimizerKind::kSgdMomentum;
  return config;
}

using Alloc = std::tuple<Bytes, StreamId, Category>;
using Request = std::tuple<std::uint32_t, GroupId, Numel>;  // fsdp, group, numel

constexpr Category kParam = Category::kParam;
constexpr Category kAct = Category::kActivation;
constexpr Category kOpt = Category::kOptimizerState;

// Walks the trace with its iteration and phase; `visit` sees every event with both.
void Walk(const std::vector<Event>& events,
          const std::function<void(const Event&, int iteration, Phase phase)>& visit) {
  int iteration = -1;
  Phase phase = Phase::kInit;
  for (const Event& event : events) {
    if (event.kind == EventKind::kIteration) iteration = static_cast<int>(event.id);
    if (event.kind == EventKind::kPhase) phase = event.phase;
    visit(event, iteration, phase);
  }
}

std::vector<Alloc> AllocsIn(const std::vector<Event>& events, int iteration, Phase phase) {
  std::vector<Alloc> allocs;
  Walk(events, [&](const Event& event, int i, Phase p) {
    if (event.kind == EventKind::kAlloc && i == iteration && p == phase) {
      allocs.emplace_back(event.bytes, event.stream, event.category);
    }
  });
  return allocs;
}

template <typename T>
std::vector<T> Concat(const std::vector<std::vector<T>>& parts) {
  std::vector<T> all;
  for (const std::vector<T>& part : parts) {
    for (const T& item : part) all.push_back(item);
  }
  return all;
}

std::vector<const Event*> OfKind(const std::vector<Event>& events, EventKind kind) {
  std::vector<const Event*> out;
  for (const Event& event : events) {
    if (event.kind == kind) out.push_back(&event);
  }
  return out;
}

// The allocations alive when the trace ends, after checking ids are unique and frees hit live
// ids (the TraceChecker checks liveness too; this also checks uniqueness over the whole trace).
std::vector<Alloc> AliveAtEnd(const std::vector<Event>& events) {
  std::map<std::uint64_t, Alloc> live;
  std::set<std::uint64_t> seen;
  std::uint64_t expected_id = 1;
  for (const Event& event : events) {
    if (event.kind == EventKind::kAlloc) {
      EXPECT_EQ(event.id, expected_id++) << "allocation ids count up from 1";
      EXPECT_TRUE(seen.insert(event.id).second) << "id " << event.id << " reused";
      live[event.id] = {event.bytes, event.stream, event.category};
    } else if (event.kind == EventKind::kFree) {
      EXPECT_EQ(live.erase(event.id), 1u) << "event " << event.index << " frees a dead id";
    }
  }
  std::vector<Alloc> alive;
  for (const auto& [id, alloc] : live) alive.push_back(alloc);
  return alive;
}

// Every field, with names resolved, so two traces compare independently of interning order.
std::string Render(const Event& e, const TraceHeader& header) {
  const bool named = e.kind == EventKind::kCompute || e.kind == EventKind::kMark;
  return fmt::format(
      "{} {} kind={} phase={} cat={} dtype={} cast={} shard={} none={} stream={} name='{}' "
      "fsdp={} param={} id={} bytes={} group={} numel={} dur_us={:.17g}",
      e.index, EventKindName(e.kind), static_cast<int>(e.kind), PhaseName(e.phase),
      CategoryName(e.category), DTypeName(e.dtype), DTypeName(e.cast_dtype),
      ShardModeName(e.shard_mode), e.set_to_none, e.stream, named ? header.names.at(e.name) : "",
      e.unit, e.param, e.id, e.bytes, e.group, e.numel, e.dur_us);
}

std::vector<std::string> RenderAll(const RecordingSink& trace) {
  std::vector<std::string> lines;
  for (const Event& event : trace.events) lines.push_back(Render(event, trace.header));
  return lines;
}

// Bytes of `category` alive after each event, indexed like the events.
std::vector<Bytes> LiveBytes(const std::vector<Event>& events, Category category) {
  std::map<std::uint64_t, Bytes> live;
  Bytes total = 0;
  std::vector<Bytes> after;
  for (const Event& event : events) {
    if (event.kind == EventKind::kAlloc && event.category == category) {
      live[event.id] = event.bytes;
      total += event.bytes;
    } else if (event.kind == EventKind::kFree && live.count(event.id) != 0) {
      total -= live[event.id];
      live.erase(event.id);
    }
    after.push_back(total);
  }
  return after;
}

// Activation bytes alive at each "after fwd" mark.
std::vector<Bytes> ActivationsAfterForward(const RecordingSink& trace) {
  const std::vector<Bytes> live = LiveBytes(trace.events, Category::kActivation);
  std::vector<Bytes> at_marks;
  for (const Event* mark : OfKind(trace.events, EventKind::kMark)) {
    if (trace.header.names.at(mark->name) == "after fwd") at_marks.push_back(live[mark->index]);
  }
  return at_marks;
}

TEST(TransformerPreset, MixedPrecisionHeader) {
  RecordingSink trace = Generate(MixedPrecisionConfig());
  const TraceHeader& header = trace.header;
  EXPECT_EQ(header.world_size, 4);
  EXPECT_EQ(header.rank, 0);
  EXPECT_EQ(header.bucket_cap_mb, 0.25);
  ASSERT_EQ(header.streams.size(), 3u);
  EXPECT_EQ(header.streams[0].name, "default");
  EXPECT_EQ(header.streams[1].name, "all_gather");
  EXPECT_EQ(header.streams[2].name, "post_backward");
  EXPECT_EQ(header.post_backward_stream(), 2u);

  ASSERT_EQ(header.units.size(), 4u);
  const std::vector<std::pair<std::string, Numel>> expected = {
      {"embedding", 10240}, {"block0", 49984}, {"block1", 49984}, {"head", 8320}};
  for (std::size_t f = 0; f < expected.size(); ++f) {
    EXPECT_EQ(header.units[f].name, expected[f].first);
    ASSERT_EQ(header.units[f].params.size(), 1u);
    EXPECT_EQ(header.units[f].params[0].numel, expected[f].second);
    EXPECT_EQ(header.units[f].params[0].dtype, DType::kFloat32);
  }

  // Per-instance layout: one group object per instance, ids 1..4, identical members.
  ASSERT_EQ(header.groups.size(), 4u);
  for (std::size_t g = 0; g < 4; ++g) {
    EXPECT_EQ(header.groups[g].id, g + 1);
    EXPECT_EQ(header.groups[g].ranks, (std::vector<int>{0, 1, 2, 3}));
  }
  EXPECT_FALSE(header.description.empty());
  EXPECT_EQ(header.description.find('\n'), std::string::npos);
}

// FSDP2 shards each parameter along dim 0 (torch.chunk, every rank's storage padded to chunk
// 0's), so the preset says each parameter's dim 0: nn.Linear's weight is (out, in). At world
// size 3, h = 32: attn.proj.weight (32 x 32) gets ceil(32 / 3) = 11 rows of 32 a rank, 352
// elements, declared padded as 3 x 352 = 1056; taken as 1-D it would be ceil(1024 / 3) = 342.
// ln1.weight (32): 11 a rank, 33; the embedding's tok.weight (64 x 32): 22 rows, 2112.
TEST(TransformerPreset, Fsdp2ShardsEachParameterAlongItsDim0) {
  TransformerConfig config = Fp32Config();
  config.fsdp_impl = FsdpImpl::kFsdp2;
  config.world_size = 3;
  config.rank = 2;
  config.group_layout = GroupLayout::kShared;
  const TraceHeader header = Generate(config).header;
  std::map<std::string, Numel> declared;
  for (const UnitInfo& instance : header.units) {
    for (const ParamInfo& param : instance.params) declared[param.name] = param.numel;
  }
  EXPECT_EQ(declared.at("attn.proj.weight"), 1056u);
  EXPECT_EQ(declared.at("attn.proj.bias"), 33u);
  EXPECT_EQ(declared.at("ln1.weight"), 33u);
  EXPECT_EQ(declared.at("tok.weight"), 2112u);
}

// AdamW with foreach (no weight-decay temporary: it decays in place): the state (exp_avg and
// exp_avg_sq per flat shard) at the first step only, then at every step _foreach_sqrt's set,
// one per shard, all freed before the step ends.
TEST(TransformerPreset, MixedPrecisionAdamStateAtFirstStepOnly) {
  TransformerConfig config = MixedPrecisionConfig();
  config.optimizer = OptimizerKind::kAdamW;
  config.weight_decay = 0.01;
  config.optimizer_impl = OptimizerImpl::kForeach;
  RecordingSink trace = Generate(config);
  const std::vector<Alloc> sqrt = {
      {10240, 0, kOpt}, {49984, 0, kOpt}, {49984, 0, kOpt}, {8320, 0, kOpt}};
  EXPECT_EQ(AllocsIn(trace.events, 0, Phase::kStep), Concat<Alloc>({{{10240, 0, kOpt},
                                                                     {10240, 0, kOpt},
                                                                     {49984, 0, kOpt},
                                                                     {49984, 0, kOpt},
                                                                     {49984, 0, kOpt},
                                                                     {49984, 0, kOpt},
                                                                     {8320, 0, kOpt},
                                                                     {8320, 0, kOpt}},
                                                                    sqrt}));
  EXPECT_EQ(AllocsIn(trace.events, 1, Phase::kStep), sqrt);
}

TEST(TransformerPreset, MixedPrecisionReduceScatterRequests) {
  RecordingSink trace = Generate(MixedPrecisionConfig());
  std::vector<Request> requests;
  Walk(trace.events, [&](const Event& event, int, Phase phase) {
    if (event.kind != EventKind::kReduceScatter) return;
    EXPECT_EQ(phase, Phase::kBackward);
    EXPECT_EQ(event.param, 0u);
    EXPECT_EQ(event.dtype, DType::kBFloat16);
    EXPECT_EQ(event.shard_mode, ShardMode::kCast);
    EXPECT_EQ(event.cast_dtype, DType::kFloat32);
    requests.emplace_back(event.unit, event.group, event.numel);
  });
  // Reverse order of forward; group per instance; numel = ceil(numel / 4).
  const std::vector<Request> one_backward = {
      {3, 4, 2080}, {2, 3, 12496}, {1, 2, 12496}, {0, 1, 2560}};
  EXPECT_EQ(requests, Concat<Request>({one_backward, one_backward}));
}

// Activation checkpointing of the MixedPrecisionConfig, same arithmetic as above, sbh = 4096,
// e = 2. Each block keeps only its input, e sbh = 8192; its four internal activations
// (45056 + 40960 + 77824 + 16384 = 180224) live from its forward compute to the end of its
// forward, and again from its recompute to the end of its backward.
TransformerConfig CheckpointedMixedPrecisionConfig() {
  TransformerConfig config = MixedPrecisionConfig();
  config.activation_checkpointing = true;
  return config;
}

// The tiny configuration T: 1 layer, h = 4, a = 2 heads, s = 2, b = 1, v = 8, f = 16, fp32
// (e = 4), 2 ranks. Bytes: sbh = 8 elements = 32; the fused QKV output sb(h + 2h) = 96;
// scores as²b = 8 elements = 32, their dropout mask 8; sbf = 32 elements = 128; a LN's mean
// and rstd 4·sb = 8 each; logits sbv = 16 elements = 64; token ids and labels 8·sb = 16.
// Parameters: embedding (v + s)h = 40, block 12h² + 13h = 244, head h(v + 2) = 40.
TransformerConfig ConfigT() {
  TransformerConfig config;
  config.layers = 1;
  config.hidden = 4;
  config.heads = 2;
  config.seq = 2;
  config.micro_batch = 1;
  config.vocab = 8;
  config.world_size = 2;
  config.iterations = 1;
  config.compute_dtype = DType::kFloat32;
  config.group_layout = GroupLayout::kShared;
  config.optimizer = OptimizerKind::kSgd;
  return config;
}

// The per-op table of transformer_preset.cc, written out for configuration T.
std::vector<std::string> ProgramT(bool checkpointing) {
  std::vector<std::string> lines = {
      "inputs tokens:16 labels:16",
      "gather 0",
      "embedding uses=[0] in=[tokens] out=[embedding.out:32] saves=[tokens, 16 int64 positions]",
      "end 0",
      "gather 1",
  };
  if (checkpointing) lines.push_back("checkpoint_begin saves=[embedding.out]");
  for (const char* line : {
           "block0.ln1 uses=[1] in=[embedding.out] out=[block0.ln1.out:32] "
           "saves=[embedding.out, 8 fp32 mean, 8 fp32 rstd]",
           "block0.qkv uses=[1] in=[block0.ln1.out] out=[block0.qkv.out:96] saves=[block0.ln1.out]",
           "block0.qkv.split in=[block0.qkv.out] out=[block0.q:32@block0.qkv.out, "
           "block0.k:32@block0.qkv.out, block0.v:32@block0.qkv.out]",
           "block0.attn.scores in=[block0.q, block0.k] out=[block0.scores:32] "
           "saves=[block0.q, block0.k]",
           "block0.attn.softmax in=[block0.scores] out=[block0.probs:32] saves=[block0.probs]",
           "block0.attn.dropout in=[block0.probs] out=[block0.attn.dropout.out:32] "
           "saves=[8 bool mask]",
           "block0.attn.context in=[block0.attn.dropout.out, block0.v] out=[block0.context:32] "
           "saves=[block0.attn.dropout.out, block0.v]",
           "block0.attn.proj uses=[1] in=[block0.context] out=[block0.proj:32] "
           "saves=[block0.context]",
           "block0.attn.proj.drop in=[block0.proj] out=[block0.attn.proj.drop.out:32] "
           "saves=[8 bool mask]",
           "block0.residual1 in=[embedding.out:pass, block0.attn.proj.drop.out:pass] "
           "out=[block0.x2:32]",
           "block0.ln2 uses=[1] in=[block0.x2] out=[block0.ln2.out:32] "
           "saves=[block0.x2, 8 fp32 mean, 8 fp32 rstd]",
           "block0.mlp.fc1 uses=[1] in=[block0.ln2.out] out=[block0.fc1:128] "
           "saves=[block0.ln2.out]",
           "block0.mlp.gelu in=[block0.fc1] out=[block0.gelu:128] saves=[block0.fc1]",
           "block0.mlp.fc2 uses=[1] in=[block0.gelu] out=[block0.fc2:32] saves=[block0.gelu]",
           "block0.mlp.drop in=[block0.fc2] out=[block0.mlp.drop.out:32] saves=[8 bool mask]",
           "block0.residual2 in=[block0.x2:pass, block0.mlp.drop.out:pass] out=[block0.out:32]",
       }) {
    lines.push_back(line);
  }
  if (checkpointing) lines.push_back("checkpoint_end");
  for (const char* line : {
           "end 1",
           "gather 2",
           "final_norm uses=[2] in=[block0.out] out=[final_norm.out:32] "
           "saves=[block0.out, 8 fp32 mean, 8 fp32 rstd]",
           "head uses=[2] in=[final_norm.out] out=[logits:64] saves=[final_norm.out]",
           "end 2",
           // fp32 logits: .float() is the logits themselves, no cast run.
           "loss.log_softmax in=[logits] out=[log_probs:64] saves=[log_probs]",
           "loss.nll in=[log_probs, labels:none] out=[loss:4] saves=[labels, 4 fp32 total_weight]",
           "loss loss",
       }) {
    lines.push_back(line);
  }
  return lines;
}

TEST(TransformerPreset, ProgramIsThePerOpTable) {
  for (bool checkpointing : {false, true}) {
    TransformerConfig config = ConfigT();
    config.activation_checkpointing = checkpointing;
    Result<ModelProgram> program = TransformerProgram(config);
    ASSERT_TRUE(program.ok());
    EXPECT_EQ(RenderProgram(*program), ProgramT(checkpointing)) << checkpointing;
  }
}

// What forward keeps, configuration T: the inputs 32 and the position ids the embedding saves
// 16; the block's saves 632 = Korthikanti's 600 (attention sb[(3e+1)h + 2e·h_kv] = 168, scores
// (2e+1)as²b = 72, MLP sb[(e+1)h + 2ef] = 296, LN inputs 2e·sbh = 64) + the LN statistics 32;
// the final LN's input 32 and statistics 16, its output 32 (the head's input), the log-probs
// 64, nll_loss's total weight 4 and the loss 4. Total 832. With checkpointing the region keeps
// only its input, the embedding's output: 32 + 16 + 32 + (final LN 32 + 16 + 32) + 64 + 4 + 4
// = 232.
TEST(TransformerPreset, ForwardKeepsKorthikantiPerBlock) {
  TransformerConfig config = ConfigT();
  EXPECT_EQ(ActivationsAfterForward(Generate(config)), std::vector<Bytes>{832});
  config.activation_checkpointing = true;
  EXPECT_EQ(ActivationsAfterForward(Generate(config)), std::vector<Bytes>{232});
}

// Every gradient the backward of configuration T allocates on the default stream, in order.
// Each parameter's gradient comes at the backward of the run that reads it (param_reads; numel
// x 4), before the run's input gradients, and each instance's flat gradient is the cat of its
// views' at its post-backward hook (head 40 x 4 = 160, block 244 x 4 = 976, embedding 160):
//   ones_like(loss) 4; nll: grad log-probs 64; log_softmax: grad logits 64; head: head.weight
//   hv = 32 elements 128, grad final_norm.out 32; final_norm: weight 16, bias 16, grad
//   block0.out 32; the head's hook: 160; residual2 passes on; mlp.drop: grad fc2 32; fc2:
//   weight fh = 64 elements 256, bias 16, grad gelu 128; gelu: grad fc1 128; fc1: weight 256,
//   bias f = 16 elements 64, grad ln2.out 32; ln2: weight 16, bias 16, grad x2 32, summed with
//   residual2's into a new 32; residual1 passes; proj.drop: 32; proj: weight 64, bias 16, grad
//   context 32; context: grad dropout.out 32, grad v 32; dropout: grad probs 32; softmax: grad
//   scores 32; scores: grad q 32, grad k 32; split: grad qkv 96 (the cat); qkv: weight 3h² = 48
//   elements 192, bias 48, grad ln1.out 32; ln1: weight 16, bias 16, grad embedding.out 32,
//   summed with residual1's: 32; the block's hook 976; embedding: tok.weight vh = 32 elements
//   128, pos.weight sh = 8 elements 32 (the token ids get none); its hook 160.
// With checkpointing the same gradients come after the recompute.
TEST(TransformerPreset, BackwardMakesTheGradientsOfEveryOp) {
  const std::vector<Bytes> expected = {4,  64,  64,  128, 32, 16, 16,  32,  160, 32, 256,
                                       16, 128, 128, 256, 64, 32, 16,  16,  32,  32, 32,
                                       64, 16,  32,  32,  32, 32, 32,  32,  32,  96, 192,
                                       48, 32,  16,  16,  32, 32, 976, 128, 32,  160};
  for (bool checkpointing : {false, true}) {
    TransformerConfig config = ConfigT();
    config.activation_checkpointing = checkpointing;
    EXPECT_EQ(BackwardAllocs(Generate(config).events, Category::kGrad, 0), expected);
  }
}

// Every run that uses parameters names the views it reads, and the views of each flat
// parameter are the module's parameters in registration order, summing to its numel.
TEST(TransformerPreset, RunsReadTheirModulesViews) {
  for (AttentionKind attention :
       {AttentionKind::kMegatron, AttentionKind::kUnfused, AttentionKind::kFlash}) {
    for (bool tied : {false, true}) {
      TransformerConfig config = ConfigT();
      config.attention = attention;
      config.tied_embeddings = tied;
      Result<ModelProgram> program = TransformerProgram(config);
      ASSERT_TRUE(program.ok());
      std::map<std::string, std::vector<std::string>> reads;
      for (const ForwardOp& op : program->forward) {
        if (op.kind != OpKind::kRun || op.uses.empty()) continue;
        ASSERT_TRUE(op.param_reads.has_value()) << op.name;
        reads[op.name] = *op.param_reads;
      }
      EXPECT_EQ(reads["embedding"], (std::vector<std::string>{"tok.weight", "pos.weight"}));
      EXPECT_EQ(reads["block0.ln1"], (std::vector<std::string>{"ln1.weight", "ln1.bias"}));
      EXPECT_EQ(reads["block0.mlp.fc2"],
                (std::vector<std::string>{"mlp.fc2.weight", "mlp.fc2.bias"}));
      EXPECT_EQ(reads["head"], (std::vector<std::string>{tied ? "tok.weight" : "head.weight"}));
      const GenParam& block = program->units[1].params.at(0);
      std::vector<std::string> names;
      Numel total = 0;
      for (const ParamView& view : block.views) {
        names.push_back(view.name);
        total += view.numel;
      }
      EXPECT_EQ(total, block.numel);
      EXPECT_EQ(block.numel, 244u);  // 12h² + 13h, h = 4
      if (attention == AttentionKind::kUnfused) {
        EXPECT_EQ(reads["block0.attn.k"],
                  (std::vector<std::string>{"attn.k.weight", "attn.k.bias"}));
        EXPECT_EQ(names, (std::vector<std::string>{
                             "ln1.weight", "ln1.bias", "attn.q.weight", "attn.q.bias",
                             "attn.k.weight", "attn.k.bias", "attn.v.weight", "attn.v.bias",
                             "attn.proj.weight", "attn.proj.bias", "ln2.weight", "ln2.bias",
                             "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias"}));
      } else {
        EXPECT_EQ(reads["block0.qkv"], (std::vector<std::string>{"qkv.weight", "qkv.bias"}));
        EXPECT_EQ(names.at(2), "qkv.weight");
      }
    }
  }
}

// Under autocast (parameters and compute fp32, configuration T: sbh = 8 elements, fp16 16
// bytes, fp32 32), the ops take the dtypes of CUDA's autocast lists (transformer_preset.cc):
// the embedding's output and the residual stream stay fp32; each layernorm runs in fp32; each
// matmul casts its fp32 operand to an fp16 copy (a run of its own, whose backward makes the fp32
// gradient; the matmul reads the original too, without a gradient: its caller holds it until
// the op returns) and saves it with its fp16 weight copy (QKV h·3h = 48 elements: 96 bytes; its
// backward's copy gradient with the bias, 60: 120); softmax makes fp32 probabilities (as²b = 8
// elements: 32 bytes) straight from fp16 scores (half_to_float), the dropout keeps them fp32 and
// the context matmul casts them back (16); a residual add of the fp32 stream and an fp16 branch
// is fp32 and gives the branch a new (cast) gradient; log_softmax reads the fp16 logits
// (sbv = 16 elements: 32 bytes) directly and makes fp32 log-probs (64).
std::vector<std::string> AutocastProgramT() {
  return {
      "inputs tokens:16 labels:16",
      "gather 0",
      "embedding uses=[0] in=[tokens] out=[embedding.out:32] saves=[tokens, 16 int64 positions]",
      "end 0",
      "gather 1",
      "block0.ln1 uses=[1] in=[embedding.out] out=[block0.ln1.out:32] "
      "saves=[embedding.out, 8 fp32 mean, 8 fp32 rstd]",
      "block0.qkv.cast in=[block0.ln1.out] out=[block0.qkv.cast.out:16]",
      "block0.qkv uses=[1] in=[block0.qkv.cast.out, block0.ln1.out:none] out=[block0.qkv.out:48] "
      "saves=[block0.qkv.cast.out, 96 fp16 weight cast] ws=[120 fp16]",
      "block0.qkv.split in=[block0.qkv.out] out=[block0.q:16@block0.qkv.out, "
      "block0.k:16@block0.qkv.out, block0.v:16@block0.qkv.out]",
      "block0.attn.scores in=[block0.q, block0.k] out=[block0.scores:16] "
      "saves=[block0.q, block0.k]",
      "block0.attn.softmax in=[block0.scores] out=[block0.probs:32] saves=[block0.probs]",
      "block0.attn.dropout in=[block0.probs] out=[block0.attn.dropout.out:32] "
      "saves=[8 bool mask]",
      "block0.attn.context.cast in=[block0.attn.dropout.out] "
      "out=[block0.attn.context.cast.out:16]",
      "block0.attn.context in=[block0.attn.context.cast.out, block0.v, "
      "block0.attn.dropout.out:none] "
      "out=[block0.context:16] "
      "saves=[block0.attn.context.cast.out, block0.v]",
      "block0.attn.proj uses=[1] in=[block0.context] out=[block0.proj:16] "
      "saves=[block0.context, 32 fp16 weight cast] ws=[40 fp16]",
      "block0.attn.proj.drop in=[block0.proj] out=[block0.attn.proj.drop.out:16] "
      "saves=[8 bool mask]",
      "block0.residual1 in=[embedding.out:pass, block0.attn.proj.drop.out] out=[block0.x2:32]",
      "block0.ln2 uses=[1] in=[block0.x2] out=[block0.ln2.out:32] "
      "saves=[block0.x2, 8 fp32 mean, 8 fp32 rstd]",
      "block0.mlp.fc1.cast in=[block0.ln2.out] out=[block0.mlp.fc1.cast.out:16]",
      "block0.mlp.fc1 uses=[1] in=[block0.mlp.fc1.cast.out, block0.ln2.out:none] "
      "out=[block0.fc1:64] "
      "saves=[block0.mlp.fc1.cast.out, 128 fp16 weight cast] ws=[160 fp16]",
      "block0.mlp.gelu in=[block0.fc1] out=[block0.gelu:64] saves=[block0.fc1]",
      "block0.mlp.fc2 uses=[1] in=[block0.gelu] out=[block0.fc2:16] "
      "saves=[block0.gelu, 128 fp16 weight cast] ws=[136 fp16]",
      "block0.mlp.drop in=[block0.fc2] out=[block0.mlp.drop.out:16] saves=[8 bool mask]",
      "block0.residual2 in=[block0.x2:pass, block0.mlp.drop.out] out=[block0.out:32]",
      "end 1",
      "gather 2",
      "final_norm uses=[2] in=[block0.out] out=[final_norm.out:32] "
      "saves=[block0.out, 8 fp32 mean, 8 fp32 rstd]",
      "head.cast in=[final_norm.out] out=[head.cast.out:16]",
      "head uses=[2] in=[head.cast.out, final_norm.out:none] out=[logits:32] "
      "saves=[head.cast.out, 64 fp16 weight cast] ws=[64 fp16]",
      "end 2",
      "loss.log_softmax in=[logits] out=[log_probs:64] saves=[log_probs]",
      "loss.nll in=[log_probs, labels:none] out=[loss:4] saves=[labels, 4 fp32 total_weight]",
      "loss loss",
  };
}

TEST(TransformerPreset, AutocastRunsEachOpInItsAutocastDtype) {
  TransformerConfig config = ConfigT();
  config.autocast = DType::kFloat16;
  Result<ModelProgram> program = TransformerProgram(config);
  ASSERT_TRUE(program.ok());
  EXPECT_EQ(RenderProgram(*program), AutocastProgramT());
  EXPECT_EQ(program->autocast, DType::kFloat16);
  // The full gradients stay fp32: the block's is 244 x 4.
  const std::vector<Bytes> grads = BackwardAllocs(Generate(config).events, Category::kGrad, 0);
  EXPECT_NE(std::find(grads.begin(), grads.end(), 976u), grads.end());
}

// What forward keeps under fp16 autocast, configuration T (the saves of AutocastProgramT): the
// inputs 32 and positions 16 (48); the block: ln1's input 32 and statistics 16, the QKV
// operand 16 and weight copy 96, Q K V 48, the probabilities 32, their mask 8 and fp16 copy
// 16, the context 16, the projection's weight copy 32, its mask 8, ln2's input 32 and
// statistics 16, fc1's operand 16 and weight copy 128, GeLU's input 64, fc2's input 64 and
// weight copy 128, the MLP's mask 8 (776); the final LN's input 32 and statistics 16, the
// head's operand 16 and weight copy 64, the log-probs 64, the total weight 4 and the loss 4
// (200). Total 1024.
TEST(TransformerPreset, AutocastForwardKeepsCastCopies) {
  TransformerConfig config = ConfigT();
  config.autocast = DType::kFloat16;
  EXPECT_EQ(ActivationsAfterForward(Generate(config)), std::vector<Bytes>{1024});
}

// Every gradient (and autocast weight-copy gradient, the runs' workspace) the backward of
// configuration T under fp16 autocast allocates, in order; fp32 parameters, so parameter
// gradients are fp32 (numel x 4) and each matmul's weight-copy gradient fp16 (with its bias).
// A matmul's node makes its input gradient and the copies' gradient; the parameters' fp32
// gradients come after it returns, from the cast nodes (ToCopyBackward):
//   ones_like(loss) 4; nll: grad log-probs (fp32) 64; log_softmax: grad logits, fp16 32 (the
//   half_to_float kernel's backward gives its input's dtype); head: grad of its fp16 operand
//   16, copy gradient 32 x 2 = 64, then head.weight 128; head.cast: grad final_norm.out fp32
//   32; final_norm: 16, 16, grad block0.out 32; the head's hook 160; residual2: the fp16
//   branch's cast gradient 16 (the fp32 stream passes); mlp.drop: grad fc2 16; fc2: grad gelu
//   64, copy gradient (64 + 4) x 2 = 136, weight 256, bias 16; gelu: grad fc1 64; fc1: grad of
//   its operand 16, copy gradient (64 + 16) x 2 = 160, weight 256, bias 64; fc1.cast: grad
//   ln2.out 32; ln2: 16, 16, grad x2 32, the sum with residual2's 32; residual1: the branch's
//   16; proj.drop 16; proj: grad context 16, copy gradient 40, weight 64, bias 16; context:
//   grad of the probabilities' fp16 copy 16, grad v 16; context.cast: grad dropout.out fp32 32;
//   dropout: grad probs 32; softmax: grad scores, fp16 16; scores: grad q 16, grad k 16; split:
//   grad qkv 48; qkv: grad of its operand 16, copy gradient 120, weight 192, bias 48; qkv.cast:
//   grad ln1.out 32; ln1: 16, 16, grad embedding.out 32, the sum 32; the block's hook 976;
//   embedding: 128, 32, its hook 160.
TEST(TransformerPreset, AutocastBackwardMakesEachGradientInItsDtype) {
  TransformerConfig config = ConfigT();
  config.autocast = DType::kFloat16;
  const std::vector<Bytes> expected = {
      4,  64,  32,  16, 64, 128, 32,  16,  16, 32, 160, 16, 16, 64, 136, 256, 16, 64,
      16, 160, 256, 64, 32, 16,  16,  32,  32, 16, 16,  16, 40, 64, 16,  16,  16, 32,
      32, 16,  16,  16, 48, 16,  120, 192, 48, 32, 16,  16, 32, 32, 976, 128, 32, 160};
  EXPECT_EQ(BackwardAllocs(Generate(config).events, Category::kGrad, 0), expected);
}

// bf16 autocast has no half_to_float kernels: softmax and log_softmax read an fp32 copy of
// their input, made just before them and freed after them (saved by nobody), and the input
// itself, alive until they return.
TEST(TransformerPreset, Bf16AutocastCastsSoftmaxInputs) {
  TransformerConfig config = ConfigT();
  config.autocast = DType::kBFloat16;
  Result<ModelProgram> program = TransformerProgram(config);
  ASSERT_TRUE(program.ok());
  const std::vector<std::string> lines = RenderProgram(*program);
  const auto has = [&](const std::string& line) {
    return std::find(lines.begin(), lines.end(), line) != lines.end();
  };
  EXPECT_TRUE(
      has("block0.attn.softmax.cast in=[block0.scores] out=[block0.attn.softmax.cast.out:32]"));
  EXPECT_TRUE(
      has("block0.attn.softmax in=[block0.attn.softmax.cast.out, block0.scores:none] "
          "out=[block0.probs:32] "
          "saves=[block0.probs]"));
  EXPECT_TRUE(has("loss.cast in=[logits] out=[loss.cast.out:64]"));
  EXPECT_TRUE(
      has("loss.log_softmax in=[loss.cast.out, logits:none] out=[log_probs:64] saves=[log_probs]"));
}

// The block's runs of configuration T from ln1 to ln2 under another attention (lines 5 to 20
// of the program, or fewer).
std::vector<std::string> AttentionLines(const TransformerConfig& config) {
  Result<ModelProgram> program = TransformerProgram(config);
  EXPECT_TRUE(program.ok());
  std::vector<std::string> lines = RenderProgram(*program);
  std::vector<std::string> block;
  bool in = false;
  for (const std::string& line : lines) {
    if (line.rfind("block0.ln1 ", 0) == 0) in = true;
    if (line.rfind("block0.ln2 ", 0) == 0) break;
    if (in) block.push_back(line);
  }
  return block;
}

// Unfused attention without dropout, configuration T (sbh = 8 elements, 32 bytes; as²b = 8,
// 32): separate Q, K, V projections each saving the layernorm's output; matmul's copies of Q
// and K (passing their gradients on) saved by the scores; the scale's and masked_fill's new
// scores, the latter saving the s² = 4-byte causal mask; softmax; the copy of V; the context,
// copied by the reshape of its transposed view, which the projection saves. No dropout runs.
TEST(TransformerPreset, UnfusedAttentionSavesCopiesAndTheCausalMask) {
  TransformerConfig config = ConfigT();
  config.attention = AttentionKind::kUnfused;
  config.dropout = 0;
  const std::vector<std::string> expected = {
      "block0.ln1 uses=[1] in=[embedding.out] out=[block0.ln1.out:32] "
      "saves=[embedding.out, 8 fp32 mean, 8 fp32 rstd]",
      "block0.attn.q uses=[1] in=[block0.ln1.out] out=[block0.q:32] saves=[block0.ln1.out]",
      "block0.attn.k uses=[1] in=[block0.ln1.out] out=[block0.k:32] saves=[block0.ln1.out]",
      "block0.attn.v uses=[1] in=[block0.ln1.out] out=[block0.v:32] saves=[block0.ln1.out]",
      "block0.attn.q.copy in=[block0.q:pass] out=[block0.attn.q.copy.out:32]",
      "block0.attn.k.copy in=[block0.k:pass] out=[block0.attn.k.copy.out:32]",
      "block0.attn.scores in=[block0.attn.q.copy.out, block0.attn.k.copy.out] "
      "out=[block0.scores:32] saves=[block0.attn.q.copy.out, block0.attn.k.copy.out]",
      "block0.attn.scale in=[block0.scores] out=[block0.attn.scale.out:32]",
      "block0.attn.mask in=[block0.attn.scale.out] out=[block0.attn.mask.out:32] "
      "saves=[4 bool causal mask]",
      "block0.attn.softmax in=[block0.attn.mask.out] out=[block0.probs:32] saves=[block0.probs]",
      "block0.attn.v.copy in=[block0.v:pass] out=[block0.attn.v.copy.out:32]",
      "block0.attn.context in=[block0.probs, block0.attn.v.copy.out] out=[block0.context:32] "
      "saves=[block0.probs, block0.attn.v.copy.out]",
      "block0.attn.context.copy in=[block0.context:pass] out=[block0.attn.context.copy.out:32]",
      "block0.attn.proj uses=[1] in=[block0.attn.context.copy.out] out=[block0.proj:32] "
      "saves=[block0.attn.context.copy.out]",
      "block0.residual1 in=[embedding.out:pass, block0.proj:pass] out=[block0.x2:32]",
  };
  EXPECT_EQ(AttentionLines(config), expected);
  // After forward: the inputs 32 and positions 16; the block: ln1's input 32 and statistics
  // 16, its output 32, the Q and K copies 64, the mask 4, the probabilities 32, the V copy 32,
  // the context copy 32, ln2's input 32 and statistics 16, its output 32, fc1 128, GeLU 128
  // (580); the final LN 32 + 16 + 32, the log-probs 64, total weight 4, loss 4 (152): 780,
  // megatron's 776 without dropout plus the causal mask.
  EXPECT_EQ(ActivationsAfterForward(Generate(config)), std::vector<Bytes>{780});
  config.attention = AttentionKind::kMegatron;
  EXPECT_EQ(ActivationsAfterForward(Generate(config)), std::vector<Bytes>{776});
}

// Flash attention, configuration T with dropout: one run that saves Q, K, V, its output, the
// fp32 log-sum-exp (a·s·b = 4 elements: 16 bytes) and the RNG state (16); its backward counts
// 2.5 times its forward FLOPs and makes the fp32 workspaces dq_accum (sbh: 32) and softmax_d
// (16).
TEST(TransformerPreset, FlashAttentionKeepsNoScores) {
  TransformerConfig config = ConfigT();
  config.attention = AttentionKind::kFlash;
  const std::vector<std::string> lines = AttentionLines(config);
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines[3],
            "block0.attn.flash in=[block0.q, block0.k, block0.v] out=[block0.attn.flash.out:32] "
            "saves=[block0.q, block0.k, block0.v, block0.attn.flash.out, 16 fp32 softmax_lse, "
            "16 int64 rng_state] ws=[32 fp32, 16 fp32]");
  Result<ModelProgram> program = TransformerProgram(config);
  ASSERT_TRUE(program.ok());
  for (const ForwardOp& op : program->forward) {
    if (op.name == "block0.attn.flash") {
      EXPECT_EQ(op.BackwardFlops(), 2.5 * op.flops);
    }
  }
  // With one K/V head (h_kv = 2: K and V 16 bytes each) the backward also makes dK and dV per
  // query head (sbh = 32 each) before summing them.
  TransformerConfig gqa = config;
  gqa.kv_heads = 1;
  const std::vector<std::string> gqa_lines = AttentionLines(gqa);
  ASSERT_GE(gqa_lines.size(), 4u);
  EXPECT_EQ(gqa_lines[3],
            "block0.attn.flash in=[block0.q, block0.k, block0.v] out=[block0.attn.flash.out:32] "
            "saves=[block0.q, block0.k, block0.v, block0.attn.flash.out, 16 fp32 softmax_lse, "
            "16 int64 rng_state] ws=[32 fp32, 16 fp32, 32 fp32, 32 fp32]");
  // After forward: 48; the block: ln1 48, its output 32, QKV 96, the output 32, lse 16, RNG
  // state 16, the projection's mask 8, ln2 48 and output 32, fc1 128, GeLU 128, the MLP's mask
  // 8 (592); the head's 152. Total 792.
  EXPECT_EQ(ActivationsAfterForward(Generate(config)), std::vector<Bytes>{792});
}

// Whatever a step makes, only the fp32 shards, the optimizer state and the batch outlive the
// run: every activation, gradient and gathered parameter is freed (with and without
// checkpointing and autocast, two iterations, Adam).
TEST(TransformerPreset, OnlyShardsStateAndBatchOutliveTheRun) {
  for (bool checkpointing : {false, true}) {
    for (std::optional<DType> autocast :
         {std::optional<DType>(), std::optional(DType::kBFloat16)}) {
      TransformerConfig config = ConfigT();
      config.iterations = 2;
      config.optimizer = OptimizerKind::kAdam;
      config.activation_checkpointing = checkpointing;
      config.autocast = autocast;
      // fp32 shards 20·4, 122·4, 20·4; Adam two each; tokens and labels.
      const std::vector<Alloc> expected = {{80, 0, kParam}, {488, 0, kParam}, {80, 0, kParam},
                                           {16, 0, kAct},   {16, 0, kAct},    {80, 0, kOpt},
                                           {80, 0, kOpt},   {488, 0, kOpt},   {488, 0, kOpt},
                                           {80, 0, kOpt},   {80, 0, kOpt}};
      EXPECT_EQ(AliveAtEnd(Generate(config).events), expected);
    }
  }
}

TEST(TransformerPreset, SameConfigGivesIdenticalTraces) {
  RecordingSink first = Generate(MixedPrecisionConfig());
  RecordingSink second = Generate(MixedPrecisionConfig());
  EXPECT_EQ(RenderAll(first), RenderAll(second));
  EXPECT_EQ(first.header.names, second.header.names);
  EXPECT_EQ(first.header.description, second.header.description);
}

TEST(TransformerPreset, RankOnlyChangesTheHeader) {
  TransformerConfig config = MixedPrecisionConfig();
  RecordingSink rank0 = Generate(config);
  config.rank = 3;
  RecordingSink rank3 = Generate(config);
  EXPECT_EQ(rank3.header.rank, 3);
  EXPECT_EQ(RenderAll(rank0), RenderAll(rank3));
}

TEST(TransformerPreset, InvalidConfigsNameTheField) {
  struct Case {
    std::function<void(TransformerConfig&)> mutate;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](TransformerConfig& c) { c.layers = 0; }, "layers"},
      {[](TransformerConfig& c) { c.layers = 1 << 20; }, "layers"},
      {[](TransformerConfig& c) { c.hidden = -4; }, "hidden"},
      {[](TransformerConfig& c) { c.heads = 0; }, "heads"},
      {[](TransformerConfig& c) { c.seq = 0; }, "seq"},
      {[](TransformerConfig& c) { c.micro_batch = 0; }, "micro_batch"},
      {[](TransformerConfig& c) { c.vocab = 0; }, "vocab"},
      {[](TransformerConfig& c) { c.iterations = 0; }, "iterations"},
      {[](TransformerConfig& c) { c.world_size = 0; }, "world_size"},
      {[](TransformerConfig& c) { c.world_size = 0; }, "world_size"},
      {[](TransformerConfig& c) { c.world_size = 1 << 30; }, "world_size"},
      {[](TransformerConfig& c) { c.heads = 5; }, "heads"},  // 5 does not divide 64
      {[](TransformerConfig& c) { c.rank = 4; }, "rank"},
      {[](TransformerConfig& c) { c.rank = -1; }, "rank"},
      {[](TransformerConfig& c) { c.compute_dtype = DType::kFloat64; }, "compute_dtype"},
      {[](TransformerConfig& c) { c.reduce_dtype = DType::kFloat16; }, "reduce_dtype"},
      {[](TransformerConfig& c) { c.device_tflops = 0; }, "device_tflops"},
      {[](TransformerConfig& c) { c.bucket_cap_mb = std::numeric_limits<double>::infinity(); },
       "bucket_cap_mb"},
      {[](TransformerConfig& c) { c.seq = 1 << 30; }, "seq"},  // attention scores > 1 PiB
      {[](TransformerConfig& c) { c.dropout = -0.1; }, "dropout"},
      {[](TransformerConfig& c) { c.dropout = 1; }, "dropout"},
      {[](TransformerConfig& c) { c.dropout = std::numeric_limits<double>::quiet_NaN(); },
       "dropout"},
  };
  for (const Case& test : cases) {
    TransformerConfig config = MixedPrecisionConfig();
    test.mutate(config);
    RecordingSink sink;
    Status status = GenerateTransformer(config, sink);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << test.field;
    EXPECT_NE(status.message().find(test.field), std::string::npos) << status.message();
    EXPECT_TRUE(sink.events.empty());
  }
}

// A sink error stops the stream at once and is returned; OnEnd is not called.
TEST(TransformerPreset, SinkErrorStopsTheStream) {
  class FailingSink : public RecordingSink {
   public:
    Status OnEvent(const Event& event) override {
      if (event.index == 10) return InvalidTrace("event 10: no");
      return RecordingSink::OnEvent(event);
    }
  };
  FailingSink sink;
  Status status = GenerateTransformer(MixedPrecisionConfig(), sink);
  EXPECT_EQ(status.code(), StatusCode::kInvalidTrace);
  EXPECT_EQ(status.message(), "event 10: no");
  EXPECT_EQ(sink.events.size(), 10u);
  EXPECT_FALSE(sink.ended);
}

TEST(TransformerPreset, RoundTripThroughTraceWriterAndReader) {
#ifdef BUCKETSIM_HAVE_TRACE_WRITER
  for (const TransformerConfig& config :
       {MixedPrecisionConfig(), Fp32Config(), CheckpointedMixedPrecisionConfig()}) {
    // Straight from the generator: the checker would fill in the frees' bytes and category.
    RecordingSink generated;
    ASSERT_TRUE(GenerateTransformer(config, generated).ok());
    std::ostringstream json;
    TraceWriter writer(json);
    ASSERT_TRUE(GenerateTransformer(config, writer).ok());
    TraceHeader header;
    RecordingSink read;
    Status status = ReadTraceFromString(json.str(), "generated.json", header, read);
    ASSERT_TRUE(status.ok()) << status.ToString();
    EXPECT_EQ(RenderAll(read), RenderAll(generated));
    EXPECT_EQ(read.header.description, generated.header.description);
    EXPECT_EQ(read.header.bucket_cap_mb, generated.header.bucket_cap_mb);
    ASSERT_EQ(read.header.groups.size(), generated.header.groups.size());
    ASSERT_EQ(read.header.units.size(), generated.header.units.size());
    for (std::size_t f = 0; f < read.header.units.size(); ++f) {
      EXPECT_EQ(read.header.units[f].name, generated.header.units[f].name);
      EXPECT_EQ(read.header.units[f].params[0].numel, generated.header.units[f].params[0].numel);
    }
  }
#else
  GTEST_SKIP() << "io/trace_writer.h is not there yet";
#endif
}

}  // namespace
}  // namespace bucketsim

namespace bucketsim {
namespace {

using testing::Summarize;
using testing::SummarizeAll;

// Configuration A: grouped-query attention, a narrow MLP, bf16 compute with fairscale's
// fp32_reduce_scatter, HSDP shard groups of 3 out of 6 ranks (this is rank 4: shard group
// {3, 4, 5}), SGD momentum.
//   h = 64, a = 4 heads of 64 / 4 = 16, kv = 2 heads: h_kv = 2 * 16 = 32, f = 96, v = 100,
//   s = 8, b = 2 (sb = 16), e = 2 (bf16).
// Parameters:
//   embedding (v + s) * h = 108 * 64 = 6912                      shard ceil(6912 / 3) = 2304
//   block     Q h*h + h = 4160, K and V h*h_kv + h_kv = 2080 each, out h*h + h = 4160,
//             MLP h*f + f = 6240 and f*h + h = 6208, layernorms 4h = 256: 25184
//             (= 2h(h+1) + 2h_kv(h+1) + f(2h+1) + 5h = 8320 + 4160 + 12384 + 320)
//                                                                shard ceil(25184 / 3) = 8395,
//             3 * 8395 - 25184 = 1: chunk_and_pad makes 3 - 25184 / 8395 = 1 new chunk of
//             8395 fp32 = 33580 bytes
//   head      h * (v + 2) = 6528 (final layernorm and LM head)   shard 6528 / 3 = 2176
// All-gathers over the shard group of 3 (bf16): cast shard s*2 then 3*s*2: embedding 4608,
//   13824; block 16790, 50370; head 4352, 13056.
// Full gradients (bf16, numel*2): embedding 13824, block 50368, head 13056; the fp32 copies
//   of fp32_reduce_scatter (numel*4): 27648, 100736, 26112. Reduced in fp32: views.
// Activations per block, Korthikanti et al. adapted to GQA and f (e = 2, masks 1 byte):
//   attention sb[(3e+1)h + 2e*h_kv] = 16 * (7*64 + 4*32) = 9216
//   scores    (2e+1) * a * s^2 * b   = 5 * 4 * 64 * 2     = 2560
//   MLP       sb[(e+1)h + 2e*f]      = 16 * (3*64 + 4*96) = 9216
//   layernorm 2e * sbh               = 4 * 16 * 64        = 4096     total 25088
//   (= sb[(6e+2)h + 2e*h_kv + 2e*f] + (2e+1)as^2b = 16 * 1408 + 2560)
// Embedding output e*sbh = 2048; head logits e*sbv = 3200 and their fp32 copy 4*sbv = 6400.
TransformerConfig ConfigA() {
  TransformerConfig config;
  config.layers = 2;
  config.hidden = 64;
  config.ffn_hidden = 96;
  config.heads = 4;
  config.kv_heads = 2;
  config.vocab = 100;
  config.seq = 8;
  config.micro_batch = 2;
  config.compute_dtype = DType::kBFloat16;
  config.fairscale.fp32_reduce_scatter = true;
  config.world_size = 6;
  config.group_layout = GroupLayout::kHsdp;
  config.hsdp_shard_size = 3;
  config.rank = 4;
  config.iterations = 1;
  config.optimizer = OptimizerKind::kSgdMomentum;
  return config;
}

TEST(TransformerPresetArithmetic, ConfigAHeader) {
  RecordingSink trace = Generate(ConfigA());
  const TraceHeader& h = trace.header;
  EXPECT_EQ(h.description,
            "GPT 2 layers, hidden 64, ffn 96, 4 heads, 2 kv heads, seq 8, micro-batch 2, vocab "
            "100, megatron attention, dropout 0.1; fairscale FSDP rank 4 of 6, compute bf16, "
            "reduce fp32, hsdp shard groups of 3, "
            "sgd-momentum, 1 iterations");
  ASSERT_EQ(h.groups.size(), 1u);
  EXPECT_EQ(h.groups[0].ranks, (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(h.groups[0].name, "shard_group");
  ASSERT_EQ(h.units.size(), 4u);
  EXPECT_EQ(h.units[0].params[0].numel, 6912u);
  EXPECT_EQ(h.units[1].params[0].numel, 25184u);
  EXPECT_EQ(h.units[2].params[0].numel, 25184u);
  EXPECT_EQ(h.units[3].params[0].numel, 6528u);
}

TEST(TransformerPresetArithmetic, NewFieldsAreValidated) {
  struct Case {
    void (*mutate)(TransformerConfig&);
    const char* field;
  };
  const Case cases[] = {
      {[](TransformerConfig& c) { c.kv_heads = 3; }, "kv_heads"},  // 3 does not divide 4
      {[](TransformerConfig& c) { c.kv_heads = -1; }, "kv_heads"},
      {[](TransformerConfig& c) { c.ffn_hidden = -1; }, "ffn_hidden"},
      {[](TransformerConfig& c) { c.hsdp_shard_size = 4; }, "hsdp_shard_size"},  // 4 !| 6
      {[](TransformerConfig& c) { c.reduce_dtype = DType::kBFloat16; }, "fp32_reduce_scatter"},
  };
  for (const Case& c : cases) {
    TransformerConfig config = ConfigA();
    c.mutate(config);
    RecordingSink sink;
    Status status = GenerateTransformer(config, sink);
    EXPECT_FALSE(status.ok()) << c.field;
    EXPECT_NE(status.message().find(c.field), std::string::npos) << status.message();
  }
}

}  // namespace
}  // namespace bucketsim
