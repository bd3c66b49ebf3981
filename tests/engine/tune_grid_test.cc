// The grid of `tune` and its advice (engine/tune_grid.h): the combinations in order, the
// largest batch size (or sequence length) that fits, the fastest that fits, what comes closest when
// nothing does, and the Pareto set over peak reserved and time per sample.
#include "engine/tune_grid.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TunePoint Point(std::string batch, std::string checkpoint, Bytes reserved, Micros step,
                bool oom = false) {
  TunePoint point;
  point.settings = {{"batch-size", std::move(batch)}, {"checkpoint", std::move(checkpoint)}};
  point.figures.peak_reserved_bytes = reserved;
  point.figures.step_time_us = step;
  point.figures.out_of_memory = oom;
  return point;
}

TEST(TuneGrid, EveryCombinationTheFirstAxisSlowest) {
  const std::vector<TuneSettings> grid =
      TuneGrid({{"batch-size", {"2", "4"}}, {"checkpoint", {"none", "Block", "all"}}});
  ASSERT_EQ(grid.size(), 6u);
  EXPECT_EQ(grid[0], (TuneSettings{{"batch-size", "2"}, {"checkpoint", "none"}}));
  EXPECT_EQ(grid[2], (TuneSettings{{"batch-size", "2"}, {"checkpoint", "all"}}));
  EXPECT_EQ(grid[3], (TuneSettings{{"batch-size", "4"}, {"checkpoint", "none"}}));
  EXPECT_EQ(TuneGrid({}), std::vector<TuneSettings>{{}});
}

TEST(TuneGrid, ParsesAnAxis) {
  Result<TuneAxis> axis = ParseTuneAxis("--checkpoint=none,Block+MLP");
  ASSERT_TRUE(axis.ok());
  EXPECT_EQ(axis->flag, "checkpoint");
  EXPECT_EQ(axis->values, (std::vector<std::string>{"none", "Block+MLP"}));
  EXPECT_EQ(ParseTuneAxis("batch-size=2,,4").status().message(),
            "--vary 'batch-size=2,,4': an empty value");
  EXPECT_EQ(ParseTuneAxis("checkpoint=none,none").status().message(),
            "--vary 'checkpoint=none,none': 'none' is given twice");
  EXPECT_EQ(ParseTuneAxis("=2").status().message(),
            "--vary '=2': expected FLAG=VALUE,VALUE,... (e.g. batch-size=2,4,8)");
  EXPECT_EQ(ParseTuneAxis("batch-size=two").status().message(),
            "--vary 'batch-size=two': 'two' is not a batch size (an integer of at least 1)");
}

// Batch sizes 2, 4, 8 (the grid's order need not be ascending), checkpointing none or all,
// under a budget of 100: at 8 nothing fits; at 4 only the checkpointed one does.
TEST(TuneAdvice, TheLargestBatchSizeThatFits) {
  const std::vector<TunePoint> points = {Point("4", "none", 120, 40), Point("4", "all", 90, 50),
                                         Point("8", "none", 200, 80), Point("8", "all", 150, 100),
                                         Point("2", "none", 60, 20),  Point("2", "all", 45, 25)};
  TuneAdvice advice = AdviseTune(points, Bytes{100});
  EXPECT_EQ(advice.by, "batch-size");
  EXPECT_EQ(advice.chosen, 1u);
  EXPECT_EQ(advice.next, 8u);
  EXPECT_FALSE(advice.closest);
  // With a larger budget 8 fits checkpointed; at the largest size nothing is larger.
  advice = AdviseTune(points, Bytes{160});
  EXPECT_EQ(advice.chosen, 3u);
  EXPECT_FALSE(advice.next);
  // Without a budget everything fits: the largest batch, the faster of its two.
  EXPECT_EQ(AdviseTune(points, std::nullopt).chosen, 2u);
}

TEST(TuneAdvice, WithoutTheBatchSizeTheFastestThatFitsThenTheLeastMemory) {
  std::vector<TunePoint> points = {Point("", "none", 80, 10), Point("", "all", 50, 12),
                                   Point("", "Block", 40, 10)};
  for (TunePoint& point : points) point.settings.erase(point.settings.begin());
  TuneAdvice advice = AdviseTune(points, Bytes{90});
  EXPECT_EQ(advice.by, "");
  EXPECT_EQ(advice.chosen, 2u);  // as fast as the first, less memory
  EXPECT_EQ(AdviseTune(points, Bytes{45}).chosen, 2u);
}

// The sequence length where the batch size is not varied: the largest length that fits; where
// both are, the batch size decides and the Pareto set counts tokens (samples x length).
TEST(TuneAdvice, TheLargestSequenceLengthThatFits) {
  std::vector<TunePoint> points = {Point("2", "none", 60, 20), Point("2", "all", 50, 25),
                                   Point("2", "none", 90, 40), Point("2", "all", 70, 50)};
  const char* lengths[] = {"512", "512", "1024", "1024"};
  for (std::size_t i = 0; i < points.size(); ++i) {
    points[i].settings[0] = {"seq-len", lengths[i]};
  }
  TuneAdvice advice = AdviseTune(points, Bytes{80});
  EXPECT_EQ(advice.by, "seq-len");
  EXPECT_EQ(advice.chosen, 3u);
  EXPECT_FALSE(advice.next);
  advice = AdviseTune(points, Bytes{55});
  EXPECT_EQ(advice.chosen, 1u);
  EXPECT_EQ(advice.next, 1024u);
  EXPECT_EQ(ParseTuneAxis("seq-len=512,0").status().message(),
            "--vary 'seq-len=512,0': '0' is not a sequence length (an integer of at least 1)");

  for (TunePoint& point : points) point.settings.push_back({"batch-size", "4"});
  points[0].settings.back().second = "8";  // 8 x 512 tokens in 20: the fastest per token
  EXPECT_EQ(AdviseTune(points, Bytes{80}).by, "batch-size");
  MarkTunePareto(points);
  EXPECT_TRUE(points[0].figures.pareto);
  EXPECT_TRUE(points[1].figures.pareto);   // less memory
  EXPECT_FALSE(points[2].figures.pareto);  // 40 for 4 x 1024: slower per token than the first
}

TEST(TuneAdvice, NothingFitsGivesTheClosestThatRan) {
  const std::vector<TunePoint> points = {Point("2", "none", 10, 1, /*oom=*/true),
                                         Point("2", "all", 70, 2), Point("4", "all", 90, 3)};
  TuneAdvice advice = AdviseTune(points, Bytes{50});
  EXPECT_FALSE(advice.chosen);
  EXPECT_EQ(advice.closest, 1u);  // the OOM one stopped early: its peak says nothing
  EXPECT_FALSE(TuneFits(points[0], std::nullopt));
}

TEST(TunePareto, OverPeakReservedAndTimePerSample) {
  std::vector<TunePoint> points = {Point("2", "none", 60, 20),   // 10 per sample
                                   Point("4", "none", 100, 36),  // 9 per sample: less time
                                   Point("4", "all", 110, 40),   // dominated by the one before
                                   Point("8", "all", 300, 80, /*oom=*/true)};
  MarkTunePareto(points);
  EXPECT_TRUE(points[0].figures.pareto);
  EXPECT_TRUE(points[1].figures.pareto);
  EXPECT_FALSE(points[2].figures.pareto);
  EXPECT_FALSE(points[3].figures.pareto);
}

}  // namespace
}  // namespace bucketsim
