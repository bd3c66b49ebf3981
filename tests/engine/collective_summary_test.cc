#include "engine/collective_summary.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

CollectiveRecord Record(CollectiveKind kind, GroupId group, int group_size, Numel input_numel) {
  CollectiveRecord record;
  record.kind = kind;
  record.group = group;
  record.group_size = group_size;
  record.dtype = DType::kFloat32;
  record.input_numel = input_numel;
  record.output_numel = input_numel / group_size;
  return record;
}

TEST(CollectiveSummary, CountsPerStretchAndPerGroup) {
  CollectiveSummary summary;
  // Iteration 0, backward: a flush on group 7 (2 ranks, 100 fp32 elements: 400 B) and a bypass
  // on group 9 (4 ranks, 1000 elements: 4000 B); iteration 0, step: nothing; iteration 1,
  // backward: a flush on group 7 again (400 B).
  summary.Add(0, Phase::kBackward, Record(CollectiveKind::kBucketFlush, 7, 2, 100));
  summary.Add(0, Phase::kBackward, Record(CollectiveKind::kBypass, 9, 4, 1000));
  summary.Add(1, Phase::kBackward, Record(CollectiveKind::kBucketFlush, 7, 2, 100));

  EXPECT_EQ(summary.totals().count, 3u);
  EXPECT_EQ(summary.totals().bytes, 4800u);
  // busbw bytes: 400 * 1/2 + 4000 * 3/4 + 400 * 1/2 = 3400.
  EXPECT_DOUBLE_EQ(summary.totals().bus_bytes, 3400.0);

  ASSERT_EQ(summary.phases().size(), 2u);
  const PhaseCollectives& first = summary.phases()[0];
  EXPECT_EQ(first.iteration, 0u);
  EXPECT_EQ(first.phase, Phase::kBackward);
  EXPECT_EQ(first.total.count, 2u);
  EXPECT_EQ(first.total.bytes, 4400u);
  EXPECT_EQ(first.by_kind[static_cast<int>(CollectiveKind::kBucketFlush)].bytes, 400u);
  EXPECT_EQ(first.by_kind[static_cast<int>(CollectiveKind::kBypass)].bytes, 4000u);
  EXPECT_EQ(summary.phases()[1].iteration, 1u);
  EXPECT_EQ(summary.phases()[1].total.bytes, 400u);

  ASSERT_EQ(summary.groups().size(), 2u);
  EXPECT_EQ(summary.groups()[0].group, 7u);  // in the order groups first issued
  EXPECT_EQ(summary.groups()[0].total.count, 2u);
  EXPECT_EQ(summary.groups()[0].total.bytes, 800u);
  EXPECT_EQ(summary.groups()[1].group, 9u);
  EXPECT_EQ(summary.groups()[1].group_size, 4);
}

}  // namespace
}  // namespace bucketsim
