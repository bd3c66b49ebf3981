#include "memory/caching_allocator_model.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

// Expected values below are derived by hand from reference/caching_allocator.md; MiB = 1,048,576.

AllocConf Conf(std::string_view text) {
  auto conf = ParseAllocConf(text);
  BUCKETSIM_CHECK(conf.ok());
  return *conf;
}

Block Alloc(CachingAllocatorModel& model, Bytes bytes, StreamId stream = 0) {
  auto block = model.Allocate(bytes, stream);
  EXPECT_TRUE(block.ok()) << block.status().ToString();
  return block.ok() ? *block : Block{};
}

std::int64_t I(Bytes bytes) { return static_cast<std::int64_t>(bytes); }

// The address of a live block, found through the snapshot (blocks are keyed by handle only).
Bytes SegmentBase(const CachingAllocatorModel& model, std::size_t index) {
  return model.Snapshot().at(index).address;
}

TEST(RoundSize, MinimumBlockAndMultiplesOf512) {
  AllocConf conf;
  EXPECT_EQ(RoundSize(0, conf), 512u);
  EXPECT_EQ(RoundSize(1, conf), 512u);
  EXPECT_EQ(RoundSize(511, conf), 512u);
  EXPECT_EQ(RoundSize(512, conf), 512u);
  EXPECT_EQ(RoundSize(513, conf), 1024u);
  EXPECT_EQ(RoundSize(1200, conf), 1536u);
  EXPECT_EQ(RoundSize(kMiB, conf), kMiB);
  EXPECT_EQ(RoundSize(kMiB + 1, conf), 1'049'088u);  // 1 MiB + 512
  EXPECT_EQ(RoundSize(5 * kMiB + 1, conf), 5'243'392u);
}

TEST(RoundSize, RoundupPower2DivisionsFour) {
  AllocConf conf = Conf("roundup_power2_divisions:4");
  // 5 MiB+1: floor2 = 4 MiB, step = 4 MiB >> log2(4) = 1 MiB, so 6 MiB.
  EXPECT_EQ(RoundSize(5 * kMiB + 1, conf), 6'291'456u);
  // 300 MiB+1: floor2 = 256 MiB, step 64 MiB, so 320 MiB.
  EXPECT_EQ(RoundSize(300 * kMiB + 1, conf), 320 * kMiB);
  // 1200 <= 512 * 4 = 2048, so the guard keeps plain 512 rounding: 1536 (not the docs' 1280).
  EXPECT_EQ(RoundSize(1200, conf), 1536u);
  // Powers of two are returned unchanged.
  EXPECT_EQ(RoundSize(8 * kMiB, conf), 8 * kMiB);
  // 300 MiB+1 with 8 divisions: step 32 MiB, 320 MiB; with 2: step 128 MiB, 384 MiB.
  EXPECT_EQ(RoundSize(300 * kMiB + 1, Conf("roundup_power2_divisions:8")), 320 * kMiB);
  EXPECT_EQ(RoundSize(300 * kMiB + 1, Conf("roundup_power2_divisions:2")), 384 * kMiB);
}

