// The CI gate's rules: a budget passes at exactly its limit and fails one byte over; budgets
// combine kind by kind; a baseline tolerates growth up to the larger of its percentage and its
// absolute allowance, and shrinkage always passes.
#include "engine/budget_check.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

PolicyFigures Figures(Bytes allocated, Bytes reserved, std::optional<Micros> step_us = 350.0) {
  PolicyFigures figures;
  figures.policy = "backward-only";
  figures.peak_allocated_bytes = allocated;
  figures.peak_reserved_bytes = reserved;
  figures.AddMarkSample("after fwd", 1000);
  figures.AddMarkSample("after fwd", 3000);  // a later iteration's larger sample counts
  figures.AddMarkSample("after bwd", 2000);
  figures.step_time_us = step_us;
  return figures;
}

TEST(PolicyFigures, AMarkIsItsLargestSample) {
  PolicyFigures figures = Figures(0, 0);
  EXPECT_EQ(figures.AtMark("after fwd"), 3000u);
  EXPECT_EQ(figures.AtMark("after bwd"), 2000u);
  EXPECT_EQ(figures.AtMark("after lunch"), std::nullopt);
}

TEST(PolicyBudget, OverrideReplacesOnlyBudgetsOfTheSameKind) {
  PolicyBudget base;
  base.max_peak_allocated_bytes = 10;
  base.max_peak_reserved_bytes = 20;
  base.SetMark("after fwd", 30);
  base.SetMark("after bwd", 40);
  PolicyBudget over;
  over.max_peak_reserved_bytes = 21;
  over.SetMark("after bwd", 41);
  over.max_step_time_us = 5.0;
  base.OverrideWith(over);
  EXPECT_EQ(base.max_peak_allocated_bytes, 10u);
  EXPECT_EQ(base.max_peak_reserved_bytes, 21u);
  ASSERT_EQ(base.max_at_mark_bytes.size(), 2u);
  EXPECT_EQ(base.max_at_mark_bytes[0], (std::pair<std::string, Bytes>{"after fwd", 30}));
  EXPECT_EQ(base.max_at_mark_bytes[1], (std::pair<std::string, Bytes>{"after bwd", 41}));
  EXPECT_EQ(base.max_step_time_us, 5.0);
  EXPECT_FALSE(base.empty());
  EXPECT_TRUE(PolicyBudget{}.empty());
}

TEST(CheckBudget, PassesAtTheLimitAndFailsOneOver) {
  PolicyBudget budget;
  budget.max_peak_allocated_bytes = 100;
  budget.max_peak_reserved_bytes = 199;
  budget.SetMark("after fwd", 3000);
  budget.max_step_time_us = 349.5;
  Result<std::vector<CheckOutcome>> outcomes = CheckBudget(Figures(100, 200), budget);
  ASSERT_TRUE(outcomes.ok()) << outcomes.status().ToString();
  ASSERT_EQ(outcomes->size(), 4u);
  EXPECT_EQ((*outcomes)[0].figure, Figure::kPeakAllocated);
  EXPECT_EQ((*outcomes)[0].verdict, Verdict::kPass);
  EXPECT_EQ((*outcomes)[1].figure, Figure::kPeakReserved);
  EXPECT_EQ((*outcomes)[1].verdict, Verdict::kFail);
  EXPECT_EQ((*outcomes)[1].value.bytes, 200u);
  EXPECT_EQ((*outcomes)[1].limit.bytes, 199u);
  EXPECT_EQ((*outcomes)[2].figure, Figure::kAtMark);
  EXPECT_EQ((*outcomes)[2].mark, "after fwd");
  EXPECT_EQ((*outcomes)[2].verdict, Verdict::kPass);
  EXPECT_EQ((*outcomes)[3].figure, Figure::kStepTime);
  EXPECT_EQ((*outcomes)[3].verdict, Verdict::kFail);
  EXPECT_DOUBLE_EQ((*outcomes)[3].value.us, 350.0);
}

TEST(CheckBudget, AMarkThatNeverOccursIsAnError) {
  PolicyBudget budget;
  budget.SetMark("after lunch", 1);
  Result<std::vector<CheckOutcome>> outcomes = CheckBudget(Figures(1, 1), budget);
  ASSERT_FALSE(outcomes.ok());
  EXPECT_EQ(outcomes.status().message(),
            "mark 'after lunch' never occurs in the trace (its marks: 'after fwd', 'after bwd')");
}

// Issue 22: the message lists the marks the trace has, and suggests the nearest.
TEST(CheckBudget, AMarkThatNeverOccursIsNamedWithTheTracesMarks) {
  PolicyBudget budget;
  budget.SetMark("after fw", 1);
  Result<std::vector<CheckOutcome>> misspelt = CheckBudget(Figures(1, 1), budget);
  ASSERT_FALSE(misspelt.ok());
  EXPECT_EQ(misspelt.status().message(),
            "mark 'after fw' never occurs in the trace; did you mean 'after fwd'? (its marks: "
            "'after fwd', 'after bwd')");
  PolicyFigures unmarked = Figures(1, 1);
  unmarked.mark_bytes.clear();
  Result<std::vector<CheckOutcome>> none = CheckBudget(unmarked, budget);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "mark 'after fw' never occurs in the trace (it has no marks)");
}

