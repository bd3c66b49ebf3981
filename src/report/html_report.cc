#include "report/html_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/status.h"
#include "report/console_table.h"
#include "report/framework_table.h"
#include "report/report_text.h"
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

// A sweep of more configurations than this shows its Pareto set, with everything else (every
// configuration's table row, section and bucket chart) in a collapsed details section.
constexpr std::size_t kCollapseSweepAbove = 8;

bool Collapsed(const ReportDocument& doc) {
  return doc.sweep && doc.sweep->points.size() > kCollapseSweepAbove;
}

// The rows of the sweep table that are Pareto-optimal. Row r is the point SweepTableRows()[r]:
// after a cap search the table lists only some of the points, so rows do not follow points.
Table ParetoRows(const Table& table, const SweepSection& sweep) {
  const std::vector<std::size_t> points = SweepTableRows(sweep);
  BUCKETSIM_CHECK(points.size() == table.rows.size());
  Table pareto = table;
  pareto.rows.clear();
  for (std::size_t r = 0; r < points.size(); ++r) {
    if (sweep.points[points[r]].pareto) pareto.rows.push_back(table.rows[r]);
  }
  return pareto;
}

void AppendDocument(std::string& out, const ReportDocument& doc,
                    const std::vector<ReportChart>& charts, int h, ByteUnit unit) {
  if (!doc.trace.description.empty()) out += fmt::format("<p>{}</p>\n", Esc(doc.trace.description));
  out += fmt::format("<p>{}</p>\n", Esc(TraceSummaryText(doc)));
  const bool collapsed = Collapsed(doc);
  if (!collapsed) {
    out += fmt::format("<h{0}>Policies</h{0}>\n", h) +
           PoliciesTables(BuildComparisonTable(doc.runs, unit));
  }
  for (const RunResult& run : doc.runs) {
    if (run.oom) {
      out += fmt::format("<p class=\"oom\"><strong>{}</strong>: {}; its figures stop there.</p>\n",
                         Esc(run.policy), Esc(DescribeOom(*run.oom)));
    }
  }
  if (SpansFrameworks(doc.runs)) {
    out += fmt::format("<h{0}>Across frameworks</h{0}>\n", h) +
           HtmlTable(BuildFrameworkTable(doc.runs, unit));
  }
  if (!doc.predictions.empty()) {
    out += fmt::format("<h{0}>Measured against predicted</h{0}>\n<p>{1}</p>\n", h,
                       Esc(PredictionText(doc.predictions)));
    out += HtmlTable(BuildPredictionTable(doc.predictions));
  }
  if (doc.sweep) {
    const Table table = BuildSweepTable(*doc.sweep, unit);
    if (collapsed) {
      out += fmt::format(
          "<h{0}>Sweep</h{0}>\n<p>The Pareto-optimal configurations of {1}; every configuration "
          "is under <a href=\"#details\">Details</a>.</p>\n",
          h, doc.sweep->points.size());
      out += HtmlTable(ParetoRows(table, *doc.sweep));
    } else {
      out += fmt::format("<h{0}>Sweep</h{0}>\n", h) + HtmlTable(table);
    }
    out += fmt::format("<p>{}</p>\n", Esc(kSweepParetoNote));
    for (const std::string& paragraph : SweepAdvice(*doc.sweep, unit)) {
      out += fmt::format("<p>{}</p>\n", Esc(paragraph));
    }
  }
  if (!doc.has_timeline) out += fmt::format("<p>{}</p>\n", Esc(kNoTimelineNote));
  std::string details;  // a collapsed sweep's per-configuration part
  for (const ReportChart& chart : charts) {
    // A collapsed sweep keeps its per-configuration charts (bucket lifetimes) with the details.
    std::string& to =
        collapsed && chart.id.find("bucket-lifetimes") != std::string::npos ? details : out;
    to += fmt::format(
        "<section class=\"chart\" id=\"{0}\">\n<h{1}>{2}</h{1}>\n<figure>\n{3}<figcaption>{4}"
        "</figcaption>\n</figure>\n</section>\n",
        Esc(chart.id), h, Esc(chart.title), chart.svg, Esc(chart.caption));
  }
  std::string& runs = collapsed ? details : out;
  for (const RunResult& run : doc.runs) {
    runs += fmt::format("<h{0}>{1} (<code>{2}</code>)</h{0}>\n<p>{3}</p>\n", h, Esc(run.policy),
                        Esc(run.canonical), Esc(PeakText(run, unit)));
    if (auto text = FragmentationText(run, unit)) runs += fmt::format("<p>{}</p>\n", Esc(*text));
    runs += HtmlTable(BuildPeakCompositionTable(run, unit));
    if (!run.peak.largest.empty()) runs += HtmlTable(BuildLargestAtPeakTable(run, unit));
  }
  if (collapsed) {
    out += fmt::format(
        "<details class=\"more\" id=\"details\">\n<summary>Details: all {} configurations "
        "</summary>\n<h{}>Policies</h{}>\n{}{}{}</details>\n",
        doc.runs.size(), h, h, PoliciesTables(BuildComparisonTable(doc.runs, unit)),
        HtmlTable(BuildSweepTable(*doc.sweep, unit)), details);
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
