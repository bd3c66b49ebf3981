#include "report/report_charts.h"

#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/replay_policies.h"
#include "engine/sweep_summary.h"
#include "io/trace_reader.h"
#include "memory/make_memory_model.h"
#include "report/run_selection.h"

namespace bucketsim {
namespace {

ReportDocument TinyDocument(const std::string& allocator) {
  std::string path = std::string(BUCKETSIM_SOURCE_DIR) + "/traces/tiny-ws2.json";
  ReplayRequest request;
  request.policies = DefaultPolicies();
  request.make_memory_model = *MakeMemoryModelFactory({allocator, "", std::nullopt, std::nullopt});
  Result<ReplayOutcome> outcome = ReplayPolicies(
      [&](TraceHeader& header, EventSink& sink) { return ReadTrace(path, header, sink); }, request);
  EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
  ReportContext context;
  context.memory_model = allocator;
  return DocumentFromOutcome(*outcome, context);
}

std::size_t Count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(ReportCharts, OneChartPerViewInPageOrder) {
  std::vector<std::string> ids;
  for (const ReportChart& chart : ReportCharts(TinyDocument("caching"), "", kMiBUnit)) {
    ids.push_back(chart.id);
    EXPECT_EQ(Count(chart.svg, "class=\"bucketsim-chart\""), 1u) << chart.id;
    EXPECT_EQ(chart.svg.substr(chart.svg.size() - 7), "</svg>\n");
  }
  // unbucketed makes no bucket buffers: no lane chart of its own.
  EXPECT_EQ(ids, (std::vector<std::string>{"memory-over-time", "peak-composition", "fragmentation",
                                           "bucket-lifetimes-1", "bucket-lifetimes-2",
                                           "bucket-lifetimes-3"}));
}

TEST(ReportCharts, TheExactModelHasNoFragmentationChartNorReservedLines) {
  ReportDocument doc = TinyDocument("exact");
  EXPECT_FALSE(FragmentationChart(doc).has_value());
  ReportChart memory = *MemoryOverTimeChart(doc);
  EXPECT_EQ(Count(memory.svg, "stroke-dasharray=\"6,4\""), 0u);
  EXPECT_EQ(Count(memory.svg, "<polyline"), 4u);  // one allocated line per policy
}

TEST(ReportCharts, MemoryChartMarksEachPeakWithItsFigures) {
  ReportChart memory = *MemoryOverTimeChart(TinyDocument("exact"));
  // tests/engine/tiny_trace_test.cc: always-allocated peaks at 3507200 B (3.34 MiB), event 27.
  EXPECT_NE(memory.svg.find("<title>always-allocated: peak 3.34 MiB allocated at event 27 "
                            "(iteration 1, backward)</title>"),
            std::string::npos);
  // The byte axis: 0 to 4 MiB, labelled with its unit; the event axis to the 38 events.
  EXPECT_NE(memory.svg.find(">memory (MiB)</text>"), std::string::npos);
  EXPECT_NE(memory.svg.find(">4</text>"), std::string::npos);
  EXPECT_NE(memory.svg.find(">35</text>"), std::string::npos);
  // Phase bands (2 iterations x forward, backward, step, zero_grad, and init) and the six marks.
  EXPECT_EQ(Count(memory.svg, "<title>iteration "), 9u);
  EXPECT_EQ(Count(memory.svg, "stroke-dasharray=\"2,3\""), 6u);
}

TEST(ReportCharts, PeakCompositionStacksOnlyTheCategoriesPresent) {
  ReportChart chart = PeakCompositionChart(TinyDocument("exact"));
  // backward-only at its peak: bucket_data 2 x 262144 B = 0.50 MiB (tiny_trace_test.cc).
  EXPECT_NE(chart.svg.find("<title>backward-only: bucket_data 0.50 MiB</title>"),
            std::string::npos);
  EXPECT_EQ(chart.svg.find("grad_shard"), std::string::npos);  // nothing of it anywhere
}

TEST(ReportCharts, SeveralDocumentsGetPrefixedIds) {
  std::vector<ReportDocument> docs = {TinyDocument("exact"), TinyDocument("caching")};
  std::vector<std::vector<ReportChart>> charts = PageCharts(docs);
  ASSERT_EQ(charts.size(), 2u);
  EXPECT_EQ(charts[0].front().id, "r1-memory-over-time");
  EXPECT_EQ(charts[1].front().id, "r2-memory-over-time");
  EXPECT_EQ(charts[0].size(), 5u);  // no fragmentation chart under exact
  EXPECT_EQ(charts[1].size(), 6u);
}

// A run of a sweep whose single iteration takes `step_ms`, peaking at `reserved_mib`.
RunResult SweepRun(const char* policy, double cap, Bytes reserved_mib, double step_ms) {
  RunResult run;
  run.policy = policy;
  run.bucket_cap_mb = cap;
  run.peak.reserved_bytes = reserved_mib * kMiB;
  run.peak.allocated_bytes = run.peak.reserved_bytes / 2;
  IterationTiming it;
  it.iteration_us = step_ms * 1000;
  run.iterations = {it};
  return run;
}

struct Mark {
  std::string cx, cy, title;
};

// The dots of the configurations (their tooltips name the step time), in document order.
std::vector<Mark> PointMarks(const std::string& svg) {
  static const std::regex kCircle(
      "<circle cx=\"([^\"]+)\" cy=\"([^\"]+)\" r=\"5\"[^>]*><title>([^<]*, step [^<]*)</title>");
  std::vector<Mark> marks;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), kCircle);
       it != std::sregex_iterator(); ++it) {
    marks.push_back({(*it)[1], (*it)[2], (*it)[3]});
  }
  return marks;
}