TEST(CheckBudget, AStepTimeBudgetWithoutIterationsIsAnError) {
  PolicyBudget budget;
  budget.max_step_time_us = 1000.0;
  Result<std::vector<CheckOutcome>> outcomes = CheckBudget(Figures(1, 1, std::nullopt), budget);
  ASSERT_FALSE(outcomes.ok());
  EXPECT_EQ(outcomes.status().message(),
            "the trace has no iteration events: there is no step time to check");
}

TEST(Tolerance, PercentAbsoluteOrBothAndNothingAmbiguous) {
  Tolerance t;
  ASSERT_TRUE(ParseTolerance("2%", t).ok());
  EXPECT_DOUBLE_EQ(t.relative, 0.02);
  EXPECT_EQ(t.AllowedGrowth(Bytes{3261440}), 65228u);  // 65228.8 rounded down
  ASSERT_TRUE(ParseTolerance("+1MiB", t).ok());
  EXPECT_EQ(t.absolute_bytes, 1048576u);
  EXPECT_EQ(t.AllowedGrowth(Bytes{3261440}), 1048576u);        // the larger allowance
  EXPECT_EQ(t.AllowedGrowth(Bytes{100} * kGiB), 2147483648u);  // 2% of 100 GiB
  EXPECT_DOUBLE_EQ(t.AllowedGrowth(Micros{350}), 7.0);         // bytes do not apply to time
  EXPECT_EQ(t.text, "2%,+1MiB");

  Tolerance bad;
  for (const char* text : {"0.02", "2", "-1%", "%", "abc%", "+", "+-1MiB", "+1 parsec", ""}) {
    Status status = ParseTolerance(text, bad);
    EXPECT_FALSE(status.ok()) << text;
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << text;
  }
  EXPECT_NE(ParseTolerance("0.02", bad).message().find("ambiguous"), std::string::npos);
}

TEST(CheckBaseline, GrowthWithinTheToleranceAndOverIt) {
  Tolerance two_percent;
  ASSERT_TRUE(ParseTolerance("2%", two_percent).ok());
  PolicyFigures baseline = Figures(100000, 200000);
  // Allowed: 2000 B over the peak allocated, 4000 B over reserved, 60 B over "after fwd",
  // 40 B over "after bwd", 7 us over the step.
  PolicyFigures run = Figures(102000, 204001);
  std::vector<CheckOutcome> outcomes = CheckBaseline(run, &baseline, two_percent);
  ASSERT_EQ(outcomes.size(), 5u);                  // peaks, two marks, step time
  EXPECT_EQ(outcomes[0].verdict, Verdict::kPass);  // +2000 B: exactly the allowance
  EXPECT_EQ(outcomes[0].allowed_growth.bytes, 2000u);
  EXPECT_EQ(outcomes[1].verdict, Verdict::kFail);  // +4001 B
  EXPECT_EQ(outcomes[1].limit.bytes, 200000u);
  EXPECT_EQ(outcomes[2].mark, "after fwd");
  EXPECT_EQ(outcomes[2].verdict, Verdict::kPass);
  EXPECT_EQ(outcomes[4].figure, Figure::kStepTime);
  EXPECT_EQ(outcomes[4].verdict, Verdict::kPass);
}

TEST(CheckBaseline, ShrinkagePassesAndNoToleranceMeansNoGrowth) {
  PolicyFigures baseline = Figures(100000, 200000, 350.0);
  std::vector<CheckOutcome> smaller = CheckBaseline(Figures(1, 1, 1.0), &baseline, Tolerance{});
  for (const CheckOutcome& outcome : smaller) EXPECT_EQ(outcome.verdict, Verdict::kPass);
  std::vector<CheckOutcome> one_more =
      CheckBaseline(Figures(100001, 200000, 350.0), &baseline, Tolerance{});
  EXPECT_EQ(one_more[0].verdict, Verdict::kFail);
  EXPECT_EQ(one_more[1].verdict, Verdict::kPass);
}

TEST(CheckBaseline, OnlyFiguresPresentInBoth) {
  PolicyFigures baseline = Figures(10, 10, std::nullopt);  // an older report: no step time
  baseline.mark_bytes.pop_back();                          // and no "after bwd"
  std::vector<CheckOutcome> outcomes = CheckBaseline(Figures(10, 10), &baseline, Tolerance{});
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_EQ(outcomes[2].mark, "after fwd");
}

TEST(CheckBaseline, AMissingPolicyOrAnOomBaselineIsSkipped) {
  std::vector<CheckOutcome> missing = CheckBaseline(Figures(1, 1), nullptr, Tolerance{});
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].verdict, Verdict::kSkipped);
  EXPECT_EQ(missing[0].skipped_because, "the baseline report has no policy of this name");
  PolicyFigures oom = Figures(1, 1);
  oom.out_of_memory = true;
  std::vector<CheckOutcome> stopped = CheckBaseline(Figures(1, 1), &oom, Tolerance{});
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_EQ(stopped[0].verdict, Verdict::kSkipped);
}

}  // namespace
}  // namespace bucketsim