TEST(AllocationSize, SegmentSizeEdgesAt1And10MiB) {
  EXPECT_EQ(AllocationSize(512), 2 * kMiB);
  EXPECT_EQ(AllocationSize(kMiB), 2 * kMiB);         // still small
  EXPECT_EQ(AllocationSize(kMiB + 512), 20 * kMiB);  // large, below 10 MiB
  EXPECT_EQ(AllocationSize(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(AllocationSize(10 * kMiB), 10 * kMiB);        // own segment from 10 MiB
  EXPECT_EQ(AllocationSize(10 * kMiB + 512), 12 * kMiB);  // rounded up to 2 MiB
  EXPECT_EQ(AllocationSize(25 * kMiB), 26 * kMiB);
}

// §6.1: A 25 MiB, B 12.5 MiB, free A, C 30 MiB, then D 20 MiB.
TEST(CachingAllocatorModel, WorkedSequence61) {
  CachingAllocatorModel model;
  // A: 25 MiB >= 10 MiB gets a 26 MiB segment; remainder 1 MiB is not > 1 MiB, so no split.
  Block a = Alloc(model, 25 * kMiB);
  EXPECT_EQ(a.charged, 26 * kMiB);
  EXPECT_EQ(model.allocated_bytes(), 27'262'976u);
  EXPECT_EQ(model.reserved_bytes(), 27'262'976u);
  EXPECT_EQ(model.stats().segment.all.current, 1);
  EXPECT_EQ(model.stats().requested_bytes.all.current, I(25 * kMiB));
  // B: 14 MiB segment, remainder 1.5 MiB > 1 MiB splits off.
  Block b = Alloc(model, 13'107'200);
  EXPECT_EQ(b.charged, 13'107'200u);
  EXPECT_EQ(model.allocated_bytes(), 40'370'176u);
  EXPECT_EQ(model.reserved_bytes(), 41'943'040u);
  EXPECT_EQ(model.stats().inactive_split.all.current, 1);
  EXPECT_EQ(model.stats().inactive_split_bytes.all.current, 1'572'864);
  EXPECT_EQ(model.stats().segment.all.current, 2);
  // free A: unsplit, returns whole; inactive_split unchanged.
  model.Free(a);
  EXPECT_EQ(model.allocated_bytes(), 13'107'200u);
  EXPECT_EQ(model.reserved_bytes(), 41'943'040u);
  EXPECT_EQ(model.stats().inactive_split_bytes.all.current, 1'572'864);
  EXPECT_EQ(model.stats().largest_free_block_bytes, 26 * kMiB);
  // C: no free block >= 30 MiB among {1.5, 26}: new 30 MiB segment, no split.
  Block c = Alloc(model, 31'457'280);
  EXPECT_EQ(c.charged, 30 * kMiB);
  EXPECT_EQ(model.allocated_bytes(), 44'564'480u);
  EXPECT_EQ(model.reserved_bytes(), 73'400'320u);
  EXPECT_EQ(model.stats().segment.all.current, 3);
  CachingAllocatorStats stats = model.stats();
  EXPECT_EQ(stats.allocated_bytes.all.peak, 44'564'480);
  EXPECT_EQ(stats.reserved_bytes.all.peak, 73'400'320);
  EXPECT_EQ(stats.requested_bytes.all.current, 44'564'480);  // 12.5 + 30 MiB
  // D: best fit is the 26 MiB block; remainder 6 MiB splits. inactive_split: 2 blocks, 7.5 MiB.
  Block d = Alloc(model, 20 * kMiB);
  EXPECT_EQ(d.charged, 20 * kMiB);
  EXPECT_EQ(model.allocated_bytes(), 65'536'000u);
  EXPECT_EQ(model.reserved_bytes(), 73'400'320u);
  EXPECT_EQ(model.stats().inactive_split.all.current, 2);
  EXPECT_EQ(model.stats().inactive_split_bytes.all.current, I(7 * kMiB + kMiB / 2));
  EXPECT_EQ(model.stats().segment.large_pool.current, 3);
  EXPECT_EQ(model.stats().segment.small_pool.current, 0);
}

// §6.2: the same sequence with expandable segments (20 MiB large pages).
// §6.1 after "free A": 40 MiB reserved in two large segments on stream 0 (26 MiB, 14 MiB),
// 12.5 MiB allocated (B); the free pieces are A's whole 26 MiB block and B's 1.5 MiB remainder,
// of which only the remainder is a piece of a split block.
TEST(CachingAllocatorModel, FragmentationDescribesTheCache) {
  CachingAllocatorModel model;
  Block a = Alloc(model, 25 * kMiB);
  Block small = Alloc(model, 4096, /*stream=*/1);
  Alloc(model, 13'107'200);
  model.Free(a);
  std::optional<FragmentationInfo> info = model.Fragmentation();
  ASSERT_TRUE(info.has_value());
  // Reserved 40 MiB + stream 1's 2 MiB small segment; allocated 12.5 MiB + 4096 B.
  EXPECT_EQ(info->reserved_minus_allocated_bytes, 42 * kMiB - 13'107'200 - 4096);
  // Split remainders: B's 1.5 MiB and the small segment's 2 MiB - 4096.
  EXPECT_EQ(info->inactive_split_bytes, 1'572'864 + 2 * kMiB - 4096);
  EXPECT_EQ(info->largest_free_block_bytes, 26 * kMiB);
  ASSERT_EQ(info->segments.size(), 2u);
  EXPECT_EQ(info->segments[0].stream, 0u);
  EXPECT_FALSE(info->segments[0].small_pool);
  EXPECT_EQ(info->segments[0].count, 2u);
  EXPECT_EQ(info->segments[0].bytes, 40 * kMiB);
  EXPECT_EQ(info->segments[1].stream, 1u);
  EXPECT_TRUE(info->segments[1].small_pool);
  EXPECT_EQ(info->segments[1].bytes, 2 * kMiB);
  model.Free(small);
}

// §6.1 continued: the peaks over the sequence A, B, free A, C. A is freed before C, so active
// bytes peak at max(26 + 12.5, 12.5 + 30) MiB = 42.5 MiB (A is charged its whole 26 MiB block);
// inactive_split peaks at B's 1.5 MiB remainder; three segments; no retries without a capacity.
TEST(CachingAllocatorModel, TotalsArePeaksOverTheRun) {
  CachingAllocatorModel model;
  Block a = Alloc(model, 25 * kMiB);
  Alloc(model, 13'107'200);
  model.Free(a);
  Alloc(model, 30 * kMiB);
  std::optional<AllocatorTotals> totals = model.Totals();
  ASSERT_TRUE(totals.has_value());
  EXPECT_EQ(totals->peak_active_bytes, 44'564'480u);
  EXPECT_EQ(totals->peak_inactive_split_bytes, 1'572'864u);
  EXPECT_EQ(totals->peak_segments, 3u);
  EXPECT_EQ(totals->num_alloc_retries, 0u);
  EXPECT_EQ(totals->num_ooms, 0u);
}

TEST(CachingAllocatorModel, WorkedSequence62Expandable) {
  CachingAllocatorModel model(Conf("expandable_segments:True"));
  // A: maps ceil(25/20) = 2 pages = 40 MiB, split at 25 MiB (remainder >= 512).
  Block a = Alloc(model, 25 * kMiB);
  EXPECT_EQ(a.charged, 25 * kMiB);
  EXPECT_EQ(model.reserved_bytes(), 40 * kMiB);
  // B: best fit is the 15 MiB free block; 2.5 MiB stays free.
  Block b = Alloc(model, 13'107'200);
  EXPECT_EQ(model.allocated_bytes(), 37 * kMiB + kMiB / 2);
  EXPECT_EQ(model.reserved_bytes(), 40 * kMiB);
  // free A: a 25 MiB hole at offset 0, B is live so no merge.
  model.Free(a);
  EXPECT_EQ(model.allocated_bytes(), 12 * kMiB + kMiB / 2);
  // C: the 2.5 MiB block before the tail plus 27.5 MiB more, mapped as 2 pages (40 MiB);
  // merged 42.5 MiB, C takes 30, 12.5 MiB stay free.
  Block c = Alloc(model, 30 * kMiB);
  EXPECT_EQ(model.allocated_bytes(), 42 * kMiB + kMiB / 2);
  EXPECT_EQ(model.reserved_bytes(), 80 * kMiB);
  CachingAllocatorStats stats = model.stats();
  EXPECT_EQ(stats.segment.all.current, 0);  // maps are not cudaMalloc segments
  EXPECT_EQ(stats.segment.all.peak, 0);
  EXPECT_EQ(stats.num_device_alloc, 2);  // two segment_map calls
  EXPECT_EQ(stats.inactive_split.all.current, 0);
  EXPECT_EQ(stats.largest_free_block_bytes, 25 * kMiB);
  // C starts where the 2.5 MiB block was: 37.5 MiB into the segment.
  auto snapshot = model.Snapshot();
  ASSERT_EQ(snapshot.size(), 1u);
  ASSERT_GE(snapshot[0].blocks.size(), 5u);
  EXPECT_EQ(snapshot[0].blocks[2].address - snapshot[0].address, 37 * kMiB + kMiB / 2);
  EXPECT_EQ(snapshot[0].blocks[2].state, BlockState::kAllocated);
  EXPECT_EQ(snapshot[0].blocks[4].state, BlockState::kUnmapped);

  // empty_cache unmaps whole pages inside free blocks: only page [0, 20) of the 25 MiB hole
  // (page [60, 80) holds C's tail, 60..67.5). Reserved 80 -> 60 MiB.
  model.EmptyCache();
  EXPECT_EQ(model.reserved_bytes(), 60 * kMiB);
  EXPECT_EQ(model.stats().num_device_free, 1);
  // Freeing everything and emptying again unmaps the rest and releases the segment.
  model.Free(b);
  model.Free(c);
  model.EmptyCache();
  EXPECT_EQ(model.reserved_bytes(), 0u);
  EXPECT_TRUE(model.Snapshot().empty());
}

struct SingleRequest {
  Bytes request;
  Bytes allocated;
  Bytes reserved;
  bool small_pool;
  std::int64_t inactive_split_bytes;
};

// §6.3, one fresh allocator per row.
TEST(CachingAllocatorModel, SingleRequestTable63) {
  const SingleRequest rows[] = {
      {1, 512, 2 * kMiB, true, 0},  // small pool: inactive_split counted per pool, see below
      {1200, 1536, 2 * kMiB, true, 0},
      {kMiB, kMiB, 2 * kMiB, true, 0},
      {kMiB + 1, 1'049'088, 20 * kMiB, false, 19'922'432},  // 20 MiB - 1,049,088
      {9 * kMiB, 9 * kMiB, 20 * kMiB, false, I(11 * kMiB)},
      {10 * kMiB, 10 * kMiB, 10 * kMiB, false, 0},  // remainder 0
      {18 * kMiB + kMiB / 2, 19'398'656, 20 * kMiB, false, I(kMiB + kMiB / 2)},
      {19 * kMiB, 20 * kMiB, 20 * kMiB, false, 0},  // remainder exactly 1 MiB: no split
  };
  for (const SingleRequest& row : rows) {
    CachingAllocatorModel model;
    Block block = Alloc(model, row.request);
    EXPECT_EQ(block.charged, row.allocated) << row.request;
    EXPECT_EQ(model.allocated_bytes(), row.allocated) << row.request;
    EXPECT_EQ(model.reserved_bytes(), row.reserved) << row.request;
    CachingAllocatorStats stats = model.stats();
    EXPECT_EQ(stats.segment.small_pool.current, row.small_pool ? 1 : 0) << row.request;
    EXPECT_EQ(stats.segment.large_pool.current, row.small_pool ? 0 : 1) << row.request;
    // Small rows split too (remainder >= 512): the free rest is inactive_split.
    const std::int64_t split_bytes =
        row.small_pool ? I(2 * kMiB - row.allocated) : row.inactive_split_bytes;
    EXPECT_EQ(stats.inactive_split_bytes.all.current, split_bytes) << row.request;
  }
}

TEST(CachingAllocatorModel, ThreeOneMiBAllocationsNeedTwoSmallSegments) {
  CachingAllocatorModel model;
  Alloc(model, kMiB);  // 2 MiB segment, 1 MiB free remainder
  EXPECT_EQ(model.reserved_bytes(), 2 * kMiB);
  Alloc(model, kMiB);  // takes the exact remainder
  EXPECT_EQ(model.reserved_bytes(), 2 * kMiB);
  EXPECT_EQ(model.stats().inactive_split.all.current, 0);
  Alloc(model, kMiB);  // second segment
  EXPECT_EQ(model.reserved_bytes(), 4 * kMiB);
  EXPECT_EQ(model.stats().segment.small_pool.current, 2);
}

TEST(CachingAllocatorModel, CachedBlocksArePerStream) {
  CachingAllocatorModel model;
  // 5 MiB on stream 1 (20 MiB segment), freed; 5 MiB on stream 2 cannot reuse it.
  model.Free(Alloc(model, 5 * kMiB, 1));
  Alloc(model, 5 * kMiB, 2);
  EXPECT_EQ(model.reserved_bytes(), 40 * kMiB);
  EXPECT_EQ(model.allocated_bytes(), 5 * kMiB);
}

TEST(CachingAllocatorModel, BestFitStaysWithinTheRequestingStream) {
  CachingAllocatorModel model;
  // Stream 0 and stream 1 each hold a 20 MiB segment split 5 + 15.
  Block s0 = Alloc(model, 5 * kMiB, 0);
  Alloc(model, 5 * kMiB, 1);
  model.Free(s0);  // stream 0's segment is whole again: one free 20 MiB block
  // 12 MiB on stream 1: its own 15 MiB block fits (split 12 + 3); stream 0's is not looked at.
  Alloc(model, 12 * kMiB, 1);
  EXPECT_EQ(model.reserved_bytes(), 40 * kMiB);
  // 16 MiB on stream 1: only its 3 MiB block is free there, so a new 16 MiB segment although
  // stream 0 caches 20 MiB.
  Alloc(model, 16 * kMiB, 1);
  EXPECT_EQ(model.reserved_bytes(), 56 * kMiB);
  // 16 MiB on stream 0 takes its cached 20 MiB block (remainder 4 MiB splits).
  Alloc(model, 16 * kMiB, 0);
  EXPECT_EQ(model.reserved_bytes(), 56 * kMiB);
  EXPECT_EQ(model.allocated_bytes(), 5 * kMiB + 12 * kMiB + 16 * kMiB + 16 * kMiB);
}

TEST(CachingAllocatorModel, MaxSplitSizeRulesAAndB) {
  const AllocConf conf = Conf("max_split_size_mb:100");
  auto with_cached_200 = [](const AllocConf& c) {
    CachingAllocatorModel model(c);
    // 200 MiB >= max_split_size: own 200 MiB segment, oversize, never split.
    model.Free(Alloc(model, 200 * kMiB));
    EXPECT_EQ(model.stats().oversize_segments.current, 1);
    return model;
  };
  {
    // Rule A: 50 MiB < 100 MiB may not take the 200 MiB block: new 50 MiB segment.
    CachingAllocatorModel model = with_cached_200(conf);
    EXPECT_EQ(Alloc(model, 50 * kMiB).charged, 50 * kMiB);
    EXPECT_EQ(model.reserved_bytes(), 250 * kMiB);
  }
  {
    // 190 MiB: 200 < 190 + 20, so it takes the block unsplit and is charged 200 MiB.
    CachingAllocatorModel model = with_cached_200(conf);
    EXPECT_EQ(Alloc(model, 190 * kMiB).charged, 200 * kMiB);
    EXPECT_EQ(model.allocated_bytes(), 200 * kMiB);
    EXPECT_EQ(model.reserved_bytes(), 200 * kMiB);
    EXPECT_EQ(model.stats().oversize_allocations.current, 1);
  }
  {
    // Rule B: 200 >= 170 + 20, so 170 MiB gets its own segment.
    CachingAllocatorModel model = with_cached_200(conf);
    EXPECT_EQ(Alloc(model, 170 * kMiB).charged, 170 * kMiB);
    EXPECT_EQ(model.reserved_bytes(), 370 * kMiB);
  }
  {
    // With max_non_split_rounding_mb:40: 200 < 170 + 40, so it may.
    CachingAllocatorModel model =
        with_cached_200(Conf("max_split_size_mb:100,max_non_split_rounding_mb:40"));
    EXPECT_EQ(Alloc(model, 170 * kMiB).charged, 200 * kMiB);
    EXPECT_EQ(model.reserved_bytes(), 200 * kMiB);
  }
}

TEST(CachingAllocatorModel, RoundingEdgesReachTheRightPoolAndSegment) {
  CachingAllocatorModel model;
  EXPECT_EQ(Alloc(model, 511).charged, 512u);
  EXPECT_EQ(Alloc(model, 513).charged, 1024u);
  // 1 MiB is still small and fits the rest of the first segment (2 MiB - 1536 >= 1 MiB).
  EXPECT_EQ(Alloc(model, kMiB).charged, kMiB);
  EXPECT_EQ(model.stats().segment.small_pool.current, 1);
  // 1 MiB + 1 -> 1,049,088 is large: a 20 MiB segment.
  EXPECT_EQ(Alloc(model, kMiB + 1).charged, 1'049'088u);
  EXPECT_EQ(model.stats().segment.large_pool.current, 1);
  // On stream 0 a 10 MiB request would take the cached 19 MiB rest (any larger block fits), so
  // the 10 MiB edges run on streams of their own.
  // 10 MiB - 1 rounds to exactly 10 MiB: its own 10 MiB segment, nothing to split.
  EXPECT_EQ(Alloc(model, 10 * kMiB - 1, 1).charged, 10 * kMiB);
  EXPECT_EQ(model.stats().segment.large_pool.current, 2);
  // 10 MiB + 1 -> 10,486,272 in a 12 MiB segment; remainder 2,096,640 > 1 MiB splits.
  EXPECT_EQ(Alloc(model, 10 * kMiB + 1, 2).charged, 10'486'272u);
  EXPECT_EQ(model.reserved_bytes(), 2 * kMiB + 20 * kMiB + 10 * kMiB + 12 * kMiB);
  // inactive_split: small rest 2 MiB - (512 + 1024 + 1 MiB) = 1,047,040; 20 MiB - 1,049,088 =
  // 19,922,432; 12 MiB rest 2,096,640.
  EXPECT_EQ(model.stats().inactive_split_bytes.all.current, 1'047'040 + 19'922'432 + 2'096'640);
  EXPECT_EQ(model.stats().inactive_split.all.current, 3);
  EXPECT_EQ(model.stats().inactive_split.small_pool.current, 1);
}

TEST(CachingAllocatorModel, SplitThresholdsSmallAtLeast512LargeMoreThan1MiB) {
  CachingAllocatorModel model;
  // Small: 1 MiB then 1 MiB - 512 leaves exactly 512 B: split (>= 512).
  Alloc(model, kMiB);
  EXPECT_EQ(Alloc(model, kMiB - 512).charged, kMiB - 512);
  EXPECT_EQ(model.stats().inactive_split_bytes.small_pool.current, 512);
  // The 512 B rest serves a 1-byte request whole: no new segment, no split left.
  EXPECT_EQ(Alloc(model, 1).charged, 512u);
  EXPECT_EQ(model.stats().segment.small_pool.current, 1);
  EXPECT_EQ(model.stats().inactive_split.small_pool.current, 0);
  // Large: 19 MiB - 512 leaves 1 MiB + 512 > 1 MiB: split; 19 MiB leaves exactly 1 MiB: not.
  EXPECT_EQ(Alloc(model, 19 * kMiB - 512).charged, 19 * kMiB - 512);
  EXPECT_EQ(model.stats().inactive_split_bytes.large_pool.current, I(kMiB + 512));
  EXPECT_EQ(Alloc(model, 19 * kMiB).charged, 20 * kMiB);
  EXPECT_EQ(model.stats().inactive_split.large_pool.current, 1);
}

TEST(CachingAllocatorModel, FreeMergesWithFreeNeighboursOnly) {
  CachingAllocatorModel model;
  // One 20 MiB segment: a 2, b 3, c 4 MiB, rest 11 MiB free.
  Block a = Alloc(model, 2 * kMiB);
  Block b = Alloc(model, 3 * kMiB);
  Block c = Alloc(model, 4 * kMiB);
  EXPECT_EQ(model.stats().segment.all.current, 1);
  model.Free(b);  // neighbours a and c live: a 3 MiB hole, a second inactive split block
  EXPECT_EQ(model.stats().inactive_split.all.current, 2);
  EXPECT_EQ(model.stats().inactive_split_bytes.all.current, I(14 * kMiB));
  model.Free(c);  // merges with the hole before and the 11 MiB after: one 18 MiB block
  EXPECT_EQ(model.stats().inactive_split.all.current, 1);
  EXPECT_EQ(model.stats().inactive_split_bytes.all.current, I(18 * kMiB));
  EXPECT_EQ(model.stats().largest_free_block_bytes, 18 * kMiB);
  model.Free(a);  // the whole segment is one free unsplit block: no longer inactive_split
  EXPECT_EQ(model.stats().inactive_split.all.current, 0);
  EXPECT_EQ(model.stats().inactive_split_bytes.all.current, 0);
  EXPECT_EQ(model.Snapshot().at(0).blocks.size(), 1u);
}

TEST(CachingAllocatorModel, PendingFreeIsReusableOnlyAfterEveryStreamSynchronizes) {
  CachingAllocatorModel model;
  Block a = Alloc(model, 1024);                // small segment: a at offset 0, rest free
  model.FreeWithPendingStreams(a, {1, 2, 0});  // stream 0 is a's own stream: ignored
  // allocated drops at once, active does not.
  EXPECT_EQ(model.allocated_bytes(), 0u);
  EXPECT_EQ(model.stats().active_bytes.all.current, 1024);
  EXPECT_EQ(model.stats().requested_bytes.all.current, 1024);
  // A new 1 KiB request cannot take a's block: it takes offset 1024 of the rest.
  Alloc(model, 1024);
  auto blocks = model.Snapshot().at(0).blocks;
  EXPECT_EQ(blocks.at(0).state, BlockState::kPendingFree);
  EXPECT_EQ(blocks.at(1).state, BlockState::kAllocated);
  EXPECT_EQ(blocks.at(1).address - SegmentBase(model, 0), 1024u);
  model.StreamSynchronized(1);
  EXPECT_EQ(model.Snapshot().at(0).blocks.at(0).state, BlockState::kPendingFree);
  model.StreamSynchronized(2);  // the last pending stream: a's block is free
  EXPECT_EQ(model.Snapshot().at(0).blocks.at(0).state, BlockState::kFree);
  EXPECT_EQ(model.stats().active_bytes.all.current, 1024);  // only the second block
  // Best fit now picks a's 1024 B block at offset 0 over the large rest.
  Alloc(model, 1000);
  EXPECT_EQ(model.Snapshot().at(0).blocks.at(0).state, BlockState::kAllocated);
  EXPECT_EQ(model.reserved_bytes(), 2 * kMiB);
}

// active counts a block until its free completes, allocation until it is requested: they part
// at the first free with pending streams, and from there each keeps its own peak and totals.
TEST(CachingAllocatorModel, ActiveKeepsItsOwnPeakAndTotalsFromTheFirstPendingFree) {
  CachingAllocatorModel model;
  Block a = Alloc(model, 1024);
  Block b = Alloc(model, 2048);
  model.Free(b);
  auto expect = [](const AllocatorStat& stat, std::int64_t current, std::int64_t peak,
                   std::int64_t allocated, std::int64_t freed) {
    EXPECT_EQ(stat.current, current);
    EXPECT_EQ(stat.peak, peak);
    EXPECT_EQ(stat.allocated, allocated);
    EXPECT_EQ(stat.freed, freed);
  };
  CachingAllocatorStats stats = model.stats();
  expect(stats.active.all, 1, 2, 2, 1);
  expect(stats.active_bytes.all, 1024, 3072, 3072, 2048);
  model.FreeWithPendingStreams(a, {1});  // a stays active until stream 1 synchronizes
  Alloc(model, 4096);
  Alloc(model, 512);
  stats = model.stats();
  // allocation: a, b, c, d allocated; b and a freed. active: a not yet freed.
  expect(stats.allocation.all, 2, 2, 4, 2);
  expect(stats.allocated_bytes.all, 4608, 4608, 7680, 3072);
  expect(stats.active.all, 3, 3, 4, 1);
  expect(stats.active_bytes.all, 5632, 5632, 7680, 2048);
  model.StreamSynchronized(1);
  stats = model.stats();
  expect(stats.active.all, 2, 3, 4, 2);
  expect(stats.active_bytes.all, 4608, 5632, 7680, 3072);
  expect(stats.active_bytes.small_pool, 4608, 5632, 7680, 3072);  // every block is small
  expect(stats.active_bytes.large_pool, 0, 0, 0, 0);
  EXPECT_EQ(model.Totals()->peak_active_bytes, 5632u);
}

TEST(CachingAllocatorModel, PendingFreeOfOwnStreamOnlyIsAnOrdinaryFree) {
  CachingAllocatorModel model;
  Block a = Alloc(model, 1024, 3);
  model.FreeWithPendingStreams(a, {3});
  EXPECT_EQ(model.stats().active.all.current, 0);
  EXPECT_EQ(model.Snapshot().at(0).blocks.size(), 1u);  // merged back into the whole segment
}

TEST(CachingAllocatorModel, EmptyCacheSynchronizesPendingFreesAndReleasesWholeSegments) {
  CachingAllocatorModel model;
  Block small = Alloc(model, 1024);         // 2 MiB small segment, split
  Block whole = Alloc(model, 25 * kMiB);    // 26 MiB segment, unsplit
  Alloc(model, 5 * kMiB);                   // 20 MiB segment, split 5 + 15
  Block pending = Alloc(model, 30 * kMiB);  // 30 MiB segment
  model.Free(whole);
  model.FreeWithPendingStreams(pending, {7});
  EXPECT_EQ(model.reserved_bytes(), 78 * kMiB);
  // empty_cache: sync frees `pending`; the 26 and 30 MiB segments are whole and go; the split
  // small and 20 MiB segments stay. Allocated is untouched.
  model.EmptyCache();
  EXPECT_EQ(model.reserved_bytes(), 22 * kMiB);
  EXPECT_EQ(model.allocated_bytes(), 1024 + 5 * kMiB);
  CachingAllocatorStats stats = model.stats();
  EXPECT_EQ(stats.segment.all.current, 2);
  EXPECT_EQ(stats.num_sync_all_streams, 1);
  EXPECT_EQ(stats.num_device_free, 2);
  EXPECT_EQ(stats.active.all.current, 2);
  model.Free(small);
  model.EmptyCache();
  EXPECT_EQ(model.reserved_bytes(), 20 * kMiB);
}

TEST(CachingAllocatorModel, CapacityReleasesCacheAndRetriesThenReportsOom) {
  CachingAllocatorModel model(AllocConf{}, 64 * kMiB);
  Block a = Alloc(model, 30 * kMiB);  // 30 MiB segment; reserved 30
  Alloc(model, 5 * kMiB);             // 20 MiB segment split 5 + 15; reserved 50
  model.Free(a);
  // 40 MiB: no free block >= 40; 50 + 40 > 64 fails; release_cached_blocks frees a's whole
  // segment (reserved 20) and the retry fits (60 <= 64).
  Alloc(model, 40 * kMiB);
  EXPECT_EQ(model.reserved_bytes(), 60 * kMiB);
  EXPECT_EQ(model.allocated_bytes(), 45 * kMiB);
  EXPECT_EQ(model.stats().num_alloc_retries, 1);
  EXPECT_EQ(model.stats().num_ooms, 0);
  // 16 MiB: only the 15 MiB inactive split block is free; 60 + 16 > 64; nothing whole to
  // release; the retry fails too: OOM.
  auto oom = model.Allocate(16 * kMiB, 0);
  ASSERT_FALSE(oom.ok());
  EXPECT_EQ(oom.status().code(), StatusCode::kDeviceError);
  EXPECT_NE(oom.status().message().find("Tried to allocate 16.00 MiB"), std::string::npos)
      << oom.status().message();
  EXPECT_NE(oom.status().message().find("15.00 MiB is reserved by PyTorch but unallocated"),
            std::string::npos);
  ASSERT_TRUE(model.last_oom().has_value());
  const OomReport report = *model.last_oom();
  EXPECT_EQ(report.tried_to_allocate_bytes, 16 * kMiB);
  EXPECT_EQ(report.capacity_bytes, 64 * kMiB);
  EXPECT_EQ(report.free_bytes, 4 * kMiB);
  EXPECT_EQ(report.allocated_bytes, 45 * kMiB);
  EXPECT_EQ(report.reserved_unallocated_bytes, 15 * kMiB);
  CachingAllocatorStats stats = model.stats();
  EXPECT_EQ(stats.num_alloc_retries, 2);
  EXPECT_EQ(stats.num_ooms, 1);
  EXPECT_EQ(model.reserved_bytes(), 60 * kMiB);  // a failed malloc changes nothing else
  // A 1 KiB request still fits: 60 + 2 <= 64.
  EXPECT_TRUE(model.Allocate(1024, 0).ok());
}

TEST(CachingAllocatorModel, OomMessageShowsTheSegmentSizeForSmallRequests) {
  CachingAllocatorModel model(AllocConf{}, 21 * kMiB);
  Alloc(model, 20 * kMiB);             // 20 MiB segment, 1 MiB of capacity left
  auto oom = model.Allocate(1024, 0);  // wants a 2 MiB small segment
  ASSERT_FALSE(oom.ok());
  EXPECT_EQ(model.last_oom()->tried_to_allocate_bytes, 2 * kMiB);
}

TEST(CachingAllocatorModel, MaxSplitSizeReleasesOversizeBlocksBeforeFlushingAll) {
  // release_available_cached_blocks: with max_split_size set, a failing segment first frees the
  // smallest cached oversize block >= max(request, max_split_size) on the stream.
  CachingAllocatorModel model(Conf("max_split_size_mb:20"), 100 * kMiB);
  Block big = Alloc(model, 40 * kMiB);    // oversize 40 MiB segment
  Block other = Alloc(model, 30 * kMiB);  // oversize 30 MiB segment; reserved 70
  model.Free(big);
  model.Free(other);
  // 35 MiB: the 40 MiB block fails Rule B? 40 - 35 = 5 < 20: no, it takes it unsplit.
  EXPECT_EQ(Alloc(model, 35 * kMiB).charged, 40 * kMiB);
  // 50 MiB: cached is 30 MiB only; 70 + 50 > 100. Key = 50: no single block >= 50; walk down
  // from the largest: release 30 (released 30 < 50, then no more): fails; flush all (nothing
  // more) and retry: 40 + 50 <= 100 succeeds with one retry.
  EXPECT_EQ(Alloc(model, 50 * kMiB).charged, 50 * kMiB);
  EXPECT_EQ(model.reserved_bytes(), 90 * kMiB);
  EXPECT_EQ(model.stats().num_alloc_retries, 1);
}

TEST(CachingAllocatorModel, MaxSplitSizeReleasesOneBigEnoughBlockWithoutRetry) {
  CachingAllocatorModel model(Conf("max_split_size_mb:20"), 100 * kMiB);
  Block a = Alloc(model, 60 * kMiB);  // reserved 60
  Block b = Alloc(model, 22 * kMiB);  // reserved 82
  model.Free(a);
  model.Free(b);
  // 30 MiB: best fit is 60 MiB, but 60 - 30 >= 20 (Rule B); 82 + 30 > 100. Key = 30: the
  // smallest cached block >= 30 is the 60 MiB one: released (reserved 22), then 22 + 30 fits.
  Alloc(model, 30 * kMiB);
  EXPECT_EQ(model.reserved_bytes(), 52 * kMiB);
  EXPECT_EQ(model.stats().num_alloc_retries, 0);
  EXPECT_EQ(model.stats().segment.all.current, 2);
}

TEST(CachingAllocatorModel, GarbageCollectionReleasesOldCachedBlocksFirst) {
  const AllocConf conf = Conf("garbage_collection_threshold:0.8");
  // Capacity 100 MiB, so GC starts above 80 MiB reserved. The large pool's clock counts
  // get_free_block calls; a block's age is clock - clock when it was cached.
  CachingAllocatorModel model(conf, 100 * kMiB);
  Block a = Alloc(model, 30 * kMiB);  // clock 1; 30 MiB segment
  Block b = Alloc(model, 20 * kMiB);  // clock 2; 20 MiB segment; reserved 50
  model.Free(a);                      // cached at clock 2
  Alloc(model, 31 * kMiB);            // clock 3; 50 <= 80: no GC; 32 MiB segment; reserved 82
  model.Free(b);                      // cached at clock 3
  // 40 MiB, clock 4: 82 > 80, target 2 MiB. Ages: a 2, b 1; average 1.5: only a goes
  // (reclaimed 30 >= 2). Then 52 + 40 = 92 fits: no retry, b stays cached.
  Alloc(model, 40 * kMiB);
  EXPECT_EQ(model.reserved_bytes(), 92 * kMiB);
  EXPECT_EQ(model.stats().num_alloc_retries, 0);
  EXPECT_EQ(model.stats().num_device_free, 1);
  EXPECT_EQ(model.stats().largest_free_block_bytes, 20 * kMiB);

  // Without GC the same sequence fails first (82 + 40 > 100), flushes a and b, and retries.
  CachingAllocatorModel plain(AllocConf{}, 100 * kMiB);
  Block pa = Alloc(plain, 30 * kMiB);
  Block pb = Alloc(plain, 20 * kMiB);
  plain.Free(pa);
  Alloc(plain, 31 * kMiB);
  plain.Free(pb);
  Alloc(plain, 40 * kMiB);
  EXPECT_EQ(plain.reserved_bytes(), 72 * kMiB);
  EXPECT_EQ(plain.stats().num_alloc_retries, 1);

  // Without a capacity the threshold has nothing to apply to: nothing is released.
  CachingAllocatorModel unbounded(conf);
  Block ua = Alloc(unbounded, 30 * kMiB);
  Block ub = Alloc(unbounded, 20 * kMiB);
  unbounded.Free(ua);
  Alloc(unbounded, 31 * kMiB);
  unbounded.Free(ub);
  Alloc(unbounded, 40 * kMiB);
  EXPECT_EQ(unbounded.reserved_bytes(), 122 * kMiB);
}

TEST(CachingAllocatorModel, ExpandableCapacityOomAndSmallPages) {
  CachingAllocatorModel model(Conf("expandable_segments:True"), 50 * kMiB);
  // 1 KiB maps one 2 MiB small page; 30 MiB maps two 20 MiB large pages: reserved 42 MiB.
  Alloc(model, 1024);
  EXPECT_EQ(model.reserved_bytes(), 2 * kMiB);
  Alloc(model, 30 * kMiB);
  EXPECT_EQ(model.reserved_bytes(), 42 * kMiB);
  // 15 MiB more: the 10 MiB free tail needs 5 MiB more = one 20 MiB page; 62 > 50: OOM.
  auto oom = model.Allocate(15 * kMiB, 0);
  ASSERT_FALSE(oom.ok());
  EXPECT_EQ(model.stats().num_ooms, 1);
  EXPECT_EQ(model.stats().num_alloc_retries, 1);
  // The 10 MiB free tail still serves a 10 MiB request.
  EXPECT_TRUE(model.Allocate(10 * kMiB, 0).ok());
  EXPECT_EQ(model.reserved_bytes(), 42 * kMiB);
}

TEST(CachingAllocatorModel, ExpandablePrefersAHoleOverTheGrowableTail) {
  CachingAllocatorModel model(Conf("expandable_segments:True"));
  // A 12 MiB maps page [0, 20): A at 0, 8 MiB free; B 8 MiB takes that rest whole.
  Block a = Alloc(model, 12 * kMiB);
  Alloc(model, 8 * kMiB);
  // C 10 MiB: nothing free; maps page [20, 40), C at 20, a 10 MiB free tail at 30.
  Alloc(model, 10 * kMiB);
  model.Free(a);  // a 12 MiB hole at 0
  // 9 MiB: the smallest fit is the 10 MiB tail, but its expandable size (10 MiB + the
  // unmapped rest) exceeds the 12 MiB hole's, so the hole at offset 0 is chosen.
  Alloc(model, 9 * kMiB);
  auto blocks = model.Snapshot().at(0).blocks;
  EXPECT_EQ(blocks.at(0).state, BlockState::kAllocated);
  EXPECT_EQ(blocks.at(0).size, 9 * kMiB);
  EXPECT_EQ(blocks.at(1).state, BlockState::kFree);  // 3 MiB left of the hole
  EXPECT_EQ(blocks.at(1).size, 3 * kMiB);
  EXPECT_EQ(model.reserved_bytes(), 40 * kMiB);
  EXPECT_EQ(model.stats().largest_free_block_bytes, 10 * kMiB);
}

TEST(CachingAllocatorModel, ExpandableSegmentPerStreamAndPool) {
  CachingAllocatorModel model(Conf("expandable_segments:True"));
  // Large requests on streams 0 and 1 and a small one on stream 0: three growing segments,
  // one 20 MiB page each in the large pool and one 2 MiB page in the small pool.
  Alloc(model, kMiB + 1, 0);
  Alloc(model, kMiB + 1, 1);
  Alloc(model, 1, 0);
  EXPECT_EQ(model.Snapshot().size(), 3u);
  EXPECT_EQ(model.reserved_bytes(), 42 * kMiB);
  EXPECT_EQ(model.stats().reserved_bytes.small_pool.current, I(2 * kMiB));
}

TEST(CachingAllocatorModel, RoundupDivisionsChangeTheCharge) {
  CachingAllocatorModel model(Conf("roundup_power2_divisions:4"));
  // 5 MiB + 1 rounds to 6 MiB (step 1 MiB between 4 and 8 MiB); a 20 MiB segment, 14 MiB rest.
  EXPECT_EQ(Alloc(model, 5 * kMiB + 1).charged, 6'291'456u);
  EXPECT_EQ(model.reserved_bytes(), 20 * kMiB);
  EXPECT_EQ(model.stats().requested_bytes.all.current, I(5 * kMiB + 1));
}

TEST(CachingAllocatorModel, ZeroBytesAllocatesNothing) {
  CachingAllocatorModel model;
  Block block = Alloc(model, 0);
  EXPECT_EQ(block.charged, 0u);
  EXPECT_EQ(model.reserved_bytes(), 0u);
  model.Free(block);
  EXPECT_EQ(model.stats().allocation.all.allocated, 0);
}

TEST(CachingAllocatorModel, ResetPeakStatsSetsPeaksToCurrent) {
  CachingAllocatorModel model;
  model.Free(Alloc(model, 30 * kMiB));
  EXPECT_EQ(model.stats().allocated_bytes.all.peak, I(30 * kMiB));
  model.ResetPeakStats();
  EXPECT_EQ(model.stats().allocated_bytes.all.peak, 0);
  EXPECT_EQ(model.stats().reserved_bytes.all.peak, I(30 * kMiB));
}

// ---- random property test ----

struct Recount {
  std::int64_t allocated_bytes[2] = {0, 0};  // [small, large]
  std::int64_t allocation[2] = {0, 0};
  std::int64_t active_bytes[2] = {0, 0};
  std::int64_t active[2] = {0, 0};
  std::int64_t requested_bytes[2] = {0, 0};
  std::int64_t reserved_bytes[2] = {0, 0};
  std::int64_t segment[2] = {0, 0};
  std::int64_t inactive_split[2] = {0, 0};
  std::int64_t inactive_split_bytes[2] = {0, 0};
  Bytes largest_free = 0;
};

void ExpectArray(const AllocatorStatArray& stat, const std::int64_t (&recount)[2], const char* name,
                 int step) {
  EXPECT_EQ(stat.small_pool.current, recount[0]) << name << " small, step " << step;
  EXPECT_EQ(stat.large_pool.current, recount[1]) << name << " large, step " << step;
  EXPECT_EQ(stat.all.current, recount[0] + recount[1]) << name << ", step " << step;
  EXPECT_GE(stat.all.peak, stat.all.current) << name;
}

// Fragmentation keeps its per-(stream, pool) segment figures as segments come and go: they
// equal a recount of the snapshot (an expandable segment counts its mapped blocks only).
void ExpectFragmentationRecounted(const CachingAllocatorModel& model, int step) {
  std::map<std::pair<StreamId, bool>, std::pair<std::uint64_t, Bytes>> recount;
  for (const SegmentSnapshot& segment : model.Snapshot()) {
    auto& [count, bytes] = recount[{segment.stream, segment.small_pool}];
    ++count;
    for (const auto& block : segment.blocks) {
      if (block.state != BlockState::kUnmapped) bytes += block.size;
    }
  }
  const std::optional<FragmentationInfo> info = model.Fragmentation();
  ASSERT_TRUE(info.has_value());
  ASSERT_EQ(info->segments.size(), recount.size()) << "step " << step;
  auto want = recount.begin();
  for (const FragmentationInfo::Segments& got : info->segments) {
    EXPECT_EQ(std::pair(got.stream, got.small_pool), want->first) << "step " << step;
    EXPECT_EQ(got.count, want->second.first) << "step " << step;
    EXPECT_EQ(got.bytes, want->second.second) << "step " << step;
    ++want;
  }
  EXPECT_EQ(info->largest_free_block_bytes, model.stats().largest_free_block_bytes);
  EXPECT_EQ(info->reserved_minus_allocated_bytes, model.reserved_bytes() - model.allocated_bytes());
}

// Blocks tile each segment exactly, segments do not overlap, neighbours in the same state are
// merged, and every stat equals a recount from the block list.
void CheckInvariants(const CachingAllocatorModel& model, Bytes live_charged, int step) {
  Recount r;
  Bytes previous_end = 0;
  for (const SegmentSnapshot& segment : model.Snapshot()) {
    const int pool = segment.small_pool ? 0 : 1;
    ASSERT_GE(segment.address, previous_end) << "segments overlap, step " << step;
    previous_end = segment.address + segment.total_size;
    Bytes cursor = segment.address;
    std::int64_t free_count = 0;
    std::int64_t free_bytes = 0;
    for (std::size_t k = 0; k < segment.blocks.size(); ++k) {
      const auto& block = segment.blocks[k];
      ASSERT_EQ(block.address, cursor) << "gap or overlap, step " << step;
      ASSERT_GT(block.size, 0u);
      cursor += block.size;
      if (k > 0 && (block.state == BlockState::kFree || block.state == BlockState::kUnmapped)) {
        ASSERT_NE(segment.blocks[k - 1].state, block.state) << "unmerged neighbours, step " << step;
      }
      const auto size = static_cast<std::int64_t>(block.size);
      switch (block.state) {
        case BlockState::kAllocated:
          r.allocated_bytes[pool] += size;
          r.allocation[pool] += 1;
          [[fallthrough]];
        case BlockState::kPendingFree:
          r.active_bytes[pool] += size;
          r.active[pool] += 1;
          r.requested_bytes[pool] += static_cast<std::int64_t>(block.requested_size);
          ASSERT_LE(block.requested_size, block.size);
          break;
        case BlockState::kFree:
          free_count += 1;
          free_bytes += size;
          r.largest_free = std::max(r.largest_free, block.size);
          break;
        case BlockState::kUnmapped:
          break;
      }
      if (segment.expandable && block.state != BlockState::kUnmapped) {
        r.reserved_bytes[pool] += size;
      }
    }
    ASSERT_EQ(cursor, segment.address + segment.total_size) << "blocks do not tile, step " << step;
    if (!segment.expandable) {
      r.reserved_bytes[pool] += static_cast<std::int64_t>(segment.total_size);
      r.segment[pool] += 1;
      if (segment.blocks.size() > 1) {
        r.inactive_split[pool] += free_count;
        r.inactive_split_bytes[pool] += free_bytes;
      }
    }
  }
  const CachingAllocatorStats stats = model.stats();
  ExpectArray(stats.allocated_bytes, r.allocated_bytes, "allocated_bytes", step);
  ExpectArray(stats.allocation, r.allocation, "allocation", step);
  ExpectArray(stats.active_bytes, r.active_bytes, "active_bytes", step);
  ExpectArray(stats.active, r.active, "active", step);
  ExpectArray(stats.requested_bytes, r.requested_bytes, "requested_bytes", step);
  ExpectArray(stats.reserved_bytes, r.reserved_bytes, "reserved_bytes", step);
  ExpectArray(stats.segment, r.segment, "segment", step);
  ExpectArray(stats.inactive_split, r.inactive_split, "inactive_split", step);
  ExpectArray(stats.inactive_split_bytes, r.inactive_split_bytes, "inactive_split_bytes", step);
  EXPECT_EQ(stats.largest_free_block_bytes, r.largest_free) << "step " << step;
  EXPECT_LE(model.allocated_bytes(), model.reserved_bytes()) << "step " << step;
  ExpectFragmentationRecounted(model, step);
  EXPECT_EQ(model.allocated_bytes(), live_charged) << "step " << step;
}

Bytes RandomSize(std::mt19937_64& rng) {
  switch (rng() % 8) {
    case 0:
      return rng() % 2048;  // tiny, including 0
    case 1:
    case 2:
      return 1 + rng() % kMiB;  // small pool
    case 3:
    case 4:
      return kMiB + rng() % (9 * kMiB);  // 1-10 MiB
    case 5:
    case 6:
      return 10 * kMiB + rng() % (40 * kMiB);
    default:
      return 50 * kMiB + rng() % (150 * kMiB);
  }
}

void RunRandomProperty(const std::string& conf_text, std::optional<Bytes> capacity,
                       std::uint64_t seed) {
  SCOPED_TRACE(conf_text);
  CachingAllocatorModel model(Conf(conf_text), capacity);
  std::mt19937_64 rng(seed);
  constexpr StreamId kStreams = 3;
  std::vector<Block> live;
  Bytes live_charged = 0;
  int ooms = 0;
  for (int step = 0; step < 3000; ++step) {
    const std::uint64_t op = rng() % 100;
    if (op < 50 || live.empty()) {
      auto block = model.Allocate(RandomSize(rng), static_cast<StreamId>(rng() % kStreams));
      if (block.ok()) {
        live.push_back(*block);
        live_charged += block->charged;
      } else {
        ASSERT_EQ(block.status().code(), StatusCode::kDeviceError);
        ++ooms;
      }
    } else if (op < 95) {
      std::size_t k = rng() % live.size();
      Block block = live[k];
      live[k] = live.back();
      live.pop_back();
      live_charged -= block.charged;
      if (op < 80) {
        model.Free(block);
      } else {
        model.FreeWithPendingStreams(block, {static_cast<StreamId>(rng() % kStreams),
                                             static_cast<StreamId>(rng() % kStreams)});
      }
    } else if (op < 99) {
      model.StreamSynchronized(static_cast<StreamId>(rng() % kStreams));
    } else {
      model.EmptyCache();
    }
    CheckInvariants(model, live_charged, step);
    if (::testing::Test::HasFatalFailure() || ::testing::Test::HasNonfatalFailure()) return;
  }
  EXPECT_EQ(model.stats().num_ooms, ooms);
  // The run must have reached the paths it is meant to check.
  EXPECT_GT(model.stats().num_sync_all_streams, 0);
  EXPECT_GT(model.stats().num_device_free, 0);
  if (capacity) {
    EXPECT_GT(model.stats().num_alloc_retries, 0);
    EXPECT_GT(ooms, 0);
  }
  for (const Block& block : live) model.Free(block);
  model.EmptyCache();
  CheckInvariants(model, 0, -1);
  EXPECT_EQ(model.reserved_bytes(), 0u);
}

TEST(CachingAllocatorModelProperty, DefaultConfig) { RunRandomProperty("", std::nullopt, 1); }

TEST(CachingAllocatorModelProperty, ExpandableSegments) {
  RunRandomProperty("expandable_segments:True", std::nullopt, 2);
}

TEST(CachingAllocatorModelProperty, ExpandableSegmentsWithCapacity) {
  RunRandomProperty("expandable_segments:True", 2 * kGiB, 3);
}

TEST(CachingAllocatorModelProperty, MaxSplitSizeWithCapacity) {
  RunRandomProperty("max_split_size_mb:20", 2 * kGiB, 4);
}

TEST(CachingAllocatorModelProperty, GarbageCollectionAndRoundupWithCapacity) {
  RunRandomProperty("garbage_collection_threshold:0.5,roundup_power2_divisions:[1:2,64:4,>:8]",
                    2 * kGiB, 5);
}

TEST(CachingAllocatorModelProperty, TightCapacity) { RunRandomProperty("", 600 * kMiB, 6); }

}  // namespace
}  // namespace bucketsim
