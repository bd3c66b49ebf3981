#include "report/sweep_report.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

SweepPoint Point(std::string policy, double cap_mb, Bytes reserved_mib, Micros step_us) {
  SweepPoint p;
  p.policy = std::move(policy);
  p.canonical = p.policy;
  p.bucket_cap_mb = cap_mb;
  p.peak_allocated_bytes = reserved_mib * kMiB;
  p.peak_reserved_bytes = reserved_mib * kMiB;
  p.step_time_us = step_us;
  p.bucketed_requests = cap_mb > 0 ? 1 : 0;
  return p;
}

SweepSection Section(std::vector<SweepPoint> points, Bytes budget_mib) {
  SweepSection sweep;
  sweep.points = std::move(points);
  MarkPareto(sweep.points);
  sweep.budget = ChooseUnderBudget(sweep.points, budget_mib * kMiB);
  return sweep;
}

// Two traces, budget 10 MiB. a: cap 1 (4 MiB, 2 ms), cap 4 (8 MiB, 1 ms), unbucketed (3 MiB,
// 3 ms): all fit, cap 4 is fastest. b: cap 1 (6 MiB, 5 ms), cap 4 (12 MiB, 4 ms), unbucketed
// (5 MiB, 6 ms): cap 4 does not fit, cap 1 is the fastest that does.
TEST(DescribeBudgetAcrossTraces, NamesWhatFitsEveryTraceAndEachOnesChoice) {
  const std::vector<SweepPoint> a = {Point("backward-only", 1, 4, 2000),
                                     Point("backward-only", 4, 8, 1000),
                                     Point("unbucketed", 0, 3, 3000)};
  const std::vector<SweepPoint> b = {Point("backward-only", 1, 6, 5000),
                                     Point("backward-only", 4, 12, 4000),
                                     Point("unbucketed", 0, 5, 6000)};
  auto across = [&](Bytes budget_mib) {
    const SweepSection first = Section(a, budget_mib);
    const SweepSection second = Section(b, budget_mib);
    return DescribeBudgetAcrossTraces({"a.json", "b.json"}, {&first, &second});
  };
  EXPECT_EQ(across(10),
            "Across the 2 traces, budget 10.00 MiB: 2 configurations fit on every trace "
            "(backward-only at cap 1 MiB and unbucketed); the fastest that fits is not the same "
            "on every trace: backward-only at cap 4 MiB for a.json and backward-only at cap 1 MiB "
            "for b.json.");
  // With 20 MiB everything fits both, and cap 4 MiB is the fastest on both.
  EXPECT_EQ(across(20),
            "Across the 2 traces, budget 20.00 MiB: 3 configurations fit on every trace "
            "(backward-only at cap 1 MiB, backward-only at cap 4 MiB and unbucketed); the fastest "
            "that fits is backward-only at cap 4 MiB on every trace.");
  // With 4 MiB: a's cap 1 MiB and unbucketed fit, nothing of b does.
  EXPECT_EQ(across(4),
            "Across the 2 traces, budget 4.00 MiB: no configuration fits on every trace.");
}

// The exact threshold (ws x numel x element size / 2^20) is written as the cap search writes
// caps, three significant digits rounded up, not as 0.413818359375 beside them (issue 22).
TEST(SweepAdvice, TheLeastBucketingCapIsWrittenAsTheOtherCaps) {
  SweepPoint nothing = Point("backward-only", 0.25, 4, 2000);
  nothing.bucketed_requests = 0;
  nothing.bypassed_requests = 6;
  SweepSection sweep = Section({nothing, Point("unbucketed", 0, 4, 2000)}, 10);
  sweep.smallest_bucketing_cap_mb = 0.413818359375;
  const std::vector<std::string> advice = SweepAdvice(sweep);
  ASSERT_FALSE(advice.empty());
  const std::string& coverage = advice.front();
  EXPECT_EQ(coverage.rfind("Cap 0.25 MiB buckets nothing", 0), 0u) << coverage;
  EXPECT_EQ(coverage.substr(coverage.find(" The least cap")),
            " The least cap that buckets any request is 0.414 MiB.");
}

