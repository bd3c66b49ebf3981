#include "report/html_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/status.h"
#include "report/console_table.h"
#include "report/framework_table.h"
#include "report/report_text.h"
#include "report/run_selection.h"
#include "report/svg_chart.h"
#include "report/sweep_report.h"

namespace bucketsim {
namespace {

// System fonts only: nothing is fetched. Tables fit the page: headers wrap at their words, and
// a wide table is turned on its side, a few policies at a time (PoliciesTables); charts scale
// with the window.
constexpr std::string_view kStyle = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: #1d1d1d; background: #ffffff; margin: 0; line-height: 1.45; }
main { max-width: 1000px; margin: 0 auto; padding: 16px 20px 48px; }
h1 { font-size: 1.6em; margin: 0.4em 0; }
h2 { font-size: 1.35em; border-bottom: 1px solid #d8d8d8; padding-bottom: 4px; margin-top: 1.6em; }
h3 { font-size: 1.1em; margin: 1.2em 0 0.4em; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.9em; margin: 8px 0; }
th, td { border: 1px solid #d8d8d8; padding: 3px 6px; text-align: left; white-space: nowrap; }
th { background: #f3f3f3; white-space: normal; vertical-align: bottom; }
table.stacked th { white-space: normal; overflow-wrap: anywhere; vertical-align: bottom; }
table.stacked td, td:first-child { white-space: normal; }
details.more { margin: 12px 0; }
details.more > summary { cursor: pointer; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.wrap { white-space: normal; overflow-wrap: anywhere; min-width: 8em; }
section.advice { background: #eef7f2; border-left: 4px solid #009E73; padding: 2px 14px; margin: 16px 0; }
section.advice h2, section.advice h3 { border-bottom: none; margin-top: 0.6em; }
figure { margin: 12px 0 20px; }
figure svg { width: 100%; height: auto; display: block; border: 1px solid #e4e4e4; }
figcaption { font-size: 0.9em; color: #444444; margin-top: 4px; }
.oom { background: #fdeeee; border-left: 4px solid #D55E00; padding: 6px 10px; }
dl.context { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; font-size: 0.9em; }
dl.context dt { font-weight: 600; }
dl.context dd { margin: 0; font-family: ui-monospace, "DejaVu Sans Mono", monospace; word-break: break-all; }
footer { color: #666666; font-size: 0.85em; margin-top: 32px; }
)";

std::string Esc(std::string_view text) { return XmlEscape(text); }

std::string HtmlTable(const Table& table) {
  return "<div class=\"table-wrap\">\n" + RenderHtml(table) + "</div>\n";
}

// The policies side by side as columns, the figures as rows: a table of 14 columns and a few
// policies fits the page this way, where 14 columns side by side need a sideways scroll.
constexpr std::size_t kStackAboveColumns = 8;
constexpr std::size_t kStackUpToRows = 6;
std::string PoliciesTable(const Table& table) {
  if (table.headers.size() <= kStackAboveColumns || table.rows.size() > kStackUpToRows) {
    return HtmlTable(table);
  }
  Table stacked;
  stacked.headers = {""};
  for (const auto& row : table.rows) stacked.headers.push_back(row[0]);
  for (std::size_t c = 1; c < table.headers.size(); ++c) {
    std::vector<std::string> row = {table.headers[c]};
    for (const auto& cells : table.rows) row.push_back(cells[c]);
    stacked.rows.push_back(std::move(row));
  }
  stacked.right_aligned.assign(stacked.headers.size(), true);
  stacked.right_aligned[0] = false;
  std::string html = RenderHtml(stacked);
  html.replace(html.find("<table"), 6, "<table class=\"stacked\"");
  return "<div class=\"table-wrap\">\n" + html + "</div>\n";
}

// Any number of policies: stacked tables of at most kStackUpToRows policies each.
std::string PoliciesTables(const Table& table) {
  if (table.headers.size() <= kStackAboveColumns) return HtmlTable(table);
  std::string html;
  for (std::size_t first = 0; first < table.rows.size(); first += kStackUpToRows) {
    Table part = table;
    part.rows.assign(table.rows.begin() + static_cast<std::ptrdiff_t>(first),
                     table.rows.begin() + static_cast<std::ptrdiff_t>(
                                              std::min(first + kStackUpToRows, table.rows.size())));
    html += PoliciesTable(part);
  }
  return html;
}

// A part of the page that stays closed until clicked: the runs a page does not show up front.
std::string Folded(std::string_view summary, const std::string& body) {
  return fmt::format("<details class=\"more\">\n<summary>{}</summary>\n{}</details>\n",
                     Esc(summary), body);
}

// A table of one row per run: where runs differ only in the cap, one row per policy with the
// table of every run folded below it.
std::string RunsTable(const Table& per_run, const ReportDocument& doc,
                      const RunSelection& selection, std::size_t cap_column, bool has_cap_column,
                      std::string (*render)(const Table&)) {
  if (!selection.Folds()) return render(per_run);
  return fmt::format("<p>One row per policy: {}; every run is in the table folded below.</p>\n",
                     Esc(ShownRunsText(selection))) +
         render(ShownRows(per_run, doc, selection, cap_column, has_cap_column)) +
         Folded(fmt::format("Every run ({})", doc.runs.size()), render(per_run));
}

std::string RecommendationHtml(const Recommendation& recommendation, int h) {
  if (recommendation.empty()) return "";
  std::string html = fmt::format("<section class=\"advice\">\n<h{0}>Recommendation</h{0}>\n", h);
  if (!recommendation.headline.empty()) {
    html += fmt::format("<p><strong>{}</strong></p>\n", Esc(recommendation.headline));
  }
  for (const std::string& paragraph : recommendation.paragraphs) {
    html += fmt::format("<p>{}</p>\n", Esc(paragraph));
  }
  return html + "</section>\n";
}

std::string ChartSection(const ReportChart& chart, int h) {
  return fmt::format(
      "<section class=\"chart\" id=\"{0}\">\n<h{1}>{2}</h{1}>\n<figure>\n{3}<figcaption>{4}"
      "</figcaption>\n</figure>\n</section>\n",
      Esc(chart.id), h, Esc(chart.title), chart.svg, Esc(chart.caption));
}

std::string RunSection(const RunResult& run, int h, ByteUnit unit) {
  std::string html = fmt::format("<h{0}>{1} (<code>{2}</code>)</h{0}>\n<p>{3}</p>\n", h,
                                 Esc(run.policy), Esc(run.canonical), Esc(PeakText(run, unit)));
  if (auto text = FragmentationText(run, unit)) html += fmt::format("<p>{}</p>\n", Esc(*text));
  html += HtmlTable(BuildPeakCompositionTable(run, unit));
  if (!run.peak.largest.empty()) html += HtmlTable(BuildLargestAtPeakTable(run, unit));
  return html;
}

std::string SweepHtml(const SweepSection& sweep, int h, ByteUnit unit) {
  std::string html = fmt::format("<h{0}>Sweep</h{0}>\n", h);
  const Table table = BuildSweepTable(sweep, unit);
  if (sweep.points.size() > kFoldSweepTableAbove) {
    html += fmt::format(
        "<p>The Pareto-optimal configurations of {}; every configuration is in the table folded "
        "below.</p>\n",
        sweep.points.size());
    html += HtmlTable(BuildParetoSweepTable(sweep, unit)) +
            Folded(fmt::format("Every configuration ({})", sweep.points.size()), HtmlTable(table));
  } else {
    html += HtmlTable(table);
  }
  html += fmt::format("<p>{}</p>\n", Esc(kSweepParetoNote));
  for (const std::string& paragraph : SweepFindings(sweep, unit)) {
    html += fmt::format("<p>{}</p>\n", Esc(paragraph));
  }
  return html;
}

void AppendDocument(std::string& out, const ReportDocument& doc,
                    const std::vector<ReportChart>& charts, int h, ByteUnit unit) {
  const RunSelection selection = SelectRuns(doc);
  if (!doc.trace.description.empty()) out += fmt::format("<p>{}</p>\n", Esc(doc.trace.description));
  out += fmt::format("<p>{}</p>\n", Esc(TraceSummaryText(doc)));
  out += RecommendationHtml(RecommendationOf(doc, selection.choices, unit), h);
  out += fmt::format("<h{0}>Policies</h{0}>\n", h) +
         RunsTable(BuildComparisonTable(doc.runs, unit), doc, selection, 1, true, PoliciesTables);
  for (std::size_t i = 0; i < doc.runs.size(); ++i) {
    if (const std::optional<OomEvent>& oom = doc.runs[i].oom) {
      out += fmt::format("<p class=\"oom\"><strong>{}</strong>: {}; its figures stop there.</p>\n",
                         Esc(RunLabel(doc.runs, i)), Esc(DescribeOom(*oom)));
    }
  }
  if (SpansFrameworks(doc.runs)) {
    out += fmt::format("<h{0}>Across frameworks</h{0}>\n", h) +
           RunsTable(BuildFrameworkTable(doc.runs, unit), doc, selection, 3, false, HtmlTable);
  }
  if (!doc.predictions.empty()) {
    out += fmt::format("<h{0}>Measured against predicted</h{0}>\n<p>{1}</p>\n", h,
                       Esc(PredictionText(doc.predictions)));
    out += HtmlTable(BuildPredictionTable(doc.predictions));
  }
  if (doc.sweep) out += SweepHtml(*doc.sweep, h, unit);
  if (!doc.has_timeline) out += fmt::format("<p>{}</p>\n", Esc(kNoTimelineNote));
  // The charts of runs not shown up front (bucket lifetimes at the other caps), folded together.
  std::string folded_charts;
  std::size_t folded_chart_count = 0;
  for (const ReportChart& chart : charts) {
    if (!chart.folded_summary.empty()) {
      out += Folded(chart.folded_summary, ChartSection(chart, h));
    } else if (chart.run && !selection.IsShown(*chart.run)) {
      folded_charts += ChartSection(chart, h);
      ++folded_chart_count;
    } else {
      out += ChartSection(chart, h);
    }
  }
  if (folded_chart_count > 0) {
    out += Folded(fmt::format("Bucket lifetimes of the other runs ({})", folded_chart_count),
                  folded_charts);
  }
  std::string folded_runs;
  for (std::size_t i = 0; i < doc.runs.size(); ++i) {
    (selection.IsShown(i) ? out : folded_runs) += RunSection(doc.runs[i], h, unit);
  }
  if (!folded_runs.empty()) {
    out += Folded(
        fmt::format("Peaks of the other runs ({})", doc.runs.size() - selection.shown.size()),
        folded_runs);
  }
  out += fmt::format("<h{0}>Context</h{0}>\n<dl class=\"context\">\n", h);
  for (const auto& [label, value] : ContextItems(doc)) {
    out += fmt::format("<dt>{}</dt><dd>{}</dd>\n", Esc(label), Esc(value));
  }
  out += "</dl>\n";
}

}  // namespace

std::string FormatHtmlReport(const std::vector<ReportDocument>& docs,
                             const std::vector<std::vector<ReportChart>>& charts) {
  const std::string title = docs.size() == 1
                                ? fmt::format("bucketsim report: {}", DocumentTitle(docs.front()))
                                : fmt::format("bucketsim report: {} reports", docs.size());
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>{0}</title>\n<style>{1}</style>\n</head>\n<body>\n<main>\n<h1>{0}</h1>\n",
      Esc(title), kStyle);
  const ByteUnit unit = PageUnit(docs);  // as PageCharts draws the charts
  if (docs.size() == 1) {
    AppendDocument(out, docs.front(), charts.front(), 2, unit);
  } else {
    const std::string across = AcrossDocumentsText(docs, unit);
    if (!across.empty()) {
      out += fmt::format(
          "<section class=\"advice\">\n<h2>Across the traces</h2>\n<p>{}</p>\n</section>\n",
          Esc(across));
    }
    for (std::size_t i = 0; i < docs.size(); ++i) {
      out += fmt::format("<section class=\"report\">\n<h2>{}. {}</h2>\n", i + 1,
                         Esc(DocumentTitle(docs[i])));
      AppendDocument(out, docs[i], charts[i], 3, unit);
      out += "</section>\n";
    }
  }
  out += fmt::format(
      "<footer>Written by bucketsim {} (<code>bucketsim report</code>); every figure comes from "
      "the JSON report(s) named in the context blocks (reports/README.md documents "
      "them).</footer>\n"
      "</main>\n</body>\n</html>\n",
      Esc(BUCKETSIM_VERSION));
  return out;
}

}  // namespace bucketsim
