// The charts of the report page, each an SVG document drawn from a ReportDocument with the kit
// in svg_chart.h: memory over time (every policy on one chart, phase bands, marks, the peaks),
// the composition of each policy's peak (stacked by category), bucket lifetimes as lanes, the
// caching allocator's fragmentation at the peak, and the memory-versus-step-time Pareto chart of
// a sweep. html_report.h inlines them; markdown_report.h links them as files.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/byte_unit.h"
#include "report/report_document.h"

namespace bucketsim {

struct ReportChart {
  std::string id;       // unique on a page, also the file stem: "memory-over-time"
  std::string title;    // the section heading
  std::string caption;  // how to read it, one or two sentences
  std::string svg;
  // A chart of one run (bucket lifetimes): its index in the document's runs. A page shows the
  // charts of the runs it shows up front (report/run_selection.h) and folds the others.
  std::optional<std::size_t> run = std::nullopt;
  // Set on the chart of every run that follows a chart of the few a page shows up front: the
  // page folds it under this summary ("Memory over time: every run (52)").
  std::string folded_summary = {};
};

// Every chart <svg> carries this class; the browser test counts them.
inline constexpr std::string_view kChartClass = "bucketsim-chart";

// Each chart states its bytes in `unit` (axes, labels, tooltips, captions): the page's unit
// (byte_unit.h), so that a figure reads the same in a chart and in the table beside it.

// `runs`: the runs drawn, indexes into doc.runs in page order; empty: every run.

// Unset when the report has no memory timeline (one written before the timeline existed): no
// empty chart.
std::optional<ReportChart> MemoryOverTimeChart(const ReportDocument& doc, ByteUnit unit = kMiBUnit,
                                               const std::vector<std::size_t>& runs = {});
ReportChart PeakCompositionChart(const ReportDocument& doc, ByteUnit unit = kMiBUnit,
                                 const std::vector<std::size_t>& runs = {});
// Unset when the policy made no bucket buffers (unbucketed).
std::optional<ReportChart> BucketLifetimesChart(const ReportDocument& doc, std::size_t run,
                                                ByteUnit unit = kMiBUnit);
// Unset unless some policy ran under the caching model.
std::optional<ReportChart> FragmentationChart(const ReportDocument& doc, ByteUnit unit = kMiBUnit,
                                              const std::vector<std::size_t>& runs = {});
// A sweep's trade-off (`bucketsim sweep`, doc.sweep): peak reserved memory (x) against predicted
// step time (y), one dot per (policy, cap) that ran to the end, the Pareto-optimal ones joined
// from the least memory to the most, labelled "policy @ cap MiB"; with a budget, its line and the
// configuration chosen within it ringed, and the knee (the sweep's advice: the least memory
// within a few percent of the fastest step) marked. Unset for a report that is not a sweep.
std::optional<ReportChart> ParetoChart(const ReportDocument& doc, ByteUnit unit = kMiBUnit);

// All of a document's charts in page order; `prefix` makes the ids unique across documents.
// Where the page shows a few runs up front (report/run_selection.h SelectRuns), memory over time
// draws its `series` and the bar charts its `shown` runs, each followed by the chart of every run
// (folded_summary set); every run's bucket lifetimes chart is there, named by its `run`.
std::vector<ReportChart> ReportCharts(const ReportDocument& doc, const std::string& prefix,
                                      ByteUnit unit);
// The charts of every document of a page, in the page's unit (PageUnit(docs)): ids prefixed
// "r1-", "r2-", ... when there are several.
std::vector<std::vector<ReportChart>> PageCharts(const std::vector<ReportDocument>& docs);

// The colour of a category in every chart (Paul Tol's colour-blind-safe "muted" and "light"
// schemes, https://personal.sron.nl/~pault/).
std::string_view CategoryColor(Category category);

}  // namespace bucketsim