// The vertices of the Pareto front's polyline.
std::vector<std::string> FrontVertices(const std::string& svg) {
  static const std::regex kFront("<polyline points=\"([^\"]*)\"[^>]*><title>Pareto front</title>");
  std::smatch match;
  if (!std::regex_search(svg, match, kFront)) return {};
  std::vector<std::string> vertices;
  std::istringstream in(match[1].str());
  for (std::string vertex; in >> vertex;) vertices.push_back(vertex);
  return vertices;
}

ReportDocument SweepDocument(std::optional<Bytes> budget_mib) {
  // (peak reserved MiB, step ms): a (100, 50), b (200, 30), c (300, 30) beaten by b, d (150, 60)
  // beaten by a, e (120, 40), f out of memory. The front from the least memory: a, e, b.
  std::vector<RunResult> runs = {SweepRun("p", 1, 100, 50),  SweepRun("p", 5, 200, 30),
                                 SweepRun("p", 25, 300, 30), SweepRun("q", 1, 150, 60),
                                 SweepRun("q", 5, 120, 40),  SweepRun("q", 25, 10, 1)};
  runs[5].oom = OomEvent{};
  ReportDocument doc;
  doc.runs = runs;
  SweepSection sweep{SummarizeSweep(runs), {}, std::nullopt, std::nullopt, std::nullopt};
  if (budget_mib) sweep.budget = ChooseUnderBudget(sweep.points, *budget_mib * kMiB);
  doc.sweep = sweep;
  return doc;
}

