#include <gtest/gtest.h>

#include "engine/sweep_summary.h"

namespace bucketsim {
namespace {

// A run whose single iteration takes `step_us` with `exposed_us` exposed, peaking at `reserved`.
RunResult RunOf(const char* policy, double cap, Bytes reserved, Micros step_us,
                Micros exposed_us = 0) {
  RunResult run;
  run.policy = policy;
  run.bucket_cap_mb = cap;
  run.peak.allocated_bytes = reserved / 2;
  run.peak.reserved_bytes = reserved;
  IterationTiming it;
  it.iteration_us = step_us;
  it.exposed_communication_us = exposed_us;
  run.iterations = {it};
  return run;
}

TEST(SweepSummary, MarksTheParetoSet) {
  // (memory, time): A (100, 50) B (200, 30) C (300, 30) D (150, 60) E (100, 50)
  // C is dominated by B (more memory, same time), D by A; A and E tie: both optimal.
  std::vector<SweepPoint> points =
      SummarizeSweep({RunOf("a", 1, 100, 50), RunOf("b", 5, 200, 30), RunOf("c", 25, 300, 30),
                      RunOf("d", 100, 150, 60), RunOf("e", 1, 100, 50, 7)});
  ASSERT_EQ(points.size(), 5u);
  EXPECT_TRUE(points[0].pareto);
  EXPECT_TRUE(points[1].pareto);
  EXPECT_FALSE(points[2].pareto);
  EXPECT_FALSE(points[3].pareto);
  EXPECT_TRUE(points[4].pareto);
  EXPECT_EQ(points[4].exposed_communication_us, 7);
  EXPECT_EQ(points[1].step_time_us, 30);
  EXPECT_EQ(points[1].peak_allocated_bytes, 100u);
}

TEST(SweepSummary, OutOfMemoryRunsAreNeverOptimalAndNeverFit) {
  RunResult oom = RunOf("fast-but-oom", 1, 10, 1);
  oom.oom = OomEvent{};
  std::vector<SweepPoint> points = SummarizeSweep({oom, RunOf("ok", 1, 100, 50)});
  EXPECT_FALSE(points[0].pareto);
  EXPECT_TRUE(points[1].pareto);
  BudgetAnswer answer = ChooseUnderBudget(points, 1000);
  EXPECT_EQ(answer.best.value_or(99), 1u);
  EXPECT_FALSE(answer.runner_up);
}

TEST(SweepSummary, BudgetPicksTheFastestThatFitsAndItsRunnerUp) {
  std::vector<SweepPoint> points =
      SummarizeSweep({RunOf("a", 1, 100, 50), RunOf("b", 5, 200, 30), RunOf("c", 25, 300, 20),
                      RunOf("d", 5, 180, 30)});
  BudgetAnswer answer = ChooseUnderBudget(points, 250);
  EXPECT_EQ(answer.best.value_or(99), 3u);       // d and b both take 30: d has less memory
  EXPECT_EQ(answer.runner_up.value_or(99), 1u);  // then b
  EXPECT_EQ(answer.smallest.value_or(99), 0u);
  BudgetAnswer tight = ChooseUnderBudget(points, 99);
  EXPECT_FALSE(tight.best);
  EXPECT_EQ(tight.smallest.value_or(99), 0u);
  BudgetAnswer exact = ChooseUnderBudget(points, 100);  // fits when equal to the budget
  EXPECT_EQ(exact.best.value_or(99), 0u);
}

}  // namespace
}  // namespace bucketsim
