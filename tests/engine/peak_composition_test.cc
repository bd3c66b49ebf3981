// The peak's composition (its bytes by category, its largest live allocations and the cache's
// fragmentation at it) is recorded once per peak, when the peak is recorded, and its largest are
// ranked once, at the end of a replay, from the allocations that were live at the last recorded
// peak. These tests hold it to the slow, obvious reference: scan every live allocation each time
// a new peak is recorded (the first decrease after it, an empty_cache, or the end), as the replay
// did before. The reference runs its own memory model on the same calls, so the blocks it
// charges and the fragmentation it sees are those of the replay's model.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "engine/replay_policies.h"
#include "testing/trace_builder.h"

namespace bucketsim {
namespace {

using testing::TraceBuilder;

struct Op {
  enum Kind { kAlloc, kFree, kRecordStream, kSync, kEmptyCache } kind;
  std::uint64_t id = 0;
  Bytes bytes = 0;
  Category category = Category::kOther;
  StreamId stream = 0;
};

// A random walk of allocations on two streams whose live count swings up and down with a
// growing amplitude, so the peak is beaten many times, with frees after each new peak,
// record_stream / sync pairs (deferred frees) and an occasional empty_cache.
std::vector<Op> RandomOps(std::uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  std::vector<Op> ops;
  std::vector<std::uint64_t> live;
  std::uint64_t next_id = 1;
  const Category categories[] = {Category::kParam, Category::kActivation, Category::kGrad,
                                 Category::kAllGather, Category::kOther};
  for (int step = 0; step < count; ++step) {
    const double target = 20.0 + 0.02 * step * (1.0 + std::sin(step / 40.0));
    const double u = std::uniform_real_distribution<>(0, 1)(rng);
    const bool grow = static_cast<double>(live.size()) < target;
    if (live.empty() || (grow ? u < 0.7 : u < 0.3)) {
      const double v = std::uniform_real_distribution<>(0, 1)(rng);
      const Bytes cap = v < 0.5 ? 64 * kKiB : v < 0.8 ? 2 * kMiB : v < 0.95 ? 12 * kMiB : 40 * kMiB;
      // Some sizes repeat exactly, so equal blocks compete.
      const Bytes bytes = rng() % 4 == 0 ? kMiB : 1 + rng() % cap;
      ops.push_back(
          {Op::kAlloc, next_id, bytes, categories[rng() % 5], static_cast<StreamId>(rng() % 2)});
      live.push_back(next_id++);
    } else if (u < 0.9) {
      const std::size_t at = rng() % live.size();
      ops.push_back({Op::kFree, live[at]});
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(at));
    } else if (u < 0.96) {
      ops.push_back({Op::kRecordStream, live[rng() % live.size()], 0, Category::kOther,
                     static_cast<StreamId>(rng() % 2)});
    } else if (u < 0.995) {
      ops.push_back({Op::kSync, 0, 0, Category::kOther, static_cast<StreamId>(rng() % 2)});
    } else {
      ops.push_back({Op::kEmptyCache});
    }
  }
  return ops;
}

TraceBuilder Build(const std::vector<Op>& ops) {
  TraceBuilder t(1);
  for (const Op& op : ops) {
    switch (op.kind) {
      case Op::kAlloc:
        t.Alloc(op.id, op.bytes, op.category, op.stream);
        break;
      case Op::kFree:
        t.Free(op.id);
        break;
      case Op::kRecordStream:
        t.RecordStream(op.id, op.stream);
        break;
      case Op::kSync:
        t.Sync(op.stream);
        break;
      case Op::kEmptyCache:
        t.EmptyCache();
        break;
    }
  }
  return t;
}

struct Reference {
  std::vector<LiveAllocation> largest;
  std::optional<FragmentationInfo> fragmentation;
  Bytes peak_bytes = 0;
  CategoryBytes by_category{};  // what was live at the peak, by category
};

// The per-peak scan, on its own memory model.
Reference Scan(const std::vector<Op>& ops, MemoryModel& model, int keep) {
  struct Live {
    Block block;
    Category category;
    EventIndex since;
    std::vector<StreamId> used_on;
  };
  std::map<std::uint64_t, Live> live;
  Reference ref;
  Bytes current = 0;
  bool unrecorded = false;
  auto record = [&] {
    if (!unrecorded) return;
    unrecorded = false;
    std::vector<std::pair<std::uint64_t, const Live*>> all;
    for (const auto& [id, a] : live) all.push_back({id, &a});
    // (bytes desc, since asc) is a total order here: every trace allocation has its own event.
    std::sort(all.begin(), all.end(), [](const auto& x, const auto& y) {
      return x.second->block.charged != y.second->block.charged
                 ? x.second->block.charged > y.second->block.charged
                 : x.second->since < y.second->since;
    });
    ref.largest.clear();
    for (std::size_t i = 0; i < all.size() && i < static_cast<std::size_t>(keep); ++i) {
      const Live& a = *all[i].second;
      ref.largest.push_back(
          {a.category, a.block.charged, "trace alloc id " + std::to_string(all[i].first), a.since});
    }
    ref.fragmentation = model.Fragmentation();
    ref.by_category = {};
    for (const auto& [id, a] : live) {
      ref.by_category[static_cast<std::size_t>(a.category)] += a.block.charged;
    }
  };
  for (std::size_t index = 0; index < ops.size(); ++index) {
    const Op& op = ops[index];
    switch (op.kind) {
      case Op::kAlloc: {
        Block block = *model.Allocate(op.bytes, op.stream);
        live[op.id] = {block, op.category, index, {}};
        current += block.charged;
        if (current > ref.peak_bytes) {
          ref.peak_bytes = current;
          unrecorded = true;
        }
        break;
      }
      case Op::kFree: {
        record();
        Live& a = live.at(op.id);
        if (a.used_on.empty()) {
          model.Free(a.block);
        } else {
          model.FreeWithPendingStreams(a.block, a.used_on);
        }
        current -= a.block.charged;
        live.erase(op.id);
        break;
      }
      case Op::kRecordStream:
        live.at(op.id).used_on.push_back(op.stream);
        break;
      case Op::kSync:
        model.StreamSynchronized(op.stream);
        break;
      case Op::kEmptyCache:
        record();
        model.EmptyCache();
        break;
    }
  }
  record();
  return ref;
}

void ExpectSameFragmentation(const std::optional<FragmentationInfo>& got,
                             const std::optional<FragmentationInfo>& want) {
  ASSERT_EQ(got.has_value(), want.has_value());
  if (!got) return;
  EXPECT_EQ(got->reserved_minus_allocated_bytes, want->reserved_minus_allocated_bytes);
  EXPECT_EQ(got->inactive_split_bytes, want->inactive_split_bytes);
  EXPECT_EQ(got->largest_free_block_bytes, want->largest_free_block_bytes);
  ASSERT_EQ(got->segments.size(), want->segments.size());
  for (std::size_t i = 0; i < got->segments.size(); ++i) {
    EXPECT_EQ(got->segments[i].stream, want->segments[i].stream) << i;
    EXPECT_EQ(got->segments[i].small_pool, want->segments[i].small_pool) << i;
    EXPECT_EQ(got->segments[i].count, want->segments[i].count) << i;
    EXPECT_EQ(got->segments[i].bytes, want->segments[i].bytes) << i;
  }
}

void CheckAgainstScan(const std::string& allocator, std::uint64_t seed) {
  SCOPED_TRACE(allocator + " seed " + std::to_string(seed));
  const std::vector<Op> ops = RandomOps(seed, 3000);
  ReplayRequest request;
  request.policies = {*ParsePolicySpec("backward-only")};
  request.make_memory_model = *MakeMemoryModelFactory({allocator, "", std::nullopt, std::nullopt});
  Result<ReplayOutcome> outcome = ReplayPolicies(Build(ops).Source(), request);
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  const RunResult& run = outcome->runs.front();

  Result<std::unique_ptr<MemoryModel>> model = request.make_memory_model(TraceHeader());
  ASSERT_TRUE(model.ok());
  const Reference ref = Scan(ops, **model, ReplayOptions{}.largest_at_peak);
  EXPECT_EQ(run.peak.allocated_bytes, ref.peak_bytes);
  EXPECT_EQ(run.peak.by_category, ref.by_category);
  ASSERT_EQ(run.peak.largest.size(), ref.largest.size());
  for (std::size_t i = 0; i < ref.largest.size(); ++i) {
    EXPECT_EQ(run.peak.largest[i].what, ref.largest[i].what) << i;
    EXPECT_EQ(run.peak.largest[i].bytes, ref.largest[i].bytes) << i;
    EXPECT_EQ(run.peak.largest[i].since, ref.largest[i].since) << i;
    EXPECT_EQ(run.peak.largest[i].category, ref.largest[i].category) << i;
  }
  ExpectSameFragmentation(run.peak.fragmentation, ref.fragmentation);
}

TEST(PeakComposition, EqualsAScanAtEveryPeakWithTheCachingModel) {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) CheckAgainstScan("caching", seed);
}

