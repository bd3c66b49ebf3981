#include "report/markdown_report.h"

#include <fmt/format.h>

#include "report/console_table.h"
#include "report/framework_table.h"
#include "report/report_text.h"
#include "report/sweep_report.h"

namespace bucketsim {
namespace {

void AppendDocument(std::string& out, const ReportDocument& doc,
                    const std::vector<ReportChart>* charts, std::string_view chart_dir,
                    const std::string& h, ByteUnit unit) {
  if (!doc.trace.description.empty()) out += fmt::format("{}\n\n", doc.trace.description);
  out += TraceSummaryText(doc) + "\n\n";
  out += fmt::format("{}# Policies\n\n", h) + RenderMarkdown(BuildComparisonTable(doc.runs, unit));
  for (const RunResult& run : doc.runs) {
    if (run.oom)
      out +=
          fmt::format("\n**{}**: {}; its figures stop there.\n", run.policy, DescribeOom(*run.oom));
  }
  if (SpansFrameworks(doc.runs)) {
    out += fmt::format("\n{}# Across frameworks\n\n", h) +
           RenderMarkdown(BuildFrameworkTable(doc.runs, unit));
  }
  if (!doc.predictions.empty()) {
    out += fmt::format("\n{}# Measured against predicted\n\n{}\n\n", h,
                       PredictionText(doc.predictions));
    out += RenderMarkdown(BuildPredictionTable(doc.predictions));
  }
  if (doc.sweep) {
    out += fmt::format("\n{}# Sweep\n\n", h) + RenderMarkdown(BuildSweepTable(*doc.sweep, unit));
    out += fmt::format("\n\\{}\n", kSweepParetoNote);  // "\*": not a list item
    for (const std::string& paragraph : SweepAdvice(*doc.sweep, unit)) {
      out += fmt::format("\n{}\n", paragraph);
    }
  }
  if (!doc.has_timeline) out += fmt::format("\n{}\n", kNoTimelineNote);
  if (charts != nullptr) {
    for (const ReportChart& chart : *charts) {
      out += fmt::format("\n{}# {}\n\n![{}]({}/{}.svg)\n\n{}\n", h, chart.title, chart.title,
                         chart_dir, chart.id, chart.caption);
    }
  }
  for (const RunResult& run : doc.runs) {
    out += fmt::format("\n{}# {} (`{}`)\n\n", h, run.policy, run.canonical);
    out += PeakText(run, unit) + "\n\n";
    if (auto text = FragmentationText(run, unit)) out += *text + "\n\n";
    out += RenderMarkdown(BuildPeakCompositionTable(run, unit));
    if (!run.peak.largest.empty()) out += "\n" + RenderMarkdown(BuildLargestAtPeakTable(run, unit));
  }
  out += fmt::format("\n{}# Context\n\n", h);
  for (const auto& [label, value] : ContextItems(doc)) {
    out += label == "command" ? fmt::format("- {}: `{}`\n", label, value)
                              : fmt::format("- {}: {}\n", label, value);
  }
}

}  // namespace

std::string FormatMarkdownReport(const std::vector<ReportDocument>& docs,
                                 const std::vector<std::vector<ReportChart>>& charts,
                                 std::string_view chart_dir) {
  std::string out;
  const ByteUnit unit = PageUnit(docs);  // as PageCharts draws the charts
  if (docs.size() == 1) {
    out = fmt::format("# bucketsim report: {}\n\n", DocumentTitle(docs.front()));
    AppendDocument(out, docs.front(), charts.empty() ? nullptr : &charts.front(), chart_dir, "#",
                   unit);
    return out;
  }
  out = fmt::format("# bucketsim report: {} reports\n", docs.size());
  for (std::size_t i = 0; i < docs.size(); ++i) {
    out += fmt::format("\n## {}. {}\n\n", i + 1, DocumentTitle(docs[i]));
    AppendDocument(out, docs[i], charts.empty() ? nullptr : &charts[i], chart_dir, "##", unit);
  }
  return out;
}

}  // namespace bucketsim