TEST(ReportCharts, ParetoChartHasOneDotPerConfigurationAndJoinsExactlyTheFront) {
  EXPECT_FALSE(ParetoChart(TinyDocument("exact")).has_value());  // not a sweep
  std::optional<ReportChart> chart = ParetoChart(SweepDocument(std::nullopt));
  ASSERT_TRUE(chart.has_value());
  EXPECT_EQ(chart->id, "pareto");
  std::vector<Mark> marks = PointMarks(chart->svg);
  ASSERT_EQ(marks.size(), 5u);  // the one that ran out of memory is not drawn
  EXPECT_EQ(marks[0].title,
            "p @ 1 MiB: peak reserved 100.00 MiB, step 50.000 ms, exposed communication 0.000 ms "
            "(Pareto-optimal)");
  EXPECT_EQ(marks[2].title,
            "p @ 25 MiB: peak reserved 300.00 MiB, step 30.000 ms, exposed communication 0.000 ms");
  EXPECT_NE(chart->svg.find(">q @ 5 MiB</text>"), std::string::npos);  // the label beside it
  // Dominated configurations are not labelled (their tooltips and the table name them).
  EXPECT_EQ(chart->svg.find(">q @ 1 MiB</text>"), std::string::npos);
  EXPECT_EQ(chart->svg.find(">p @ 25 MiB</text>"), std::string::npos);
  // The time axis spans the points (30 to 60 ms, padded by 3 ms), not 0 to 60: its ticks,
  // right-aligned left of the plot, run from 20 to 70 ms.
  EXPECT_EQ(chart->svg.find("text-anchor=\"end\" font-size=\"12\" fill=\"#222222\">0</text>"),
            std::string::npos);
  EXPECT_NE(chart->svg.find("text-anchor=\"end\" font-size=\"12\" fill=\"#222222\">20</text>"),
            std::string::npos);
  EXPECT_NE(chart->svg.find("text-anchor=\"end\" font-size=\"12\" fill=\"#222222\">70</text>"),
            std::string::npos);
  EXPECT_EQ(Count(chart->svg, "<polyline"), 1u);
  auto vertex = [&](std::size_t i) { return marks[i].cx + "," + marks[i].cy; };
  EXPECT_EQ(FrontVertices(chart->svg),
            (std::vector<std::string>{vertex(0), vertex(4), vertex(1)}));  // a, e, b
  // a (100 MiB, 50 ms) against e (120 MiB, 40 ms): more memory to the right, more time upwards
  // (SVG's y grows downwards).
  EXPECT_LT(std::stod(marks[0].cx), std::stod(marks[4].cx));
  EXPECT_LT(std::stod(marks[0].cy), std::stod(marks[4].cy));
  EXPECT_NE(chart->caption.find("1 configuration(s) ran out of device memory"), std::string::npos);
  EXPECT_EQ(chart->svg.find("budget"), std::string::npos);
}

TEST(ReportCharts, ParetoChartDrawsTheBudgetAndRingsTheChoice) {
  std::optional<ReportChart> chart = ParetoChart(SweepDocument(250));
  ASSERT_TRUE(chart.has_value());
  // b (200 MiB, 30 ms) is the fastest within 250 MiB.
  EXPECT_NE(chart->svg.find("<title>chosen within the budget: p @ 5 MiB</title>"),
            std::string::npos);
  EXPECT_NE(chart->svg.find(">budget 250 MiB</text>"), std::string::npos);  // the axis' unit
  EXPECT_EQ(PointMarks(chart->svg).size(), 5u);
  EXPECT_NE(chart->caption.find("the dot ringed in black the fastest configuration within it"),
            std::string::npos);
  std::optional<ReportChart> none = ParetoChart(SweepDocument(50));
  EXPECT_EQ(none->svg.find("chosen within the budget"), std::string::npos);
  EXPECT_NE(none->caption.find("nothing fits within it"), std::string::npos);
}

TEST(ReportCharts, ASweepComesFirstAndNamesEachRunWithItsCap) {
  ReportDocument doc = TinyDocument("exact");
  doc.runs.push_back(doc.runs[1]);  // backward-only again, at another cap
  doc.runs.back().bucket_cap_mb = 5;
  doc.step_time_us.push_back(std::nullopt);
  doc.sweep = SweepSection{SummarizeSweep(doc.runs), {}, std::nullopt, std::nullopt, std::nullopt};
  std::vector<ReportChart> charts = ReportCharts(doc, "", kMiBUnit);
  ASSERT_GE(charts.size(), 2u);
  EXPECT_EQ(charts[0].id, "pareto");
  EXPECT_EQ(charts[1].id, "memory-over-time");
  // One line per policy: backward-only at the smaller of its two caps, whose figures tie.
  EXPECT_NE(charts[1].svg.find(">backward-only @ 0.25 MiB</text>"), std::string::npos);
  EXPECT_EQ(charts[1].svg.find(">backward-only @ 5 MiB</text>"), std::string::npos);
  EXPECT_NE(charts[1].svg.find(">always-allocated</text>"), std::string::npos);  // one cap only
  // Every run on the chart folded below it.
  EXPECT_EQ(charts[2].id, "memory-over-time-all");
  EXPECT_NE(charts[2].svg.find(">backward-only @ 5 MiB</text>"), std::string::npos);
}

