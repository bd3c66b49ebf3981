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

// A fairscale policy replayed at `cap` over a trace of `requests` reduce requests of which
// `bucketed` went through a bucket.
RunResult FairscaleRun(const char* policy, double cap, Bytes reserved, Micros step_us,
                       std::uint64_t bucketed, std::uint64_t requests) {
  RunResult run = RunOf(policy, cap, reserved, step_us);
  run.canonical = ParsePolicySpec(policy)->Canonical(cap);
  run.counters.bucketed = bucketed;
  run.counters.bypasses = requests - bucketed;
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

TEST(SweepSummary, CarriesTheRequestsEachCapBuckets) {
  std::vector<SweepPoint> points =
      SummarizeSweep({FairscaleRun("backward-only", 5, 100, 50, 96, 448)});
  EXPECT_EQ(points[0].bucketed_requests, 96u);
  EXPECT_EQ(points[0].bypassed_requests, 352u);
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
  EXPECT_TRUE(answer.ties.empty());
  EXPECT_EQ(answer.smallest.value_or(99), 0u);
  BudgetAnswer tight = ChooseUnderBudget(points, 99);
  EXPECT_FALSE(tight.best);
  EXPECT_EQ(tight.smallest.value_or(99), 0u);
  BudgetAnswer exact = ChooseUnderBudget(points, 100);  // fits when equal to the budget
  EXPECT_EQ(exact.best.value_or(99), 0u);
}

TEST(SweepSummary, BudgetThatOnlyOneConfigurationFits) {
  // Budget 150: only backward-only at cap 1 (120 bytes) fits; the others need 200 and 300.
  std::vector<SweepPoint> points =
      SummarizeSweep({FairscaleRun("always-allocated", 1, 200, 40, 10, 10),
                      FairscaleRun("backward-only", 1, 120, 40, 10, 10),
                      FairscaleRun("backward-only", 25, 300, 30, 10, 10)});
  BudgetAnswer answer = ChooseUnderBudget(points, 150);
  EXPECT_EQ(answer.best.value_or(99), 1u);
  EXPECT_FALSE(answer.runner_up);
  EXPECT_TRUE(answer.ties.empty());
  EXPECT_EQ(answer.smallest.value_or(99), 1u);
}

// The 7B case at cap 25 MiB: every request is larger than the shard size, so no policy
// buckets anything and all four have the same figures. Listed with always-allocated first, the
// choice is still unbucketed, and the others are its ties from the simplest to the least simple.
TEST(SweepSummary, ACapThatBucketsNothingTiesEveryPolicyAndUnbucketedIsChosen) {
  std::vector<SweepPoint> points = SummarizeSweep({
      FairscaleRun("always-allocated", 25, 1000, 80, 0, 448),
      FairscaleRun("per-group-dedup", 25, 1000, 80, 0, 448),
      FairscaleRun("backward-only", 25, 1000, 80, 0, 448),
      FairscaleRun("unbucketed", 0, 1000, 80, 0, 448),
  });
  EXPECT_EQ(EffectiveSimplicity(points[0]), Simplicity::kUnbucketed);
  EXPECT_EQ(PointSetting(points[0]).simplicity, Simplicity::kOldRelease);
  BudgetAnswer answer = ChooseUnderBudget(points, 20000);
  EXPECT_EQ(answer.best.value_or(99), 3u);
  // All bucket nothing (unbucketed in effect); then by the simplicity of the policy as named.
  EXPECT_EQ(answer.ties, (std::vector<std::size_t>{2, 1, 0}));
  EXPECT_FALSE(answer.runner_up);
  KneeAnswer knee = FindKnee(points, 0.01);
  EXPECT_EQ(knee.knee.value_or(99), 3u);
  EXPECT_EQ(knee.ties, (std::vector<std::size_t>{2, 1, 0}));
  SweepSection section{points, knee, answer, std::nullopt, 39.0};
  SettingAdvice setting = RecommendedSetting(section);
  EXPECT_EQ(setting.setting, "fairscale.nn.FullyShardedDataParallel(bucket_cap_mb=0)");
}

// Equal step times: less peak reserved wins even over a simpler policy; among equal figures
// the simpler policy wins whatever the order of the list.
TEST(SweepSummary, TiesGoToLessMemoryThenTheSimplerPolicyNeverListOrder) {
  const std::vector<RunResult> runs = {
      FairscaleRun("always-allocated", 5, 300, 40, 10, 10),  // 0: equal time, more memory
      FairscaleRun("per-group-dedup", 5, 200, 40, 10, 10),   // 1: equal time, least memory
      FairscaleRun("backward-only", 5, 200, 40, 10, 10),     // 2: ties 1, simpler
      FairscaleRun("backward-only", 25, 200, 40, 10, 10),    // 3: ties 2, larger cap
  };
  for (bool reversed : {false, true}) {
    std::vector<RunResult> listed = runs;
    if (reversed) std::reverse(listed.begin(), listed.end());
    auto index = [&](std::size_t original) { return reversed ? 3 - original : original; };
    std::vector<SweepPoint> points = SummarizeSweep(listed);
    BudgetAnswer answer = ChooseUnderBudget(points, 1000);
    EXPECT_EQ(answer.best.value_or(99), index(2)) << reversed;
    // backward-only at 25 (same simplicity, larger cap), then per-group-dedup (less simple).
    EXPECT_EQ(answer.ties, (std::vector<std::size_t>{index(3), index(1)})) << reversed;
    EXPECT_EQ(answer.runner_up.value_or(99), index(0)) << reversed;
    KneeAnswer knee = FindKnee(points, 0);
    EXPECT_EQ(knee.knee.value_or(99), index(2)) << reversed;
  }
}

// The knee: fastest 100 us at 500 bytes; within 1% (<= 101 us) the least memory is 300 bytes at
// 100.5 us; 200 bytes at 110 us is outside. With a 10% tolerance it is inside.
TEST(SweepSummary, KneeIsTheLeastMemoryWithinTheToleranceOfTheFastest) {
  std::vector<SweepPoint> points = SummarizeSweep({
      FairscaleRun("backward-only", 1, 200, 110, 10, 10),
      FairscaleRun("backward-only", 5, 300, 100.5, 10, 10),
      FairscaleRun("backward-only", 25, 500, 100, 10, 10),
  });
  KneeAnswer knee = FindKnee(points, 0.01);
  EXPECT_EQ(knee.fastest.value_or(99), 2u);
  EXPECT_EQ(knee.knee.value_or(99), 1u);
  EXPECT_TRUE(knee.ties.empty());
  EXPECT_EQ(FindKnee(points, 0.10).knee.value_or(99), 0u);
  EXPECT_EQ(FindKnee(points, 0).knee.value_or(99), 2u);
  SweepSection section{points, knee, std::nullopt, std::nullopt, std::nullopt};
  EXPECT_EQ(Recommended(section).value_or(99), 1u);
  EXPECT_EQ(RecommendedSetting(section).setting,
            "fairscale.nn.FullyShardedDataParallel(bucket_cap_mb=5)");
}

}  // namespace
}  // namespace bucketsim
