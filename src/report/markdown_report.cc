#include "report/markdown_report.h"

#include <fmt/format.h>

#include "report/console_table.h"
#include "report/framework_table.h"
#include "report/report_text.h"
#include "report/run_selection.h"
#include "report/sweep_report.h"
#include "report/xml_escape.h"

namespace bucketsim {
namespace {

// A part of the document that stays closed until clicked (GitHub and GitLab render <details>):
// the runs a page does not show up front. Blank lines around the body keep its Markdown.
std::string Folded(std::string_view summary, const std::string& body) {
  return fmt::format("\n<details>\n<summary>{}</summary>\n\n{}\n</details>\n", XmlEscape(summary),
                     body);
}

// html_report.cc's RunsTable: one row per policy, every run folded below.
std::string RunsTable(const Table& per_run, const ReportDocument& doc,
                      const RunSelection& selection, std::size_t cap_column, bool has_cap_column) {
  if (!selection.Folds()) return RenderMarkdown(per_run);
  return fmt::format("One row per policy: {}; every run is in the table folded below.\n\n",
                     ShownRunsText(selection)) +
         RenderMarkdown(ShownRows(per_run, doc, selection, cap_column, has_cap_column)) +
         Folded(fmt::format("Every run ({})", doc.runs.size()), RenderMarkdown(per_run));
}

std::string RecommendationMarkdown(const Recommendation& recommendation, const std::string& h) {
  if (recommendation.empty()) return "";
  std::string md = fmt::format("{}# Recommendation\n\n", h);
  if (!recommendation.headline.empty()) md += fmt::format("**{}**\n\n", recommendation.headline);
  for (const std::string& paragraph : recommendation.paragraphs) md += paragraph + "\n\n";
  return md;
}

std::string SweepMarkdown(const SweepSection& sweep, const std::string& h, ByteUnit unit) {
  std::string md = fmt::format("\n{}# Sweep\n\n", h);
  const Table table = BuildSweepTable(sweep, unit);
  if (sweep.points.size() > kFoldSweepTableAbove) {
    md += fmt::format(
        "The Pareto-optimal configurations of {}; every configuration is in the table folded "
        "below.\n\n",
        sweep.points.size());
    md +=
        RenderMarkdown(BuildParetoSweepTable(sweep, unit)) +
        Folded(fmt::format("Every configuration ({})", sweep.points.size()), RenderMarkdown(table));
  } else {
    md += RenderMarkdown(table);
  }
  md += fmt::format("\n\\{}\n", kSweepParetoNote);  // "\*": not a list item
  for (const std::string& paragraph : SweepFindings(sweep, unit))
    md += fmt::format("\n{}\n", paragraph);
  return md;
}

std::string ChartMarkdown(const ReportChart& chart, std::string_view chart_dir,
                          const std::string& h) {
  return fmt::format("\n{}# {}\n\n![{}]({}/{}.svg)\n\n{}\n", h, chart.title, chart.title, chart_dir,
                     chart.id, chart.caption);
}

std::string RunMarkdown(const RunResult& run, const std::string& h, ByteUnit unit) {
  std::string md = fmt::format("\n{}# {} (`{}`)\n\n", h, run.policy, run.canonical);
  md += PeakText(run, unit) + "\n\n";
  if (auto text = FragmentationText(run, unit)) md += *text + "\n\n";
  md += RenderMarkdown(BuildPeakCompositionTable(run, unit));
  if (!run.peak.largest.empty()) md += "\n" + RenderMarkdown(BuildLargestAtPeakTable(run, unit));
  return md;
}

void AppendDocument(std::string& out, const ReportDocument& doc,
                    const std::vector<ReportChart>* charts, std::string_view chart_dir,
                    const std::string& h, ByteUnit unit) {
  const RunSelection selection = SelectRuns(doc);
  if (!doc.trace.description.empty()) out += fmt::format("{}\n\n", doc.trace.description);
  out += TraceSummaryText(doc) + "\n\n";
  out += RecommendationMarkdown(RecommendationOf(doc, selection.choices, unit), h);
  out += fmt::format("{}# Policies\n\n", h) +
         RunsTable(BuildComparisonTable(doc.runs, unit), doc, selection, 1, true);
  for (std::size_t i = 0; i < doc.runs.size(); ++i) {
    if (const std::optional<OomEvent>& oom = doc.runs[i].oom) {
      out += fmt::format("\n**{}**: {}; its figures stop there.\n", RunLabel(doc.runs, i),
                         DescribeOom(*oom));
    }
  }
  if (SpansFrameworks(doc.runs)) {
    out += fmt::format("\n{}# Across frameworks\n\n", h) +
           RunsTable(BuildFrameworkTable(doc.runs, unit), doc, selection, 3, false);
  }
  if (!doc.predictions.empty()) {
    out += fmt::format("\n{}# Measured against predicted\n\n{}\n\n", h,
                       PredictionText(doc.predictions));
    out += RenderMarkdown(BuildPredictionTable(doc.predictions));
  }
  if (doc.sweep) out += SweepMarkdown(*doc.sweep, h, unit);
  if (!doc.has_timeline) out += fmt::format("\n{}\n", kNoTimelineNote);
  if (charts != nullptr) {
    // Charts of every run and of the runs not shown up front are linked, not shown.
    std::string folded;
    std::size_t folded_count = 0;
    for (const ReportChart& chart : *charts) {
      if (!chart.folded_summary.empty()) {
        out += fmt::format("\n[{}]({}/{}.svg)\n", chart.folded_summary, chart_dir, chart.id);
      } else if (chart.run && !selection.IsShown(*chart.run)) {
        folded +=
            fmt::format("- [{}]({}/{}.svg)\n", RunLabel(doc.runs, *chart.run), chart_dir, chart.id);
        ++folded_count;
      } else {
        out += ChartMarkdown(chart, chart_dir, h);
      }
    }
    if (folded_count > 0) {
      out += Folded(fmt::format("Bucket lifetimes of the other runs ({})", folded_count), folded);
    }
  }
  std::string folded_runs;
  for (std::size_t i = 0; i < doc.runs.size(); ++i) {
    (selection.IsShown(i) ? out : folded_runs) += RunMarkdown(doc.runs[i], h, unit);
  }
  if (!folded_runs.empty()) {
    out += Folded(
        fmt::format("Peaks of the other runs ({})", doc.runs.size() - selection.shown.size()),
        folded_runs);
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
  const std::string across = AcrossDocumentsText(docs, unit);
  if (!across.empty()) out += fmt::format("\n## Across the traces\n\n{}\n", across);
  for (std::size_t i = 0; i < docs.size(); ++i) {
    out += fmt::format("\n## {}. {}\n\n", i + 1, DocumentTitle(docs[i]));
    AppendDocument(out, docs[i], charts.empty() ? nullptr : &charts[i], chart_dir, "##", unit);
  }
  return out;
}

}  // namespace bucketsim