TEST(ReportCharts, NoTimelineNoMemoryOverTimeChart) {
  ReportDocument doc = TinyDocument("exact");
  doc.has_timeline = false;
  EXPECT_FALSE(MemoryOverTimeChart(doc).has_value());
  for (const ReportChart& chart : ReportCharts(doc, "", kMiBUnit))
    EXPECT_NE(chart.id, "memory-over-time");
}

}  // namespace
}  // namespace bucketsim

namespace bucketsim {
namespace {

TEST(ReportCharts, ParetoChartRingsTheKnee) {
  ReportDocument doc = SweepDocument(std::nullopt);
  // b (200 MiB, 30 ms) and c (300 MiB, 30 ms) are the fastest; within 1% of them b has the
  // least memory: the knee.
  doc.sweep->knee = FindKnee(doc.sweep->points, 0.01);
  ASSERT_EQ(doc.sweep->knee.knee, 1u);
  std::optional<ReportChart> chart = ParetoChart(doc);
  ASSERT_TRUE(chart.has_value());
  const Mark b = PointMarks(chart->svg)[1];
  EXPECT_NE(chart->svg.find(fmt::format(
                "<circle cx=\"{}\" cy=\"{}\" r=\"13\" fill=\"none\" stroke=\"#009E73\" "
                "stroke-width=\"2.5\"><title>knee: p @ 5 MiB (the least peak reserved within 1% "
                "of the fastest step)</title>",
                b.cx, b.cy)),
            std::string::npos)
      << chart->svg;
  EXPECT_NE(chart->svg.find(">knee</text>"), std::string::npos);  // the legend
  EXPECT_NE(chart->caption.find("The green ring is the knee"), std::string::npos);
  // No knee, no ring.
  EXPECT_EQ(ParetoChart(SweepDocument(std::nullopt))->svg.find("knee"), std::string::npos);
}

TEST(ReportCharts, APageOfGibibytesDrawsEveryChartInGiB) {
  ReportDocument doc = TinyDocument("caching");
  for (RunResult& run : doc.runs) run.peak.reserved_bytes = 5 * kGiB;  // every peak past 1 GiB
  const std::vector<std::vector<ReportChart>> charts = PageCharts({doc});
  for (const ReportChart& chart : charts.front()) {
    EXPECT_EQ(chart.svg.find("MiB"), std::string::npos) << chart.id;
  }
  EXPECT_NE(charts.front()[0].svg.find(">memory (GiB)</text>"), std::string::npos);
}

}  // namespace
}  // namespace bucketsim

namespace bucketsim {
namespace {

// The tiny trace's four policies, and backward-only again at 11 more caps (the same replay: a
// sweep's runs of one policy), as a sweep.
ReportDocument ManyRunsDocument() {
  ReportDocument doc = TinyDocument("caching");
  for (int cap = 1; cap <= 11; ++cap) {
    doc.runs.push_back(doc.runs[1]);
    doc.runs.back().bucket_cap_mb = cap;
    doc.step_time_us.push_back(doc.step_time_us[1]);
  }
  doc.sweep = SweepSection{SummarizeSweep(doc.runs), {}, std::nullopt, std::nullopt, std::nullopt};
  doc.sweep->knee = FindKnee(doc.sweep->points, kDefaultTimeTolerance);
  return doc;
}

TEST(ReportCharts, APageOfManyRunsDrawsOnePerPolicyAndFoldsTheChartOfEveryRun) {
  const ReportDocument doc = ManyRunsDocument();
  const std::vector<ReportChart> charts = ReportCharts(doc, "", kMiBUnit);
  std::vector<std::string> ids;
  for (const ReportChart& chart : charts) {
    if (!chart.run) ids.push_back(chart.id);
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"pareto", "memory-over-time", "memory-over-time-all",
                                           "peak-composition", "peak-composition-all",
                                           "fragmentation", "fragmentation-all"}));
  const ReportChart& memory = charts[1];
  const ReportChart& all = charts[2];
  EXPECT_TRUE(memory.folded_summary.empty());
  EXPECT_EQ(all.folded_summary, "Memory over time: every run (15)");
  EXPECT_EQ(all.title, "Memory over time, every run");
  // One line per policy up front (allocated and reserved each), every run's in the folded one.
  EXPECT_EQ(Count(memory.svg, ": allocated</title>"), 4u);
  EXPECT_EQ(Count(all.svg, ": allocated</title>"), 15u);
  EXPECT_NE(memory.caption.find("4 of the 15 runs are drawn: one per policy, the recommended "
                                "run, and each other policy at its own knee"),
            std::string::npos)
      << memory.caption;
  EXPECT_EQ(Count(charts[3].svg, ": bucket_data "), 3u);  // three bucketing policies' bars
  // A bucket lifetimes chart for each run that made buffers, named by its run.
  std::size_t lifetimes = 0;
  for (const ReportChart& chart : charts) {
    if (!chart.run) continue;
    EXPECT_EQ(chart.id, fmt::format("bucket-lifetimes-{}", *chart.run + 1));
    ++lifetimes;
  }
  EXPECT_EQ(lifetimes, 14u);  // every run but unbucketed
}