// A page shows the recommendation at its top and the findings under the sweep table; the
// terminal prints both, in the order it always has: search, coverage, knee, budget, setting.
TEST(SweepAdvice, IsTheFindingsThenTheRecommendation) {
  SweepPoint nothing = Point("backward-only", 0.25, 4, 2000);
  nothing.bucketed_requests = 0;
  nothing.bypassed_requests = 6;
  SweepSection sweep =
      Section({nothing, Point("backward-only", 1, 8, 1000), Point("unbucketed", 0, 3, 3000)}, 6);
  sweep.knee = FindKnee(sweep.points, kDefaultTimeTolerance);
  auto starts = [](const std::vector<std::string>& paragraphs) {
    std::vector<std::string> heads;
    for (const std::string& p : paragraphs) heads.push_back(p.substr(0, p.find(' ')));
    return heads;
  };
  // With a budget its answer is the recommendation, the knee (cap 1 MiB, 8 MiB) a finding.
  EXPECT_EQ(starts(SweepFindings(sweep)), (std::vector<std::string>{"Cap", "Knee:"}));
  EXPECT_EQ(starts(SweepRecommendation(sweep)), (std::vector<std::string>{"budget", "Setting"}));
  EXPECT_EQ(RecommendationHeadline(sweep),
            "Recommended: backward-only at cap 0.25 MiB, the fastest configuration that fits the "
            "budget of 6.00 MiB.");
  std::vector<std::string> both = SweepFindings(sweep);
  for (const std::string& p : SweepRecommendation(sweep)) both.push_back(p);
  EXPECT_EQ(SweepAdvice(sweep), both);
  // Without one, the knee is the recommendation.
  sweep.budget.reset();
  EXPECT_EQ(starts(SweepFindings(sweep)), (std::vector<std::string>{"Cap"}));
  EXPECT_EQ(starts(SweepRecommendation(sweep)), (std::vector<std::string>{"Knee:", "Setting"}));
  EXPECT_EQ(RecommendationHeadline(sweep),
            "Recommended: backward-only at cap 1 MiB, the least peak reserved memory within 1% of "
            "the fastest step.");
  both = SweepFindings(sweep);
  for (const std::string& p : SweepRecommendation(sweep)) both.push_back(p);
  EXPECT_EQ(SweepAdvice(sweep), both);
}

TEST(DescribeBudgetAcrossTraces, NothingWithoutABudgetOrASecondTrace) {
  SweepSection a = Section({Point("unbucketed", 0, 3, 3000)}, 10);
  EXPECT_EQ(DescribeBudgetAcrossTraces({"a.json"}, {&a}), "");
  SweepSection no_budget = a;
  no_budget.budget.reset();
  EXPECT_EQ(DescribeBudgetAcrossTraces({"a.json", "b.json"}, {&no_budget, &no_budget}), "");
}

// A configuration is the same one in two sweeps when its policy and cap are: a cap that only
// one trace's sweep tried (a cap search) fits on "every trace" only if each has it.
TEST(DescribeBudgetAcrossTraces, AConfigurationOneTraceLacksIsNotCounted) {
  SweepSection a =
      Section({Point("backward-only", 2, 4, 1000), Point("unbucketed", 0, 3, 3000)}, 10);
  SweepSection b =
      Section({Point("backward-only", 3, 4, 1000), Point("unbucketed", 0, 3, 3000)}, 10);
  EXPECT_EQ(DescribeBudgetAcrossTraces({"a.json", "b.json"}, {&a, &b}),
            "Across the 2 traces, budget 10.00 MiB: 1 configuration fits on every trace "
            "(unbucketed); the fastest that fits is not the same on every trace: backward-only "
            "at cap 2 MiB for a.json and backward-only at cap 3 MiB for b.json.");
}

}  // namespace
}  // namespace bucketsim
