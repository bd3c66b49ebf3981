#include "report/run_selection.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "report/framework_table.h"
#include "report/report_text.h"

namespace bucketsim {
namespace {

// A run of `policy` at `cap` whose single iteration takes `step_ms`, peaking at `reserved_mib`.
RunResult TimedRun(const std::string& policy, double cap, Bytes reserved_mib, double step_ms) {
  RunResult run;
  run.policy = policy;
  run.canonical = policy;
  run.bucket_cap_mb = cap;
  run.counters.bucketed = cap > 0 ? 1 : 0;
  run.peak.reserved_bytes = reserved_mib * kMiB;
  run.peak.allocated_bytes = run.peak.reserved_bytes / 2;
  IterationTiming it;
  it.iteration_us = step_ms * 1000;
  run.iterations = {it};
  return run;
}

ReportDocument Comparison(std::vector<RunResult> runs) {
  ReportDocument doc;
  doc.runs = std::move(runs);
  for (const RunResult& run : doc.runs) doc.step_time_us.push_back(FiguresOf(run).step_time_us);
  return doc;
}

// A sweep of p and q at caps 1, 5 and 25, and unbucketed (peak reserved MiB, step ms):
//   p: (100, 50) (200, 30) (300, 30)   q: (150, 60) (120, 40) (400, 31)   unbucketed: (90, 80)
// The knee (within 1% of the fastest, 30 ms): p at 5. q's own knee (within 1% of its fastest,
// 31 ms): q at 25.
ReportDocument Sweep() {
  ReportDocument doc =
      Comparison({TimedRun("p", 1, 100, 50), TimedRun("p", 5, 200, 30), TimedRun("p", 25, 300, 30),
                  TimedRun("q", 1, 150, 60), TimedRun("q", 5, 120, 40), TimedRun("q", 25, 400, 31),
                  TimedRun("unbucketed", 0, 90, 80)});
  SweepSection sweep;
  sweep.points = SummarizeSweep(doc.runs);
  sweep.knee = FindKnee(sweep.points, kDefaultTimeTolerance);
  doc.sweep = sweep;
  return doc;
}

TEST(ReportRunSelection, RunsThatDifferOnlyInTheCapMakeOneGroupShownAtTheAdvicesChoice) {
  const ReportDocument doc = Sweep();
  const RunSelection selection = SelectRuns(doc);
  ASSERT_EQ(selection.groups.size(), 3u);
  EXPECT_EQ(selection.groups[0].runs, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(selection.groups[1].runs, (std::vector<std::size_t>{3, 4, 5}));
  EXPECT_EQ(selection.groups[2].runs, (std::vector<std::size_t>{6}));
  // p at 5 MiB is the recommendation (the knee); q is shown at its own knee, 25 MiB.
  EXPECT_EQ(Recommended(selection.choices), 1u);
  EXPECT_EQ(selection.shown, (std::vector<std::size_t>{1, 5, 6}));
  EXPECT_TRUE(selection.Folds());
  EXPECT_TRUE(selection.IsShown(5));
  EXPECT_FALSE(selection.IsShown(4));
  // Three runs shown: each is a line of the charts.
  EXPECT_EQ(selection.series, selection.shown);
}

TEST(ReportRunSelection, ABudgetsChoiceStandsForItsPolicy) {
  ReportDocument doc = Sweep();
  // Within 250 MiB the fastest is p at 5 MiB; within 150 MiB it is q at 5 MiB (40 ms).
  doc.sweep->budget = ChooseUnderBudget(doc.sweep->points, 150 * kMiB);
  const RunSelection selection = SelectRuns(doc);
  EXPECT_EQ(Recommended(selection.choices), 4u);
  // q at its budget choice; p at its own knee.
  EXPECT_EQ(selection.shown, (std::vector<std::size_t>{1, 4, 6}));
}

TEST(ReportRunSelection, EveryRunIsShownWhenNoTwoShareAPolicy) {
  const ReportDocument doc = Comparison(
      {TimedRun("a", 25, 300, 10), TimedRun("b", 25, 200, 10), TimedRun("unbucketed", 0, 250, 12)});
  const RunSelection selection = SelectRuns(doc);
  EXPECT_FALSE(selection.Folds());
  EXPECT_EQ(selection.shown, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(selection.series, selection.shown);
}

// A comparison recommends as a sweep without a budget would: the least peak reserved within 1%
// of the fastest step, each step the one the report states.
TEST(ReportRunSelection, AComparisonsChoiceIsTheKneeOfItsRuns) {
  ReportDocument doc = Comparison(
      {TimedRun("a", 25, 300, 10), TimedRun("b", 25, 200, 10.05), TimedRun("c", 25, 100, 12)});
  SweepSection choices = ChoicesOf(doc);
  ASSERT_EQ(choices.points.size(), 3u);
  EXPECT_FALSE(choices.budget.has_value());
  EXPECT_EQ(Recommended(choices), 1u);  // b: 0.5% slower than a, 100 MiB less
  // A report read back states its step times: they decide, not the iterations it kept.
  doc.step_time_us = {10'000, 11'000, 12'000};
  EXPECT_EQ(Recommended(ChoicesOf(doc)), 0u);
  // Untimed runs (no iteration after the first) tie on time: the least memory is chosen.
  doc.step_time_us = {std::nullopt, std::nullopt, std::nullopt};
  EXPECT_EQ(Recommended(ChoicesOf(doc)), 2u);
}

// Nine policies: the chart draws six, the recommended run, the first policy and the
// Pareto-optimal ones first, then the others in page order.
TEST(ReportRunSelection, AChartDrawsAHandfulOfRunsTheRecommendedFirstPolicyAndParetoFirst) {
  std::vector<RunResult> runs;
  for (int i = 0; i < 9; ++i) {
    // Slower as i grows, except i = 7 (the fastest) and 8 (the least memory, slowest).
    runs.push_back(TimedRun(fmt::format("p{}", i), 25, 500 - 10 * i, 20 + i));
  }
  runs[7].iterations[0].iteration_us = 5000;
  runs[8].iterations[0].iteration_us = 90'000;
  runs[8].peak.reserved_bytes = 10 * kMiB;
  const ReportDocument doc = Comparison(runs);
  const RunSelection selection = SelectRuns(doc);
  ASSERT_EQ(selection.shown.size(), 9u);
  EXPECT_EQ(Recommended(selection.choices), 7u);
  // Pareto: p7 (fastest) and p8 (least memory); p0 first; then p1, p2, p3 in page order.
  EXPECT_EQ(selection.series, (std::vector<std::size_t>{0, 1, 2, 3, 7, 8}));
  EXPECT_EQ(selection.series.size(), kDefaultSeries);
}

TEST(ReportRunSelection, ATableShowsOneRowPerPolicyWithTheCapsItStandsFor) {
  const ReportDocument doc = Sweep();
  const RunSelection selection = SelectRuns(doc);
  EXPECT_EQ(GroupCaps(doc, selection.groups[0]), "5 (of 3 caps, 1 to 25)");
  EXPECT_EQ(GroupCaps(doc, selection.groups[2]), "0");
  // A table with a cap column: the cell says the group's caps.
  Table per_run;
  per_run.headers = {"policy", "cap (MiB)", "peak"};
  per_run.right_aligned = {false, true, true};
  for (std::size_t i = 0; i < doc.runs.size(); ++i) {
    per_run.rows.push_back({doc.runs[i].policy, "x", std::to_string(i)});
  }
  const Table shown = ShownRows(per_run, doc, selection, 1, true);
  EXPECT_EQ(shown.headers, per_run.headers);
  ASSERT_EQ(shown.rows.size(), 3u);
  EXPECT_EQ(shown.rows[0], (std::vector<std::string>{"p", "5 (of 3 caps, 1 to 25)", "1"}));
  EXPECT_EQ(shown.rows[1], (std::vector<std::string>{"q", "25 (of 3 caps, 1 to 25)", "5"}));
  EXPECT_EQ(shown.rows[2], (std::vector<std::string>{"unbucketed", "0", "6"}));
  // The framework table has none: it gets one, whose cells may wrap.
  const Table frameworks = ShownRows(BuildFrameworkTable(doc.runs), doc, selection, 3, false);
  ASSERT_EQ(frameworks.headers.size(), 9u);
  EXPECT_EQ(frameworks.headers[3], "cap (MiB)");
  EXPECT_EQ(frameworks.rows[1][3], "25 (of 3 caps, 1 to 25)");
  EXPECT_EQ(frameworks.right_aligned.size(), 9u);
  EXPECT_TRUE(frameworks.wrapped[3]);
  EXPECT_TRUE(frameworks.wrapped[2]);  // the setting still
}

TEST(ReportRecommendation, ASweepsIsItsKneeOrBudgetAnswerAndTheSetting) {
  ReportDocument doc = Sweep();
  doc.context.backend = "sim";
  doc.context.time_profile = "h100";
  Recommendation r = RecommendationOf(doc, ChoicesOf(doc));
  EXPECT_EQ(r.headline,
            "Recommended: p at cap 5 MiB, the least peak reserved memory within 1% of the "
            "fastest step.");
  ASSERT_EQ(r.paragraphs.size(), 2u);
  EXPECT_EQ(r.paragraphs[0].rfind("Knee: p at cap 5 MiB is the fastest", 0), 0u) << r.paragraphs[0];
  EXPECT_EQ(r.paragraphs[1].rfind("Setting for p at cap 5 MiB", 0), 0u) << r.paragraphs[1];
  // With a budget: its answer. Nothing fits 50 MiB: no headline, the budget's answer says why.
  doc.sweep->budget = ChooseUnderBudget(doc.sweep->points, 50 * kMiB);
  r = RecommendationOf(doc, ChoicesOf(doc));
  EXPECT_EQ(r.headline, "");
  ASSERT_EQ(r.paragraphs.size(), 1u);
  EXPECT_EQ(r.paragraphs[0].rfind("budget 50.00 MiB: nothing fits; the smallest is unbucketed", 0),
            0u)
      << r.paragraphs[0];
}

TEST(ReportRecommendation, WithoutAProfileItSaysTheStepsAreComputeAlone) {
  ReportDocument doc = Comparison(
      {TimedRun("a", 25, 300, 10), TimedRun("b", 25, 200, 10), TimedRun("c", 25, 250, 10)});
  doc.context.backend = "sim";
  const Recommendation r = RecommendationOf(doc, ChoicesOf(doc));
  EXPECT_EQ(r.headline,
            "Recommended: b at cap 25 MiB, the least peak reserved memory within 1% of the "
            "fastest step.");
  ASSERT_FALSE(r.paragraphs.empty());
  EXPECT_EQ(r.paragraphs.back(), kNoProfileNote);
  // A measured run has its own times.
  doc.context.backend = "host";
  EXPECT_NE(RecommendationOf(doc, ChoicesOf(doc)).paragraphs.back(), kNoProfileNote);
}

TEST(ReportRecommendation, NoneForASingleRun) {
  const ReportDocument doc = Comparison({TimedRun("a", 25, 300, 10)});
  EXPECT_TRUE(RecommendationOf(doc, ChoicesOf(doc)).empty());
}

}  // namespace
}  // namespace bucketsim