// A comparison of eight policies: the memory chart draws six of them, every one on the chart
// folded below; the bar charts keep a bar per policy.
TEST(ReportCharts, AComparisonOfManyPoliciesDrawsSixLines) {
  ReportDocument doc = TinyDocument("caching");
  for (int i = 0; i < 4; ++i) {
    doc.runs.push_back(doc.runs[i]);
    doc.runs.back().policy += "-again";
    doc.step_time_us.push_back(doc.step_time_us[i]);
  }
  const std::vector<ReportChart> charts = ReportCharts(doc, "", kMiBUnit);
  ASSERT_GE(charts.size(), 4u);
  EXPECT_EQ(charts[0].id, "memory-over-time");
  EXPECT_EQ(Count(charts[0].svg, ": allocated</title>"), kDefaultSeries);
  EXPECT_NE(charts[0].caption.find(" 6 of the 8 runs are drawn: the recommended run, the first "
                                   "policy given and the Pareto-optimal ones first, then the "
                                   "others in the page's order; every run is on the chart folded "
                                   "below."),
            std::string::npos)
      << charts[0].caption;
  EXPECT_EQ(charts[1].id, "memory-over-time-all");
  EXPECT_EQ(Count(charts[1].svg, ": allocated</title>"), 8u);
  EXPECT_EQ(charts[2].id, "peak-composition");  // every policy shown: nothing folded
  EXPECT_EQ(charts[3].id, "fragmentation");
}

// Every text of the chart of 15 runs lies inside it: the legend's rows are counted as drawn.
TEST(ReportCharts, TheMemoryChartIsTallEnoughForEveryLegendRow) {
  const ReportChart chart = *MemoryOverTimeChart(ManyRunsDocument());
  std::smatch match;
  ASSERT_TRUE(std::regex_search(chart.svg, match, std::regex("viewBox=\"0 0 960 ([0-9.]+)\"")));
  const double height = std::stod(match[1]);
  static const std::regex kText("<text x=\"[^\"]+\" y=\"([0-9.]+)\"");
  double lowest = 0;
  for (auto it = std::sregex_iterator(chart.svg.begin(), chart.svg.end(), kText);
       it != std::sregex_iterator(); ++it) {
    lowest = std::max(lowest, std::stod((*it)[1]));
  }
  EXPECT_LT(lowest + 4, height);
  EXPECT_GT(lowest, 450);  // four legend rows below the plot (330)
}

// Configurations with the same figures share a dot: one label names the preferred one and how
// many more, placed clear of the knee's ring.
TEST(ReportCharts, ParetoChartLabelsADotOfTiedConfigurationsOnce) {
  ReportDocument doc = SweepDocument(std::nullopt);
  doc.runs.push_back(SweepRun("r", 5, 200, 30));  // b's figures
  doc.sweep->points = SummarizeSweep(doc.runs);
  doc.sweep->knee = FindKnee(doc.sweep->points, 0.01);
  const std::string svg = ParetoChart(doc)->svg;
  EXPECT_EQ(Count(svg, ">p @ 5 MiB and 1 more</text>"), 1u) << svg;
  EXPECT_EQ(Count(svg, ">r @ 5 MiB</text>"), 0u);
  EXPECT_EQ(Count(svg, ">p @ 1 MiB</text>"), 1u);
  EXPECT_EQ(Count(svg, ">q @ 5 MiB</text>"), 1u);
}

}  // namespace
}  // namespace bucketsim