TEST(PeakComposition, EqualsAScanAtEveryPeakWithTheExactModel) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) CheckAgainstScan("exact", seed);
}

// The first peak stays the peak: what is freed after it is still listed, what is allocated
// after it is not, and a later climb that only equals it does not replace it.
TEST(PeakComposition, ListsWhatWasLiveAtThePeakNotAfter) {
  TraceBuilder t(1);
  t.Alloc(1, 4096, Category::kActivation).Alloc(2, 8192, Category::kParam);  // peak 12288
  t.Free(1).Free(2);
  t.Alloc(3, 12288, Category::kOther);  // equals the peak: not a new one
  Result<RunResult> run = testing::ReplayOne(t, "backward-only");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->peak.largest.size(), 2u);
  EXPECT_EQ(run->peak.largest[0].what, "trace alloc id 2");
  EXPECT_EQ(run->peak.largest[0].since, 1u);
  EXPECT_EQ(run->peak.largest[1].what, "trace alloc id 1");
  EXPECT_EQ(run->peak.allocated_bytes, 12288u);
}

// The unbucketed policy reduces a gradient on its own: the bypass output (1000 fp32 elements,
// 4096 B charged) and then the cat temporary (ws 2: 8000 B, 8192 B charged) are allocated, a
// peak of 12288 B; the output becomes the gradient, and the release of the temporary is the
// first decrease after the peak, which records it. The temporary was live at the peak, so the
// peak lists it, the largest first.
TEST(PeakComposition, ListsAPolicyBufferWhoseReleaseRecordsThePeak) {
  TraceBuilder t(2);
  t.Group(1, {0, 1}).Fsdp("layer", {{"w", 2000, DType::kFloat32}});
  t.Iteration(0).Phase(Phase::kForward).Phase(Phase::kBackward);
  t.Rs(0, 0, 1, DType::kFloat32, 1000).Flush().Phase(Phase::kStep).ZeroGrad();
  Result<RunResult> run = testing::ReplayOne(t, "unbucketed");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->peak.allocated_bytes, 4'096u + 8'192u);
  ASSERT_EQ(run->peak.largest.size(), 2u);
  EXPECT_EQ(run->peak.largest[0].category, Category::kRsCatTemp);
  EXPECT_EQ(run->peak.largest[0].bytes, 8'192u);
  EXPECT_EQ(run->peak.largest[1].category, Category::kBypassOutput);
  EXPECT_EQ(run->peak.largest[1].bytes, 4'096u);
}

}  // namespace
}  // namespace bucketsim
