#include "gen/transformer_preset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "engine/trace_checker.h"
#include "testing/recording_sink.h"

#if __has_include("io/trace_writer.h")
#include "io/trace_reader.h"
#include "io/trace_writer.h"
#define BUCKETSIM_HAVE_TRACE_WRITER 1
#endif

namespace bucketsim {
namespace {

using testing::RecordingSink;

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
constexpr Category kGrad = Category::kGrad;
constexpr Category kAg = Category::kAllGather;
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

std::map<std::string, int> CountByKind(const std::vector<Event>& events) {
  std::map<std::string, int> counts;
  for (const Event& event : events) ++counts[std::string(EventKindName(event.kind))];
  return counts;
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
      e.fsdp, e.param, e.id, e.bytes, e.group, e.numel, e.dur_us);
}

std::vector<std::string> RenderAll(const RecordingSink& trace) {
  std::vector<std::string> lines;
  for (const Event& event : trace.events) lines.push_back(Render(event, trace.header));
  return lines;
}

std::vector<std::string> NamesOf(const RecordingSink& trace, EventKind kind) {
  std::vector<std::string> names;
  for (const Event* event : OfKind(trace.events, kind)) {
    names.push_back(trace.header.names.at(event->name));
  }
  return names;
}

// The events of `phase` in `iteration`, one line each, in order: allocs and frees with the
// bytes and category of what they allocate or free, compute spans and marks with their name,
// requests with their instance. Phase and iteration markers are left out.
std::vector<std::string> Timeline(const RecordingSink& trace, int iteration, Phase phase) {
  std::map<std::uint64_t, const Event*> allocs;
  std::vector<std::string> lines;
  Walk(trace.events, [&](const Event& event, int i, Phase p) {
    if (event.kind == EventKind::kAlloc) allocs[event.id] = &event;
    if (i != iteration || p != phase) return;
    switch (event.kind) {
      case EventKind::kAlloc:
      case EventKind::kFree: {
        const Event& alloc = *allocs.at(event.id);
        lines.push_back(fmt::format("{} {} {}", EventKindName(event.kind), alloc.bytes,
                                    CategoryName(alloc.category)));
        break;
      }
      case EventKind::kCompute:
      case EventKind::kMark:
        lines.push_back(
            fmt::format("{} {}", EventKindName(event.kind), trace.header.names.at(event.name)));
        break;
      case EventKind::kReduceScatter:
        lines.push_back(fmt::format("rs {}", event.fsdp));
        break;
      case EventKind::kIteration:
      case EventKind::kPhase:
        break;
      default:
        lines.push_back(std::string(EventKindName(event.kind)));
    }
  });
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

// The most activation bytes alive during `phase` of `iteration`.
Bytes PeakActivations(const RecordingSink& trace, int iteration, Phase phase) {
  const std::vector<Bytes> live = LiveBytes(trace.events, Category::kActivation);
  Bytes peak = 0;
  Walk(trace.events, [&](const Event& event, int i, Phase p) {
    if (i == iteration && p == phase) peak = std::max(peak, live[event.index]);
  });
  return peak;
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

  ASSERT_EQ(header.fsdp.size(), 4u);
  const std::vector<std::pair<std::string, Numel>> expected = {
      {"embedding", 10240}, {"block0", 49984}, {"block1", 49984}, {"head", 8320}};
  for (std::size_t f = 0; f < expected.size(); ++f) {
    EXPECT_EQ(header.fsdp[f].name, expected[f].first);
    ASSERT_EQ(header.fsdp[f].params.size(), 1u);
    EXPECT_EQ(header.fsdp[f].params[0].numel, expected[f].second);
    EXPECT_EQ(header.fsdp[f].params[0].dtype, DType::kFloat32);
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

TEST(TransformerPreset, MixedPrecisionInitAllocatesFp32Shards) {
  RecordingSink trace = Generate(MixedPrecisionConfig());
  EXPECT_EQ(AllocsIn(trace.events, -1, Phase::kInit),
            (std::vector<Alloc>{
                {10240, 0, kParam}, {49984, 0, kParam}, {49984, 0, kParam}, {8320, 0, kParam}}));
}

TEST(TransformerPreset, MixedPrecisionForwardAllocations) {
  RecordingSink trace = Generate(MixedPrecisionConfig());
  const std::vector<Alloc> block = {{24992, 1, kAg},  {99968, 1, kAg},  {45056, 0, kAct},
                                    {40960, 0, kAct}, {77824, 0, kAct}, {16384, 0, kAct}};
  const std::vector<Alloc> expected =
      Concat<Alloc>({{{5120, 1, kAg}, {20480, 1, kAg}, {8192, 0, kAct}},
                     block,
                     block,
                     {{4160, 1, kAg}, {16640, 1, kAg}, {16384, 0, kAct}, {32768, 0, kAct}}});
  for (int i = 0; i < 2; ++i) EXPECT_EQ(AllocsIn(trace.events, i, Phase::kForward), expected);

  // Korthikanti et al.: 16-bit activations of one layer are sbh (34 + 5as/h) bytes.
  const Bytes sbh = 32 * 2 * 64;
  const Bytes block_activations = 45056 + 40960 + 77824 + 16384;
  EXPECT_EQ(block_activations, 180224u);
  EXPECT_EQ(block_activations * 64, sbh * (34 * 64 + 5 * 4 * 32));
}

TEST(TransformerPreset, MixedPrecisionBackwardAllocations) {
  RecordingSink trace = Generate(MixedPrecisionConfig());
  // head keeps its full params from forward (no all-gather); the others gather again.
  const std::vector<Alloc> expected = {
      {16640, 0, kGrad},                                      // head
      {24992, 1, kAg},   {99968, 1, kAg}, {99968, 0, kGrad},  // block1
      {24992, 1, kAg},   {99968, 1, kAg}, {99968, 0, kGrad},  // block0
      {5120, 1, kAg},    {20480, 1, kAg}, {20480, 0, kGrad},  // embedding
  };
  for (int i = 0; i < 2; ++i) EXPECT_EQ(AllocsIn(trace.events, i, Phase::kBackward), expected);
}

TEST(TransformerPreset, MixedPrecisionAdamStateAtFirstStepOnly) {
  RecordingSink trace = Generate(MixedPrecisionConfig());
  EXPECT_EQ(AllocsIn(trace.events, 0, Phase::kStep), (std::vector<Alloc>{{10240, 0, kOpt},
                                                                         {10240, 0, kOpt},
                                                                         {49984, 0, kOpt},
                                                                         {49984, 0, kOpt},
                                                                         {49984, 0, kOpt},
                                                                         {49984, 0, kOpt},
                                                                         {8320, 0, kOpt},
                                                                         {8320, 0, kOpt}}));
  EXPECT_TRUE(AllocsIn(trace.events, 1, Phase::kStep).empty());
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
    requests.emplace_back(event.fsdp, event.group, event.numel);
  });
  // Reverse order of forward; group per instance; numel = ceil(numel / 4).
  const std::vector<Request> one_backward = {
      {3, 4, 2080}, {2, 3, 12496}, {1, 2, 12496}, {0, 1, 2560}};
  EXPECT_EQ(requests, Concat<Request>({one_backward, one_backward}));
}

TEST(TransformerPreset, MixedPrecisionEventCounts) {
  RecordingSink trace = Generate(MixedPrecisionConfig());
  // Per iteration: forward allocs 3 + 6 + 6 + 4 = 19, frees 2 + 2 + 2 + 1 = 7 (head keeps its
  // all-gather); backward allocs 1 + 3 + 3 + 3 = 10, frees 4 + 7 + 7 + 4 = 22 (activations,
  // all-gather, _fp16_shard, full grad); compute 4 + 4 + 1 step; 4 rs, 1 flush, 3 marks,
  // 4 phases, 1 iteration, 1 zero_grad: 81. Plus 4 shards in init and 8 Adam tensors:
  // 2 * 81 + 12 = 174.
  const std::map<std::string, int> expected = {{"alloc", 4 + 8 + 2 * 29},
                                               {"free", 2 * 29},
                                               {"compute", 2 * 9},
                                               {"rs", 2 * 4},
                                               {"flush", 2},
                                               {"mark", 2 * 3},
                                               {"phase", 2 * 4},
                                               {"iteration", 2},
                                               {"zero_grad", 2}};
  EXPECT_EQ(CountByKind(trace.events), expected);
  EXPECT_EQ(trace.events.size(), 174u);
  for (std::size_t i = 0; i < trace.events.size(); ++i) EXPECT_EQ(trace.events[i].index, i);
}

TEST(TransformerPreset, MixedPrecisionOnlyParamsAndOptimizerStateOutliveTheTrace) {
  RecordingSink trace = Generate(MixedPrecisionConfig());
  std::vector<Alloc> alive = AliveAtEnd(trace.events);
  std::map<Category, Bytes> bytes;
  for (const auto& [size, stream, category] : alive) bytes[category] += size;
  EXPECT_EQ(alive.size(), 12u);
  EXPECT_EQ(bytes, (std::map<Category, Bytes>{{kParam, 10240 + 2 * 49984 + 8320},
                                              {kOpt, 2 * (10240 + 2 * 49984 + 8320)}}));
}

TEST(TransformerPreset, MarksComputeSpansAndZeroGrad) {
  RecordingSink trace = Generate(MixedPrecisionConfig());
  EXPECT_EQ(NamesOf(trace, EventKind::kMark),
            (std::vector<std::string>{"after fwd", "after bwd", "after step", "after fwd",
                                      "after bwd", "after step"}));
  const std::vector<std::string> one_iteration = {
      "forward embedding", "forward block0",     "forward block1",
      "forward head",      "backward head",      "backward block1",
      "backward block0",   "backward embedding", "optimizer step"};
  EXPECT_EQ(NamesOf(trace, EventKind::kCompute),
            Concat<std::string>({one_iteration, one_iteration}));

  // At 400 TFLOP/s = 4e8 FLOP/us, tokens = 64:
  //   block forward 2 * 64 * 49984 + 4 * 2 * 32^2 * 64 = 6397952 + 524288 = 6922240 FLOPs
  //   head forward 2 * 64 * 8320 = 1064960; embedding forward 2 * 64 * 64 = 8192
  //   Adam step 12 FLOPs per shard element: 12 * (2560 + 2 * 12496 + 2080) = 355584
  const std::vector<const Event*> spans = OfKind(trace.events, EventKind::kCompute);
  const std::vector<double> flops = {8192,        6922240,     6922240,  1064960, 2 * 1064960,
                                     2 * 6922240, 2 * 6922240, 2 * 8192, 355584};
  for (std::size_t i = 0; i < flops.size(); ++i) {
    EXPECT_DOUBLE_EQ(spans[i]->dur_us, flops[i] / 4e8) << i;
    EXPECT_EQ(spans[i]->stream, 0u);
  }
  for (const Event* zero_grad : OfKind(trace.events, EventKind::kZeroGrad)) {
    EXPECT_TRUE(zero_grad->set_to_none);
  }
}

TEST(TransformerPreset, Fp32SharedGroupTrace) {
  RecordingSink trace = Generate(Fp32Config());
  const TraceHeader& header = trace.header;
  EXPECT_EQ(header.rank, 1);
  EXPECT_EQ(header.bucket_cap_mb, 25.0);
  // Shared layout: one group object for every instance.
  ASSERT_EQ(header.groups.size(), 1u);
  EXPECT_EQ(header.groups[0].id, 1u);
  EXPECT_EQ(header.groups[0].ranks, (std::vector<int>{0, 1}));
  ASSERT_EQ(header.fsdp.size(), 3u);
  EXPECT_EQ(header.fsdp[0].params[0].numel, 2560u);
  EXPECT_EQ(header.fsdp[1].params[0].numel, 12704u);
  EXPECT_EQ(header.fsdp[2].params[0].numel, 2112u);

  EXPECT_EQ(AllocsIn(trace.events, -1, Phase::kInit),
            (std::vector<Alloc>{{5120, 0, kParam}, {25408, 0, kParam}, {4224, 0, kParam}}));
  // No mixed precision: no _fp16_shard.
  EXPECT_EQ(AllocsIn(trace.events, 0, Phase::kForward), (std::vector<Alloc>{{10240, 1, kAg},
                                                                            {2048, 0, kAct},
                                                                            {50816, 1, kAg},
                                                                            {10752, 0, kAct},
                                                                            {4608, 0, kAct},
                                                                            {18944, 0, kAct},
                                                                            {4096, 0, kAct},
                                                                            {8448, 1, kAg},
                                                                            {4096, 0, kAct},
                                                                            {4096, 0, kAct}}));
  EXPECT_EQ(AllocsIn(trace.events, 0, Phase::kBackward), (std::vector<Alloc>{{8448, 0, kGrad},
                                                                             {50816, 1, kAg},
                                                                             {50816, 0, kGrad},
                                                                             {10240, 1, kAg},
                                                                             {10240, 0, kGrad}}));
  EXPECT_EQ(AllocsIn(trace.events, 0, Phase::kStep),
            (std::vector<Alloc>{{5120, 0, kOpt}, {25408, 0, kOpt}, {4224, 0, kOpt}}));

  // fp32 reduce: the reduced shard is kept as a view; all on the shared group.
  std::vector<Request> requests;
  for (const Event* rs : OfKind(trace.events, EventKind::kReduceScatter)) {
    EXPECT_EQ(rs->dtype, DType::kFloat32);
    EXPECT_EQ(rs->shard_mode, ShardMode::kView);
    requests.emplace_back(rs->fsdp, rs->group, rs->numel);
  }
  EXPECT_EQ(requests, (std::vector<Request>{{2, 1, 1056}, {1, 1, 6352}, {0, 1, 1280}}));

  // forward allocs 10, frees 2; backward allocs 5, frees 4 + 6 + 3 = 13; init 3, momentum 3.
  const std::map<std::string, int> expected = {{"alloc", 21}, {"free", 15},     {"compute", 7},
                                               {"rs", 3},     {"flush", 1},     {"mark", 3},
                                               {"phase", 4},  {"iteration", 1}, {"zero_grad", 1}};
  EXPECT_EQ(CountByKind(trace.events), expected);
  EXPECT_EQ(trace.events.size(), 56u);
  EXPECT_EQ(AliveAtEnd(trace.events).size(), 6u);
}

// bf16 compute reduced in fp32 (fp32_reduce_scatter), with a hidden size the world size does
// not divide. h = 6, a = 3, s = 4, b = 1, V = 10, ws = 4:
//   embedding numel 14 * 6 = 84, shard 21; head numel 6 * 12 = 72, shard 18
//   block numel 6 * (72 + 13) = 510, shard ceil(510 / 4) = 128: torch.chunk gives 128, 128,
//   128, 126, and chunk_and_pad pads the last one into a new 128-element fp32 tensor (512 B).
TEST(TransformerPreset, Fp32ReduceScatterCopiesGradAndPadsShortChunk) {
  TransformerConfig config;
  config.layers = 1;
  config.hidden = 6;
  config.heads = 3;
  config.seq = 4;
  config.micro_batch = 1;
  config.vocab = 10;
  config.world_size = 4;
  config.iterations = 1;
  config.compute_dtype = DType::kBFloat16;
  config.reduce_dtype = DType::kFloat32;
  config.optimizer = OptimizerKind::kSgd;
  RecordingSink trace = Generate(config);

  EXPECT_EQ(AllocsIn(trace.events, 0, Phase::kBackward),
            (std::vector<Alloc>{
                {144, 0, kGrad},
                {288, 2, kGrad},  // head: grad, fp32 copy
                {256, 1, kAg},
                {1024, 1, kAg},
                {1020, 0, kGrad},  // block
                {2040, 2, kGrad},
                {512, 2, kGrad},  // fp32 copy, pad chunk
                {42, 1, kAg},
                {168, 1, kAg},
                {168, 0, kGrad},
                {336, 2, kGrad},  // embedding
            }));
  EXPECT_TRUE(AllocsIn(trace.events, 0, Phase::kStep).empty());  // plain SGD: no state

  // Around the block's request: copy and pad are allocated before it, freed after it, and the
  // full gradient dies last (the hook returns).
  const std::vector<const Event*> requests = OfKind(trace.events, EventKind::kReduceScatter);
  ASSERT_EQ(requests.size(), 3u);
  const Event* rs = requests[1];
  EXPECT_EQ(rs->fsdp, 1u);
  EXPECT_EQ(rs->numel, 128u);
  EXPECT_EQ(rs->dtype, DType::kFloat32);
  EXPECT_EQ(rs->shard_mode, ShardMode::kView);
  const std::vector<Event>& e = trace.events;
  const std::size_t at = rs->index;
  EXPECT_EQ(e[at - 2].bytes, 2040u);
  EXPECT_EQ(e[at - 1].bytes, 512u);
  EXPECT_EQ(e[at + 1].kind, EventKind::kFree);
  EXPECT_EQ(e[at + 1].id, e[at - 1].id);
  EXPECT_EQ(e[at + 2].id, e[at - 2].id);
  std::uint64_t full_grad = 0;
  std::uint64_t full_param = 0;
  for (std::size_t i = 0; i < at; ++i) {
    if (e[i].kind != EventKind::kAlloc) continue;
    if (e[i].bytes == 1020) full_grad = e[i].id;
    if (e[i].bytes == 1024) full_param = e[i].id;
  }
  EXPECT_EQ(e[at - 3].kind, EventKind::kFree);
  EXPECT_EQ(e[at - 3].id, full_param);  // the hook frees the gathered params first
  EXPECT_EQ(e[at + 3].kind, EventKind::kFree);
  EXPECT_EQ(e[at + 3].id, full_grad);
}

// The default configuration (24 layers, h 1024, 16 heads, seq 2048, b 1, V 50304, ws 8, bf16):
//   block numel 12 * 1024^2 + 13 * 1024 = 12596224, shard 12596224 / 8 = 1574528
//   embedding (50304 + 2048) * 1024 = 53608448, shard 6701056
//   head 1024 * (50304 + 2) = 51513344, shard 6439168
//   activations per block, sbh = 2097152: 11 sbh = 23068672, 5as^2b = 5 * 16 * 2048^2 =
//   335544320, 19 sbh = 39845888, 4 sbh = 8388608; total 406847488 = sbh (34 + 160)
//   events: per iteration 39 + 21 * 24 = 543; 26 shards + 52 Adam tensors + 2 * 543 = 1164
TEST(TransformerPreset, DefaultConfiguration) {
  RecordingSink trace = Generate(TransformerConfig{});
  ASSERT_EQ(trace.header.fsdp.size(), 26u);
  EXPECT_EQ(trace.header.fsdp[0].params[0].numel, 53608448u);
  EXPECT_EQ(trace.header.fsdp[1].params[0].numel, 12596224u);
  EXPECT_EQ(trace.header.fsdp[25].params[0].numel, 51513344u);
  const std::vector<const Event*> requests = OfKind(trace.events, EventKind::kReduceScatter);
  ASSERT_EQ(requests.size(), 52u);
  EXPECT_EQ(requests[0]->numel, 6439168u);
  EXPECT_EQ(requests[1]->numel, 1574528u);
  EXPECT_EQ(requests[25]->numel, 6701056u);

  Bytes block0_activations = 0;
  std::vector<Bytes> sizes;
  Walk(trace.events, [&](const Event& event, int i, Phase phase) {
    // block0's activations are the 4 allocations after embedding's 3 and block0's 2 gathers.
    if (event.kind == EventKind::kAlloc && i == 0 && phase == Phase::kForward) {
      sizes.push_back(event.bytes);
    }
  });
  ASSERT_GE(sizes.size(), 9u);
  EXPECT_EQ((std::vector<Bytes>(sizes.begin() + 5, sizes.begin() + 9)),
            (std::vector<Bytes>{23068672, 335544320, 39845888, 8388608}));
  for (std::size_t k = 5; k < 9; ++k) block0_activations += sizes[k];
  EXPECT_EQ(block0_activations, 406847488u);
  EXPECT_EQ(block0_activations, Bytes{2048} * 1024 * (34 + 5 * 16 * 2048 / 1024));
  EXPECT_EQ(trace.events.size(), 1164u);
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

TEST(TransformerPreset, CheckpointingForwardKeepsOnlyBlockInputs) {
  RecordingSink trace = Generate(CheckpointedMixedPrecisionConfig());
  // The same allocations as without checkpointing plus the input (8192) after the gathers;
  // embedding and head are not checkpointed.
  const std::vector<Alloc> block = {{24992, 1, kAg},  {99968, 1, kAg},  {8192, 0, kAct},
                                    {45056, 0, kAct}, {40960, 0, kAct}, {77824, 0, kAct},
                                    {16384, 0, kAct}};
  const std::vector<Alloc> expected =
      Concat<Alloc>({{{5120, 1, kAg}, {20480, 1, kAg}, {8192, 0, kAct}},
                     block,
                     block,
                     {{4160, 1, kAg}, {16640, 1, kAg}, {16384, 0, kAct}, {32768, 0, kAct}}});
  for (int i = 0; i < 2; ++i) EXPECT_EQ(AllocsIn(trace.events, i, Phase::kForward), expected);

  // Alive after forward: embedding output 8192 + 2 block inputs 2 * 8192 + head logits 16384
  // and fp32 loss input 32768 = 73728 (without checkpointing 8192 + 2 * 180224 + 49152 =
  // 417792).
  EXPECT_EQ(ActivationsAfterForward(trace), (std::vector<Bytes>{73728, 73728}));
  EXPECT_EQ(ActivationsAfterForward(Generate(MixedPrecisionConfig())),
            (std::vector<Bytes>{417792, 417792}));

  // The transient peak is block1's: embedding output 8192 + inputs 2 * 8192 + its internal
  // activations 180224 = 204800 (block0's is 196608, the head's 73728).
  EXPECT_EQ(PeakActivations(trace, 0, Phase::kForward), 204800u);
  EXPECT_EQ(PeakActivations(trace, 1, Phase::kForward), 204800u);

  // block1 in order: gather (the _fp16_shard dies after the all-gather), keep the input,
  // compute, the internal activations made and dropped, reshard.
  const std::vector<std::string> forward = Timeline(trace, 0, Phase::kForward);
  const std::vector<std::string> block1 = {
      "alloc 24992 all_gather", "alloc 99968 all_gather", "free 24992 all_gather",
      "alloc 8192 activation",  "compute forward block1", "alloc 45056 activation",
      "alloc 40960 activation", "alloc 77824 activation", "alloc 16384 activation",
      "free 16384 activation",  "free 77824 activation",  "free 40960 activation",
      "free 45056 activation",  "free 99968 all_gather"};
  const auto at = std::find(forward.begin(), forward.end(), "compute forward block1");
  ASSERT_NE(at, forward.end());
  ASSERT_GE(at - forward.begin(), 4);
  ASSERT_LE(at + 11, forward.end());
  EXPECT_EQ(std::vector<std::string>(at - 4, at + 10), block1);
  EXPECT_EQ(*(at + 10), "alloc 4160 all_gather");  // head's gather comes next
}

TEST(TransformerPreset, CheckpointingBackwardRecomputesBlocks) {
  RecordingSink trace = Generate(CheckpointedMixedPrecisionConfig());
  // Each block: gather, the four recomputed activations, then the full gradient.
  const std::vector<Alloc> block = {{24992, 1, kAg},  {99968, 1, kAg},  {45056, 0, kAct},
                                    {40960, 0, kAct}, {77824, 0, kAct}, {16384, 0, kAct},
                                    {99968, 0, kGrad}};
  const std::vector<Alloc> expected = Concat<Alloc>(
      {{{16640, 0, kGrad}}, block, block, {{5120, 1, kAg}, {20480, 1, kAg}, {20480, 0, kGrad}}});
  for (int i = 0; i < 2; ++i) EXPECT_EQ(AllocsIn(trace.events, i, Phase::kBackward), expected);

  // The peak is block1's recompute: embedding output 8192 + inputs 2 * 8192 + 180224 = 204800
  // (the head's 49152 is freed before it).
  EXPECT_EQ(PeakActivations(trace, 0, Phase::kBackward), 204800u);

  // block1 in order: gather, recompute, backward, grad, free recomputed activations newest
  // first then the kept input, free the gathered params, request, free the grad.
  const std::vector<std::string> backward = Timeline(trace, 0, Phase::kBackward);
  const std::vector<std::string> block1 = {"alloc 24992 all_gather",
                                           "alloc 99968 all_gather",
                                           "free 24992 all_gather",
                                           "compute recompute block1",
                                           "alloc 45056 activation",
                                           "alloc 40960 activation",
                                           "alloc 77824 activation",
                                           "alloc 16384 activation",
                                           "compute backward block1",
                                           "alloc 99968 grad",
                                           "free 16384 activation",
                                           "free 77824 activation",
                                           "free 40960 activation",
                                           "free 45056 activation",
                                           "free 8192 activation",
                                           "free 99968 all_gather",
                                           "rs 2",
                                           "free 99968 grad"};
  const auto at = std::find(backward.begin(), backward.end(), "compute recompute block1");
  ASSERT_NE(at, backward.end());
  ASSERT_GE(at - backward.begin(), 3);
  ASSERT_LE(at + 15, backward.end());
  EXPECT_EQ(std::vector<std::string>(at - 3, at + 15), block1);

  // The input each block frees in backward is the one it kept in forward: block1's first.
  std::vector<std::uint64_t> kept;  // forward 8192-byte activations: embedding, block0, block1
  std::vector<std::uint64_t> freed;
  std::map<std::uint64_t, Bytes> bytes;
  Walk(trace.events, [&](const Event& event, int i, Phase phase) {
    if (event.kind != EventKind::kAlloc && event.kind != EventKind::kFree) return;
    if (event.kind == EventKind::kAlloc) bytes[event.id] = event.bytes;
    if (i != 0 || bytes.at(event.id) != 8192) return;
    if (event.kind == EventKind::kAlloc && phase == Phase::kForward) kept.push_back(event.id);
    if (event.kind == EventKind::kFree && phase == Phase::kBackward) freed.push_back(event.id);
  });
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(freed, (std::vector<std::uint64_t>{kept[2], kept[1], kept[0]}));
}

TEST(TransformerPreset, CheckpointingEventCountsAndSpans) {
  RecordingSink trace = Generate(CheckpointedMixedPrecisionConfig());
  // Per block per iteration, on top of MixedPrecisionEventCounts: forward +1 alloc (input),
  // +4 allocs and +4 frees (transient activations); backward +4 allocs (recompute), +1 free
  // (the input), +1 compute (recompute): 5 allocs, 5 frees, 1 compute = 11. Per iteration
  // 81 + 2 * 11 = 103; allocs 29 + 10 = 39, frees 29 + 10 = 39, compute 9 + 2 = 11.
  // 2 * 103 + 12 = 218.
  const std::map<std::string, int> expected = {{"alloc", 4 + 8 + 2 * 39},
                                               {"free", 2 * 39},
                                               {"compute", 2 * 11},
                                               {"rs", 2 * 4},
                                               {"flush", 2},
                                               {"mark", 2 * 3},
                                               {"phase", 2 * 4},
                                               {"iteration", 2},
                                               {"zero_grad", 2}};
  EXPECT_EQ(CountByKind(trace.events), expected);
  EXPECT_EQ(trace.events.size(), 218u);
  for (std::size_t i = 0; i < trace.events.size(); ++i) EXPECT_EQ(trace.events[i].index, i);

  const std::vector<std::string> one_iteration = {
      "forward embedding", "forward block0",     "forward block1",  "forward head",
      "backward head",     "recompute block1",   "backward block1", "recompute block0",
      "backward block0",   "backward embedding", "optimizer step"};
  EXPECT_EQ(NamesOf(trace, EventKind::kCompute),
            Concat<std::string>({one_iteration, one_iteration}));
  // The recompute is one more forward: 6922240 FLOPs at 4e8 FLOP/us.
  const std::vector<const Event*> spans = OfKind(trace.events, EventKind::kCompute);
  EXPECT_DOUBLE_EQ(spans[5]->dur_us, 6922240 / 4e8);
  EXPECT_DOUBLE_EQ(spans[7]->dur_us, 6922240 / 4e8);
  EXPECT_DOUBLE_EQ(spans[6]->dur_us, 2 * 6922240 / 4e8);

  // Nothing but activations differs: same header (bar the description), same requests, same
  // allocations left at the end.
  RecordingSink plain = Generate(MixedPrecisionConfig());
  ASSERT_EQ(trace.header.fsdp.size(), plain.header.fsdp.size());
  for (std::size_t f = 0; f < plain.header.fsdp.size(); ++f) {
    EXPECT_EQ(trace.header.fsdp[f].name, plain.header.fsdp[f].name);
    EXPECT_EQ(trace.header.fsdp[f].params[0].numel, plain.header.fsdp[f].params[0].numel);
  }
  EXPECT_EQ(trace.header.groups.size(), plain.header.groups.size());
  EXPECT_NE(trace.header.description.find("activation checkpointing"), std::string::npos);
  EXPECT_EQ(plain.header.description.find("checkpointing"), std::string::npos);
  std::vector<Request> requests;
  std::vector<Request> plain_requests;
  for (const Event* rs : OfKind(trace.events, EventKind::kReduceScatter)) {
    requests.emplace_back(rs->fsdp, rs->group, rs->numel);
  }
  for (const Event* rs : OfKind(plain.events, EventKind::kReduceScatter)) {
    plain_requests.emplace_back(rs->fsdp, rs->group, rs->numel);
  }
  EXPECT_EQ(requests, plain_requests);
  EXPECT_EQ(AliveAtEnd(trace.events), AliveAtEnd(plain.events));
}

// Fp32Config with checkpointing: e = 4, sbh = 512, the block's input 4 * 512 = 2048; its
// internal activations 10752 + 4608 + 18944 + 4096 = 38400. One block, no _fp16_shard.
TEST(TransformerPreset, CheckpointingFp32WholeIteration) {
  TransformerConfig config = Fp32Config();
  config.activation_checkpointing = true;
  RecordingSink trace = Generate(config);

  using Lines = std::vector<std::string>;
  const Lines embedding_forward = {"alloc 10240 all_gather", "compute forward embedding",
                                   "alloc 2048 activation", "free 10240 all_gather"};
  const Lines block_forward = {
      "alloc 50816 all_gather", "alloc 2048 activation",  // gather, keep the input
      "compute forward block0", "alloc 10752 activation", "alloc 4608 activation",
      "alloc 18944 activation", "alloc 4096 activation",  // transient
      "free 4096 activation",   "free 18944 activation",  "free 4608 activation",
      "free 10752 activation",  "free 50816 all_gather"};
  const Lines head_forward = {"alloc 8448 all_gather", "compute forward head",
                              "alloc 4096 activation", "alloc 4096 activation"};
  EXPECT_EQ(
      Timeline(trace, 0, Phase::kForward),
      Concat<std::string>({embedding_forward, block_forward, head_forward, {"mark after fwd"}}));

  const Lines head_backward = {"compute backward head", "alloc 8448 grad",
                               "free 4096 activation",  "free 4096 activation",
                               "free 8448 all_gather",  "rs 2",
                               "free 8448 grad"};
  const Lines block_backward = {
      "alloc 50816 all_gather",  "compute recompute block0", "alloc 10752 activation",
      "alloc 4608 activation",   "alloc 18944 activation",   "alloc 4096 activation",
      "compute backward block0", "alloc 50816 grad",         "free 4096 activation",
      "free 18944 activation",   "free 4608 activation",     "free 10752 activation",
      "free 2048 activation",    "free 50816 all_gather",    "rs 1",
      "free 50816 grad"};
  const Lines embedding_backward = {"alloc 10240 all_gather", "compute backward embedding",
                                    "alloc 10240 grad",       "free 2048 activation",
                                    "free 10240 all_gather",  "rs 0",
                                    "free 10240 grad"};
  EXPECT_EQ(Timeline(trace, 0, Phase::kBackward),
            Concat<std::string>(
                {head_backward, block_backward, embedding_backward, {"flush", "mark after bwd"}}));

  // After forward: embedding 2048 + input 2048 + logits 4096 + loss input 4096 = 12288.
  // Transient peak in forward: 2048 + 2048 + 38400 = 42496; the same at the recompute.
  EXPECT_EQ(ActivationsAfterForward(trace), (std::vector<Bytes>{12288}));
  EXPECT_EQ(PeakActivations(trace, 0, Phase::kForward), 42496u);
  EXPECT_EQ(PeakActivations(trace, 0, Phase::kBackward), 42496u);

  // Fp32SharedGroupTrace's 56 events plus 11 for the one block: allocs 21 + 5, frees 15 + 5,
  // compute 7 + 1.
  const std::map<std::string, int> expected = {{"alloc", 26}, {"free", 20},     {"compute", 8},
                                               {"rs", 3},     {"flush", 1},     {"mark", 3},
                                               {"phase", 4},  {"iteration", 1}, {"zero_grad", 1}};
  EXPECT_EQ(CountByKind(trace.events), expected);
  EXPECT_EQ(trace.events.size(), 67u);
  EXPECT_EQ(AliveAtEnd(trace.events).size(), 6u);
}

// The default configuration with checkpointing, e sbh = 2 * 2048 * 1024 = 4194304:
//   after forward: embedding output 4194304 + 24 block inputs 100663296 + head logits
//   2 * 2048 * 50304 = 206045184 + fp32 loss input 4 * 2048 * 50304 = 412090368 = 722993152
//   (without checkpointing 4194304 + 24 * 406847488 + 618135552 = 10386669568)
//   forward peak, at block23: 4194304 + 24 * 4194304 + 406847488 = 511705088; the head's
//   723 MiB comes after block23's activations are gone
//   events: 1164 + 11 per block per iteration = 1164 + 11 * 24 * 2 = 1692
TEST(TransformerPreset, CheckpointingDefaultConfiguration) {
  TransformerConfig config;
  config.activation_checkpointing = true;
  RecordingSink trace = Generate(config);
  EXPECT_EQ(ActivationsAfterForward(trace), (std::vector<Bytes>{722993152, 722993152}));
  EXPECT_EQ(PeakActivations(trace, 0, Phase::kForward), 722993152u);
  EXPECT_EQ(trace.events.size(), 1692u);
  EXPECT_EQ(ActivationsAfterForward(Generate(TransformerConfig{})),
            (std::vector<Bytes>{10386669568u, 10386669568u}));
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
      {[](TransformerConfig& c) { c.world_size = 1; }, "world_size"},
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
    ASSERT_EQ(read.header.fsdp.size(), generated.header.fsdp.size());
    for (std::size_t f = 0; f < read.header.fsdp.size(); ++f) {
      EXPECT_EQ(read.header.fsdp[f].name, generated.header.fsdp[f].name);
      EXPECT_EQ(read.header.fsdp[f].params[0].numel, generated.header.fsdp[f].params[0].numel);
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
  config.fp32_reduce_scatter = true;
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
            "100; fairscale FSDP rank 4 of 6, compute bf16, reduce fp32, hsdp shard groups of 3, "
            "sgd-momentum, 1 iterations");
  ASSERT_EQ(h.groups.size(), 1u);
  EXPECT_EQ(h.groups[0].ranks, (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(h.groups[0].name, "shard_group");
  ASSERT_EQ(h.fsdp.size(), 4u);
  EXPECT_EQ(h.fsdp[0].params[0].numel, 6912u);
  EXPECT_EQ(h.fsdp[1].params[0].numel, 25184u);
  EXPECT_EQ(h.fsdp[2].params[0].numel, 25184u);
  EXPECT_EQ(h.fsdp[3].params[0].numel, 6528u);
}

TEST(TransformerPresetArithmetic, ConfigAAllocations) {
  RecordingSink trace = Generate(ConfigA());
  std::vector<Bytes> gather_fwd, gather_bwd, grads_default, grads_post_backward, acts_fwd;
  std::vector<std::string> rs;
  Phase phase = Phase::kInit;
  for (const Event& e : trace.events) {
    if (e.kind == EventKind::kPhase) phase = e.phase;
    if (e.kind == EventKind::kReduceScatter) rs.push_back(Summarize(e, trace.header));
    if (e.kind != EventKind::kAlloc) continue;
    if (e.category == Category::kAllGather) {
      (phase == Phase::kForward ? gather_fwd : gather_bwd).push_back(e.bytes);
    }
    if (e.category == Category::kGrad) {
      (e.stream == 0 ? grads_default : grads_post_backward).push_back(e.bytes);
    }
    if (e.category == Category::kActivation && phase == Phase::kForward)
      acts_fwd.push_back(e.bytes);
  }
  EXPECT_EQ(gather_fwd, (std::vector<Bytes>{4608, 13824, 16790, 50370, 16790, 50370, 4352, 13056}));
  // The head is not resharded after forward; the blocks and the embedding are re-gathered.
  EXPECT_EQ(gather_bwd, (std::vector<Bytes>{16790, 50370, 16790, 50370, 4608, 13824}));
  EXPECT_EQ(grads_default, (std::vector<Bytes>{13056, 50368, 50368, 13824}));
  // Per hook: the fp32 copy, then the padding chunk where there is one.
  EXPECT_EQ(grads_post_backward, (std::vector<Bytes>{26112, 100736, 33580, 100736, 33580, 27648}));
  EXPECT_EQ(rs, (std::vector<std::string>{"rs 3.0 g1 fp32 2176 view", "rs 2.0 g1 fp32 8395 view",
                                          "rs 1.0 g1 fp32 8395 view", "rs 0.0 g1 fp32 2304 view"}));
  EXPECT_EQ(acts_fwd,
            (std::vector<Bytes>{2048, 9216, 2560, 9216, 4096, 9216, 2560, 9216, 4096, 3200, 6400}));
  // SGD momentum: one fp32 buffer per shard, (2304 + 2 * 8395 + 2176) * 4.
  Bytes state = 0;
  for (const Event& e : trace.events) {
    if (e.kind == EventKind::kAlloc && e.category == Category::kOptimizerState) state += e.bytes;
  }
  EXPECT_EQ(state, 85080u);
}

// Configuration B: tied embeddings, fp32, one layer, h = 15 with 3 heads (odd sizes, so the
// block's shard is padded), 2 ranks (this is rank 1), one shared group, plain SGD, no reshard
// after forward, activation checkpointing.
//   v = 50, s = 4, b = 1 (sb = 4), f = 4h = 60, h_kv = h, e = 4 (fp32).
// Parameters:
//   embedding (v + s) * h = 54 * 15 = 810, holding the tied weight   shard 405, no padding
//   block     12h^2 + 13h = 2700 + 195 = 2895                        shard 1448,
//             2 - 2895 / 1448 = 1 new chunk of 1448 fp32 = 5792 bytes
//   head      the final layernorm only, 2h = 30 (the LM head is the embedding)   shard 15
// All-gathers (fp32, no cast): 2 * s * 4 = 3240, 11584, 120. Full gradients numel * 4 = 3240,
//   11580, 120; the embedding's appears in the head's backward (its first use in backward).
// Activations: embedding output e*sbh = 240, the block's checkpointed input 240; the block
//   (recomputed in backward) attention (5e+1)sbh = 21*60 = 1260, scores (2e+1)as^2b =
//   9*3*16 = 432, MLP (9e+1)sbh = 37*60 = 2220, layernorms 2e*sbh = 480; the logits 4*4*50 =
//   800 and their fp32 copy 800.
TransformerConfig ConfigB() {
  TransformerConfig config;
  config.layers = 1;
  config.hidden = 15;
  config.heads = 3;
  config.vocab = 50;
  config.seq = 4;
  config.micro_batch = 1;
  config.tied_embeddings = true;
  config.compute_dtype = DType::kFloat32;
  config.world_size = 2;
  config.rank = 1;
  config.group_layout = GroupLayout::kShared;
  config.optimizer = OptimizerKind::kSgd;
  config.iterations = 1;
  config.reshard_after_forward = false;
  config.activation_checkpointing = true;
  return config;
}

TEST(TransformerPresetArithmetic, ConfigBWholeRun) {
  RecordingSink trace = Generate(ConfigB());
  EXPECT_EQ(trace.header.description,
            "GPT 1 layers, hidden 15, 3 heads, seq 4, micro-batch 1, vocab 50, tied embeddings; "
            "fairscale FSDP rank 1 of 2, compute fp32, reduce fp32, shared groups, sgd, 1 "
            "iterations, no reshard after forward, activation checkpointing");
  const std::vector<std::string> expected = {
      "alloc 1 1620 s0 param", "alloc 2 5792 s0 param", "alloc 3 60 s0 param", "iteration 0",
      "phase forward", "alloc 4 3240 s1 all_gather", "compute forward embedding",
      "alloc 5 240 s0 activation", "alloc 6 11584 s1 all_gather", "alloc 7 240 s0 activation",
      "compute forward block0", "alloc 8 1260 s0 activation", "alloc 9 432 s0 activation",
      "alloc 10 2220 s0 activation", "alloc 11 480 s0 activation", "free 11", "free 10", "free 9",
      "free 8", "alloc 12 120 s1 all_gather", "compute forward head", "alloc 13 800 s0 activation",
      "alloc 14 800 s0 activation", "mark after fwd", "phase backward",
      // the head's backward makes the head's gradient and the tied weight's
      "compute backward head", "alloc 15 120 s0 grad", "alloc 16 3240 s0 grad", "free 14",
      "free 13", "free 12", "rs 2.0 g1 fp32 15 view", "free 15", "compute recompute block0",
      "alloc 17 1260 s0 activation", "alloc 18 432 s0 activation", "alloc 19 2220 s0 activation",
      "alloc 20 480 s0 activation", "compute backward block0", "alloc 21 11580 s0 grad", "free 20",
      "free 19", "free 18", "free 17", "free 7", "free 6", "alloc 22 5792 s2 grad",
      "rs 1.0 g1 fp32 1448 view", "free 22", "free 21", "compute backward embedding", "free 5",
      "free 4", "rs 0.0 g1 fp32 405 view", "free 16", "flush", "mark after bwd", "phase step",
      "compute optimizer step", "mark after step", "phase zero_grad", "zero_grad"};
  EXPECT_EQ(SummarizeAll(trace), expected);
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
