// The engine's own rules, on traces built in code: gradient retention (what keeps a reduced
// shard's buffer alive, and until when), 512-byte rounding, phases and marks.
#include "engine/replay.h"

#include <gtest/gtest.h>

#include "backend/sim/sim_backend.h"
#include "engine/replay_policies.h"
#include "engine/trace_checker.h"
#include "testing/trace_builder.h"

namespace bucketsim {
namespace {

using testing::ReplayOne;
using testing::TraceBuilder;

// ws 2, cap 0.25 MiB fp32: S = 32768; one instance reducing n = 1000 elements into the bucket.
// Bucket data 262144 B, output 131072 B.
TraceBuilder OneBucketedParam(ShardMode mode, bool set_to_none, int iterations = 1) {
  TraceBuilder t(2, 0, 0.25);
  t.Group(1, {0, 1}).Fsdp("layer", {{"w", 2000, DType::kFloat32}});
  for (int i = 0; i < iterations; ++i) {
    ShardMode this_mode = (i > 0 && !set_to_none) ? ShardMode::kAccumulate : mode;
    t.Iteration(i).Phase(Phase::kForward).Phase(Phase::kBackward);
    t.Rs(0, 0, 1, DType::kFloat32, 1000, this_mode).Flush().Mark("after bwd");
    t.Phase(Phase::kStep).Mark("after step").Phase(Phase::kZeroGrad).ZeroGrad(set_to_none);
    t.Mark("after zero_grad");
  }
  return t;
}

std::vector<Bytes> MarkBytes(const RunResult& run) {
  std::vector<Bytes> out;
  for (const MarkSample& m : run.marks) out.push_back(m.allocated_bytes);
  return out;
}

TEST(Retention, RetiredOutputLivesUntilZeroGradSetToNone) {
  auto run = ReplayOne(OneBucketedParam(ShardMode::kView, true), "backward-only");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  // After bwd and after step: the retired output (131072 B) held by the gradient view; the
  // bucket itself is torn down. zero_grad(set_to_none=True) frees it.
  EXPECT_EQ(MarkBytes(*run), (std::vector<Bytes>{131'072, 131'072, 0}));
  EXPECT_EQ(run->marks[0].by_category[static_cast<int>(Category::kRetiredOutput)], 131'072u);
}

TEST(Retention, ZeroGradWithoutSetToNoneKeepsTheGradient) {
  auto run = ReplayOne(OneBucketedParam(ShardMode::kView, false, 2), "backward-only");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  // Iteration 1 accumulates into the kept gradient: its own retired output dies at once.
  EXPECT_EQ(MarkBytes(*run),
            (std::vector<Bytes>{131'072, 131'072, 131'072, 131'072, 131'072, 131'072}));
}

TEST(Retention, CastReleasesTheReducedBufferAndKeepsTheCast) {
  auto run = ReplayOne(OneBucketedParam(ShardMode::kCast, true), "backward-only");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  // The fp32 cast of 1000 elements is 4000 B, charged 4096 B; the retired output is freed.
  EXPECT_EQ(MarkBytes(*run), (std::vector<Bytes>{4'096, 4'096, 0}));
  EXPECT_EQ(run->marks[0].by_category[static_cast<int>(Category::kGradShard)], 4'096u);
}

TEST(Retention, AccumulateKeepsNothing) {
  auto run = ReplayOne(OneBucketedParam(ShardMode::kAccumulate, true), "backward-only");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(MarkBytes(*run), (std::vector<Bytes>{0, 0, 0}));
}

// A parameter without a gradient (FSDP2's "no_grad"): fsdp2 leaves it out, so its only
// parameter's group is never reduced and nothing is allocated; a bucketing policy reduces it as
// zeros, and its .grad stays None: nothing is kept past the flush.
TEST(Retention, NoGradKeepsNothing) {
  auto fsdp2 = ReplayOne(OneBucketedParam(ShardMode::kNoGrad, true), "fsdp2");
  ASSERT_TRUE(fsdp2.ok()) << fsdp2.status().ToString();
  EXPECT_EQ(MarkBytes(*fsdp2), (std::vector<Bytes>{0, 0, 0}));
  EXPECT_EQ(fsdp2->peak.allocated_bytes, 0u);
  EXPECT_EQ(fsdp2->counters.flushes, 0u);
  auto bucketed = ReplayOne(OneBucketedParam(ShardMode::kNoGrad, true), "backward-only");
  ASSERT_TRUE(bucketed.ok()) << bucketed.status().ToString();
  EXPECT_EQ(MarkBytes(*bucketed), (std::vector<Bytes>{0, 0, 0}));
  EXPECT_EQ(bucketed->counters.flushes, 1u);
}

TEST(Retention, AlwaysAllocatedKeepsBucketPlusRetiredOutput) {
  auto run = ReplayOne(OneBucketedParam(ShardMode::kView, true), "always-allocated");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  // data 262144 + fresh output 131072 + retired output 131072; then the retired one goes.
  EXPECT_EQ(MarkBytes(*run), (std::vector<Bytes>{524'288, 524'288, 393'216}));
}

TEST(Retention, BypassOutputIsTheGradientUntilZeroGrad) {
  auto run = ReplayOne(OneBucketedParam(ShardMode::kView, true), "unbucketed");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  // Output of 1000 fp32 elements: 4000 B, charged 4096 B.
  EXPECT_EQ(MarkBytes(*run), (std::vector<Bytes>{4'096, 4'096, 0}));
  // The peak: output 4096 + cat temp 2*1000*4 = 8000 -> 8192.
  EXPECT_EQ(run->peak.allocated_bytes, 4'096u + 8'192u);
}

TEST(ExactModel, RoundsEveryRequestUpTo512Bytes) {
  TraceBuilder t(1);
  t.Alloc(1, 1, Category::kOther).Mark("one").Alloc(2, 512, Category::kOther).Mark("two");
  t.Alloc(3, 513, Category::kOther).Mark("three").Alloc(4, 0, Category::kOther).Mark("zero");
  auto run = ReplayOne(t, "backward-only");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(MarkBytes(*run), (std::vector<Bytes>{512, 1'024, 2'048, 2'048}));
}

TEST(Phases, EachStretchHasItsStartPeakAndEnd) {
  TraceBuilder t(1);
  t.Iteration(0).Phase(Phase::kForward).Alloc(1, 1024, Category::kActivation);
  t.Alloc(2, 2048, Category::kActivation).Free(2).Compute(10);
  t.Phase(Phase::kBackward).Free(1).Compute(20);
  auto run = ReplayOne(t, "backward-only");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->phases.size(), 2u);  // the empty stretch before "forward" is left out
  EXPECT_EQ(run->phases[0].phase, Phase::kForward);
  EXPECT_EQ(run->phases[0].start_bytes, 0u);
  EXPECT_EQ(run->phases[0].peak_bytes, 3'072u);
  EXPECT_EQ(run->phases[0].end_bytes, 1'024u);
  EXPECT_DOUBLE_EQ(run->phases[0].compute_us, 10.0);
  EXPECT_EQ(run->phases[1].start_bytes, 1'024u);
  EXPECT_EQ(run->phases[1].peak_bytes, 1'024u);
  EXPECT_EQ(run->phases[1].end_bytes, 0u);
  EXPECT_DOUBLE_EQ(run->compute_us, 30.0);
}

TEST(Replay, BucketCapOverrideAppliesToPoliciesWithoutTheirOwn) {
  // n = 1000 fits a 0.25 MiB bucket but not a 0.001 MiB one (S = 131 at ws 2, fp32).
  auto bucketed = ReplayOne(OneBucketedParam(ShardMode::kView, true), "backward-only");
  auto bypassed = ReplayOne(OneBucketedParam(ShardMode::kView, true), "backward-only", 0.001);
  ASSERT_TRUE(bucketed.ok() && bypassed.ok());
  EXPECT_EQ(bucketed->counters.bucketed, 1u);
  EXPECT_EQ(bypassed->counters.bypasses, 1u);
  EXPECT_DOUBLE_EQ(bypassed->bucket_cap_mb, 0.001);
  EXPECT_EQ(bypassed->canonical, "lifetime=backward,key=identity,cap=0.001");
  // A policy with its own cap ignores the override.
  auto own =
      ReplayOne(OneBucketedParam(ShardMode::kView, true), "lifetime=backward,cap=0.25", 0.001);
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->counters.bucketed, 1u);
}

}  // namespace
}  // namespace bucketsim

namespace bucketsim {
namespace {

// A memory model with a hard capacity, standing in for the caching model's OOM.
class CappedModel final : public MemoryModel {
 public:
  explicit CappedModel(Bytes capacity) : capacity_(capacity) {}
  std::string_view name() const override { return "capped"; }
  Result<Block> Allocate(Bytes requested, StreamId) override {
    if (allocated_ + requested > capacity_) return DeviceError("out of memory");
    allocated_ += requested;
    return Block{next_handle_++, requested};
  }
  void Free(const Block& block) override {
    BUCKETSIM_CHECK(block.handle != 0 && block.charged <= allocated_);
    allocated_ -= block.charged;
  }
  Bytes allocated_bytes() const override { return allocated_; }
  Bytes reserved_bytes() const override { return allocated_; }

 private:
  Bytes capacity_;
  Bytes allocated_ = 0;
  std::uint64_t next_handle_ = 1;
};

// A 12 MiB request (>= 10 MiB) gets a segment of exactly 12 MiB. Used on stream 1
// (record_stream) and freed, the block cannot be handed out again until stream 1 is synced: the
// next 12 MiB request on stream 0 gets a second segment (24 MiB reserved). After the sync both
// blocks are reusable and two more requests need nothing new. Without record_stream the freed
// block is reused at once and one segment is enough.
Bytes PeakReserved(const testing::TraceBuilder& t) {
  ReplayRequest request;
  request.policies = {*ParsePolicySpec("backward-only")};
  request.make_memory_model = *MakeMemoryModelFactory({"caching", "", std::nullopt, std::nullopt});
  Result<ReplayOutcome> outcome = ReplayPolicies(t.Source(), request);
  BUCKETSIM_CHECK(outcome.ok());
  return outcome->runs[0].peak.reserved_bytes;
}

TEST(Replay, RecordStreamDefersReuseUntilTheStreamIsSynced) {
  testing::TraceBuilder deferred(1);
  deferred.Alloc(1, 12 * kMiB, Category::kGrad, 0).RecordStream(1, 1).Free(1);
  deferred.Alloc(2, 12 * kMiB, Category::kGrad, 0).Sync(1).Free(2);
  deferred.Alloc(3, 12 * kMiB, Category::kGrad, 0).Alloc(4, 12 * kMiB, Category::kGrad, 0);
  EXPECT_EQ(PeakReserved(deferred), 24 * kMiB);

  testing::TraceBuilder plain(1);
  plain.Alloc(1, 12 * kMiB, Category::kGrad, 0).Free(1).Alloc(2, 12 * kMiB, Category::kGrad, 0);
  EXPECT_EQ(PeakReserved(plain), 12 * kMiB);
}

// empty_cache returns the freed 12 MiB segment: reserved drops from 12 MiB to 0 between the
// marks, allocated stays 0; the exact model has no cache, so nothing changes there.
TEST(Replay, EmptyCacheReleasesCachedSegments) {
  testing::TraceBuilder t(1);
  t.Alloc(1, 12 * kMiB, Category::kOther).Free(1).Mark("cached").EmptyCache().Mark("emptied");
  ReplayRequest request;
  request.policies = {*ParsePolicySpec("backward-only")};
  request.make_memory_model = *MakeMemoryModelFactory({"caching", "", std::nullopt, std::nullopt});
  Result<ReplayOutcome> outcome = ReplayPolicies(t.Source(), request);
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  const auto& marks = outcome->runs[0].marks;
  ASSERT_EQ(marks.size(), 2u);
  EXPECT_EQ(marks[0].reserved_bytes, 12 * kMiB);
  EXPECT_EQ(marks[1].reserved_bytes, 0u);
  EXPECT_EQ(marks[1].allocated_bytes, 0u);
}

TEST(Replay, AFailedPolicyAllocationStopsTheReplayWithTheEvent) {
  // The bucket's data (262144 B) does not fit in 200000 B: the rs at event 3 fails cleanly,
  // and the buffers the policy lets go on the way out are not freed twice.
  testing::TraceBuilder t(2, 0, 0.25);
  t.Group(1, {0, 1}).Fsdp("layer", {{"w", 2000, DType::kFloat32}});
  t.Iteration(0).Phase(Phase::kForward).Phase(Phase::kBackward);
  t.Rs(0, 0, 1, DType::kFloat32, 1000).Flush();
  Replay replay(*ParsePolicySpec("backward-only"), 0.25, std::make_unique<CappedModel>(200'000),
                std::make_unique<SimBackend>());
  TraceChecker checker(&replay);
  TraceHeader header;
  Status status = t.Source()(header, checker);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kDeviceError);
  EXPECT_EQ(status.message(), "event 3: out of memory");
}

}  // namespace
}  // namespace bucketsim

namespace bucketsim {
namespace {

using testing::ReplayOne;
using testing::TraceBuilder;

// The framework's own collectives are logged in issue order with the policy's; a HYBRID_SHARD
// trace's reductions are each followed by the all-reduce of the reduced shard over the
// replicas. World 4: shard group {0, 1} (id 1), replicas {0, 2} (id 2).
TEST(Replay, LogsTheFrameworksCollectivesAndTheReplicasAllReduce) {
  TraceBuilder t(4, 0, 0);
  t.Group(1, {0, 1}).Group(2, {0, 2}).Fsdp("layer", {{"w", 2000, DType::kFloat32}});
  t.header().replicate_group = 2;
  t.Iteration(0).Phase(Phase::kForward).Alloc(1, 8000, Category::kAllGather, 1);
  t.Collective(EventKind::kAllGather, 1, 1, 1, DType::kBFloat16, 2000).Free(1);
  t.Phase(Phase::kBackward).Alloc(2, 8000, Category::kGrad);
  t.Collective(EventKind::kAllReduce, 2, 1, 1, DType::kFloat32, 2000).Free(2);
  t.Rs(0, 0, 1, DType::kFloat32, 1000).Flush();
  Result<RunResult> run = ReplayOne(t, "fsdp1");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->collectives.size(), 4u);
  const CollectiveRecord& gather = run->collectives[0];
  EXPECT_EQ(gather.kind, CollectiveKind::kAllGather);
  EXPECT_EQ(gather.input_numel, 2000u);
  EXPECT_EQ(gather.output_numel, 4000u);
  EXPECT_EQ(SendBytes(gather), 8000u);  // the gathered bf16, as nccl-tests counts it
  EXPECT_EQ(gather.event_index, 3u);
  EXPECT_EQ(gather.requests, 0u);
  const CollectiveRecord& reduce = run->collectives[1];
  EXPECT_EQ(reduce.kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(SendBytes(reduce), 8000u);
  EXPECT_EQ(run->collectives[2].kind, CollectiveKind::kReduceScatter);
  EXPECT_EQ(run->collectives[2].group, 1u);
  EXPECT_EQ(SendBytes(run->collectives[2]), 8000u);
  const CollectiveRecord& replicas = run->collectives[3];
  EXPECT_EQ(replicas.kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(replicas.group, 2u);
  EXPECT_EQ(replicas.group_size, 2);
  EXPECT_EQ(SendBytes(replicas), 4000u);  // the reduced shard
  EXPECT_EQ(replicas.event_index, run->collectives[2].event_index);
}

}  // namespace
}  // namespace bucketsim
