#include "report/report_charts.h"

#include <gtest/gtest.h>

#include "engine/replay_policies.h"
#include "io/trace_reader.h"
#include "memory/make_memory_model.h"

namespace bucketsim {
namespace {

ReportDocument TinyDocument(const std::string& allocator) {
  std::string path = std::string(BUCKETSIM_SOURCE_DIR) + "/traces/tiny-ws2.json";
  ReplayRequest request;
  request.policies = DefaultPolicies();
  request.make_memory_model = *MakeMemoryModelFactory({allocator, "", std::nullopt});
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
  for (const ReportChart& chart : ReportCharts(TinyDocument("caching"), "")) {
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
  ReportChart memory = MemoryOverTimeChart(doc);
  EXPECT_EQ(Count(memory.svg, "stroke-dasharray=\"6,4\""), 0u);
  EXPECT_EQ(Count(memory.svg, "<polyline"), 4u);  // one allocated line per policy
}

TEST(ReportCharts, MemoryChartMarksEachPeakWithItsFigures) {
  ReportChart memory = MemoryOverTimeChart(TinyDocument("exact"));
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

TEST(ReportCharts, ParetoChartDrawsTheFrontOfASweep) {
  ReportDocument doc = TinyDocument("exact");
  EXPECT_FALSE(ParetoChart(doc).has_value());
  doc.sweep = {{"a", 4 * kMiB, 1000}, {"b", 2 * kMiB, 3000}, {"c", 5 * kMiB, 4000}};
  std::optional<ReportChart> chart = ParetoChart(doc);
  ASSERT_TRUE(chart.has_value());
  EXPECT_EQ(Count(chart->svg, "<circle"), 3u);
  EXPECT_EQ(Count(chart->svg, "fill=\"#D55E00\""), 2u);  // a and b are on the front; c is not
  EXPECT_NE(chart->svg.find("<title>c: 5.00 MiB peak, 4.000 ms</title>"), std::string::npos);
}

}  // namespace
}  // namespace bucketsim
