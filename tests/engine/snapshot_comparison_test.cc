// SnapshotComparison on hand-made imported snapshots: the allocator decisions of
// reference/caching_allocator.md §6.1 and §6.2 written as PyTorch records them (segment events
// before the alloc that made them), so that the caching model agrees 100%, and the same runs
// replayed under a different allocator (other alloc conf, a smaller device), where they diverge
// at a known event.
#include "engine/snapshot_comparison.h"

#include <gtest/gtest.h>

#include "engine/trace_checker.h"
#include "memory/caching_allocator_model.h"
#include "testing/trace_builder.h"

namespace bucketsim {
namespace {

using testing::TraceBuilder;

constexpr std::uint64_t kBase = 0x7f3a00000000;  // device addresses, as a snapshot has them

Event Segment(EventKind kind, std::uint64_t address, Bytes bytes) {
  return ObservedSegmentEvent(kind, address, bytes, 0);
}

// §6.1: A 25 MiB (26 MiB segment, unsplit), B 12.5 MiB (14 MiB segment, split), free A,
// C 30 MiB (30 MiB segment), D 20 MiB (A's cached 26 MiB block, split); the dump's totals last.
TraceBuilder DefaultConfigRun() {
  const std::uint64_t s1 = kBase, s2 = kBase + 0x2000000, s3 = kBase + 0x4000000;
  TraceBuilder t(1);
  t.header().schema_version = 3;
  t.Observed(Segment(EventKind::kSegmentAlloc, s1, 26 * kMiB))     // 0
      .Alloc(s1, 25 * kMiB, Category::kOther)                      // 1
      .Observed(Segment(EventKind::kSegmentAlloc, s2, 14 * kMiB))  // 2
      .Alloc(s2, 13107200, Category::kOther)                       // 3
      .Free(s1)                                                    // 4
      .Observed(Segment(EventKind::kSegmentAlloc, s3, 30 * kMiB))  // 5
      .Alloc(s3, 30 * kMiB, Category::kOther)                      // 6
      .Alloc(s1, 20 * kMiB, Category::kOther);                     // 7
  Event totals = ObservedSnapshotEvent(65536000);                  // 8
  totals.has_totals = true;
  totals.numel = 65536000;  // allocated: 20 + 12.5 + 30 MiB
  totals.group = 73400320;  // reserved: 26 + 14 + 30 MiB
  totals.id = 65536000;     // requested
  return t.Observed(totals);
}

// §6.2 with expandable_segments:True, then empty_cache unmaps the one whole free page.
TraceBuilder ExpandableRun() {
  TraceBuilder t(1);
  t.header().schema_version = 3;
  t.Observed(Segment(EventKind::kSegmentMap, kBase, 40 * kMiB))                 // 0
      .Alloc(kBase, 25 * kMiB, Category::kOther)                                // 1
      .Alloc(kBase + 25 * kMiB, 13107200, Category::kOther)                     // 2
      .Free(kBase)                                                              // 3
      .Observed(Segment(EventKind::kSegmentMap, kBase + 40 * kMiB, 40 * kMiB))  // 4
      .Alloc(kBase + 39321600, 30 * kMiB, Category::kOther)                     // 5
      .Observed(Segment(EventKind::kSegmentUnmap, kBase, 20 * kMiB))            // 6
      .EmptyCache();                                                            // 7
  return t;
}

Result<SnapshotAgreement> Compare(const TraceBuilder& t, const std::string& conf,
                                  std::optional<Bytes> capacity = std::nullopt) {
  Result<AllocConf> parsed = ParseAllocConf(conf);
  if (!parsed.ok()) return parsed.status();
  SnapshotComparison comparison([&](const TraceHeader&) -> Result<std::unique_ptr<MemoryModel>> {
    return std::unique_ptr<MemoryModel>(std::make_unique<CachingAllocatorModel>(*parsed, capacity));
  });
  TraceChecker checker(&comparison);
  TraceHeader header;
  BUCKETSIM_RETURN_IF_ERROR(t.Source()(header, checker));
  return comparison.agreement();
}

TEST(SnapshotComparison, DefaultConfigAgreesOnEverySegmentAndEveryAllocatedFigure) {
  Result<SnapshotAgreement> result = Compare(DefaultConfigRun(), "");
  ASSERT_TRUE(result.ok()) << result.status().message();
  const SnapshotAgreement& a = *result;
  EXPECT_EQ(a.observed_events, 4u);
  // (a) five replayed events (allocs and the free), each rounded to 512 B: all agree.
  EXPECT_EQ(a.allocated_events_checked, 5u);
  EXPECT_EQ(a.allocated_events_matching, 5u);
  EXPECT_FALSE(a.first_allocated_mismatch);
  EXPECT_EQ(a.exact_final_allocated_bytes, 65536000u);
  EXPECT_EQ(a.final_requested_bytes, 65536000u);
  // (b) three segment_allocs of 26, 14 and 30 MiB, each at its alloc.
  EXPECT_EQ(a.predicted_segment_events, 3u);
  EXPECT_EQ(a.observed_segment_events, 3u);
  EXPECT_EQ(a.matching_segment_events, 3u);
  EXPECT_FALSE(a.first_divergence);
  // Reserved 70 MiB, allocated 62.5 MiB (§6.1, including alloc D).
  EXPECT_EQ(a.predicted_peak_reserved_bytes, 73400320u);
  EXPECT_EQ(a.observed_peak_reserved_bytes, 73400320u);
  EXPECT_EQ(a.predicted_final_reserved_bytes, 73400320u);
  EXPECT_EQ(a.predicted_final_allocated_bytes, 65536000u);
  ASSERT_TRUE(a.observed_totals);
  EXPECT_EQ(a.observed_totals->allocated_bytes, 65536000u);
  EXPECT_EQ(a.observed_totals->reserved_bytes, 73400320u);
  EXPECT_FALSE(a.predicted_oom);
}

TEST(SnapshotComparison, ExpandableSegmentsAgreeIncludingTheUnmapOfEmptyCache) {
  Result<SnapshotAgreement> result = Compare(ExpandableRun(), "expandable_segments:True");
  ASSERT_TRUE(result.ok()) << result.status().message();
  const SnapshotAgreement& a = *result;
  EXPECT_EQ(a.predicted_segment_events, 3u);  // map 40, map 40, unmap 20 MiB
  EXPECT_EQ(a.matching_segment_events, 3u);
  EXPECT_FALSE(a.first_divergence);
  EXPECT_EQ(a.predicted_peak_reserved_bytes, 80 * kMiB);
  EXPECT_EQ(a.observed_peak_reserved_bytes, 80 * kMiB);
  EXPECT_EQ(a.predicted_final_reserved_bytes, 60 * kMiB);
  EXPECT_EQ(a.observed_final_reserved_bytes, 60 * kMiB);
}

TEST(SnapshotComparison, AnotherAllocConfDivergesAtTheFirstAlloc) {
  Result<SnapshotAgreement> result = Compare(DefaultConfigRun(), "expandable_segments:True");
  ASSERT_TRUE(result.ok()) << result.status().message();
  const SnapshotAgreement& a = *result;
  // Expandable segments map 40 MiB for A and 40 MiB more for C; nothing of the cudaMalloc run.
  EXPECT_EQ(a.predicted_segment_events, 2u);
  EXPECT_EQ(a.observed_segment_events, 3u);
  EXPECT_EQ(a.matching_segment_events, 0u);
  ASSERT_TRUE(a.first_divergence);
  const SegmentDivergence& d = *a.first_divergence;
  EXPECT_EQ(d.event_index, 1u);  // alloc A
  EXPECT_EQ(d.position, 0u);
  ASSERT_TRUE(d.predicted && d.observed);
  EXPECT_EQ(d.predicted->action, SegmentAction::kMap);
  EXPECT_EQ(d.predicted->bytes, 40 * kMiB);
  EXPECT_EQ(d.observed->action, SegmentAction::kAlloc);
  EXPECT_EQ(d.observed->bytes, 26 * kMiB);
  EXPECT_EQ(d.observed->address, kBase);
  EXPECT_EQ(a.predicted_peak_reserved_bytes, 80 * kMiB);
  // Allocated bytes are the trace's whatever the allocator: (a) still agrees.
  EXPECT_EQ(a.allocated_events_matching, 5u);
}

TEST(SnapshotComparison, ASmallerDeviceDivergesWhereItMustReleaseTheCache) {
  // 60 MiB: C's 30 MiB segment does not fit beside 40 MiB reserved, so the model frees A's
  // cached 26 MiB segment first (segment_free, then segment_alloc: the run saw only the alloc);
  // D then needs a 20 MiB segment that does not fit at all: out of memory at event 7.
  Result<SnapshotAgreement> result = Compare(DefaultConfigRun(), "", 60 * kMiB);
  ASSERT_TRUE(result.ok()) << result.status().message();
  const SnapshotAgreement& a = *result;
  EXPECT_EQ(a.predicted_segment_events, 4u);
  EXPECT_EQ(a.observed_segment_events, 3u);
  EXPECT_EQ(a.matching_segment_events, 3u);
  ASSERT_TRUE(a.first_divergence);
  EXPECT_EQ(a.first_divergence->event_index, 6u);  // alloc C
  EXPECT_EQ(a.first_divergence->position, 0u);
  EXPECT_EQ(a.first_divergence->predicted->action, SegmentAction::kFree);
  EXPECT_EQ(a.first_divergence->predicted->bytes, 26 * kMiB);
  EXPECT_EQ(a.first_divergence->observed->action, SegmentAction::kAlloc);
  EXPECT_EQ(a.first_divergence->observed->bytes, 30 * kMiB);
  ASSERT_TRUE(a.predicted_oom);
  EXPECT_EQ(*a.predicted_oom, 7u);
  EXPECT_EQ(a.predicted_peak_reserved_bytes, 44 * kMiB);
  EXPECT_EQ(a.observed_peak_reserved_bytes, 70 * kMiB);
}

TEST(SnapshotComparison, ReplaysIgnoreObservedEvents) {
  // The same run without its observed events replays to the same figures.
  TraceBuilder bare(1);
  bare.Alloc(1, 25 * kMiB, Category::kOther).Alloc(2, 13107200, Category::kOther).Free(1);
  bare.Alloc(3, 30 * kMiB, Category::kOther).Alloc(4, 20 * kMiB, Category::kOther);
  Result<SnapshotAgreement> with = Compare(DefaultConfigRun(), "");
  Result<SnapshotAgreement> without = Compare(bare, "");
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_EQ(without->observed_events, 0u);
  EXPECT_EQ(with->predicted_final_reserved_bytes, without->predicted_final_reserved_bytes);
  EXPECT_EQ(with->predicted_peak_reserved_bytes, without->predicted_peak_reserved_bytes);
  EXPECT_EQ(with->predicted_final_allocated_bytes, without->predicted_final_allocated_bytes);
}

TEST(SnapshotComparison, AFinalRequestedFigureTheTraceDoesNotReachIsAnAccountingDisagreement) {
  TraceBuilder t = DefaultConfigRun();
  Event wrong = ObservedSnapshotEvent(0);
  wrong.has_totals = true;
  wrong.id = 1;  // requested bytes the trace's live allocations do not add up to
  t.Observed(wrong);
  SnapshotComparison comparison([](const TraceHeader&) -> Result<std::unique_ptr<MemoryModel>> {
    return std::unique_ptr<MemoryModel>(std::make_unique<CachingAllocatorModel>());
  });
  TraceChecker checker(&comparison);
  TraceHeader header;
  ASSERT_TRUE(t.Source()(header, checker).ok());
  EXPECT_TRUE(comparison.AccountingDisagrees());
}

}  // namespace
}  // namespace bucketsim
