#include "report/html_report.h"

#include <fmt/format.h>

#include "report/console_table.h"
#include "report/framework_table.h"
#include "report/report_text.h"
#include "report/svg_chart.h"
#include "report/sweep_report.h"

namespace bucketsim {
namespace {

// System fonts only: nothing is fetched. Tables scroll sideways on a narrow window; charts
// scale with it.
constexpr std::string_view kStyle = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: #1d1d1d; background: #ffffff; margin: 0; line-height: 1.45; }
main { max-width: 1000px; margin: 0 auto; padding: 16px 20px 48px; }
h1 { font-size: 1.6em; margin: 0.4em 0; }
h2 { font-size: 1.35em; border-bottom: 1px solid #d8d8d8; padding-bottom: 4px; margin-top: 1.6em; }
h3 { font-size: 1.1em; margin: 1.2em 0 0.4em; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.9em; margin: 8px 0; }
th, td { border: 1px solid #d8d8d8; padding: 3px 8px; text-align: left; white-space: nowrap; }
th { background: #f3f3f3; }
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

void AppendDocument(std::string& out, const ReportDocument& doc,
                    const std::vector<ReportChart>& charts, int h) {
  if (!doc.trace.description.empty()) out += fmt::format("<p>{}</p>\n", Esc(doc.trace.description));
  out += fmt::format("<p>{}</p>\n", Esc(TraceSummaryText(doc)));
  out += fmt::format("<h{0}>Policies</h{0}>\n", h) + HtmlTable(BuildComparisonTable(doc.runs));
  for (const RunResult& run : doc.runs) {
    if (run.oom) {
      out += fmt::format("<p class=\"oom\"><strong>{}</strong>: {}; its figures stop there.</p>\n",
                         Esc(run.policy), Esc(DescribeOom(*run.oom)));
    }
  }
  if (SpansFrameworks(doc.runs)) {
    out += fmt::format("<h{0}>Across frameworks</h{0}>\n", h) +
           HtmlTable(BuildFrameworkTable(doc.runs));
  }
  if (!doc.predictions.empty()) {
    out += fmt::format("<h{0}>Measured against predicted</h{0}>\n<p>{1}</p>\n", h,
                       Esc(PredictionText(doc.predictions)));
    out += HtmlTable(BuildPredictionTable(doc.predictions));
  }
  if (doc.sweep) {
    out += fmt::format("<h{0}>Sweep</h{0}>\n", h) + HtmlTable(BuildSweepTable(*doc.sweep));
    out += fmt::format("<p>{}</p>\n", Esc(kSweepParetoNote));
    for (const std::string& paragraph : SweepAdvice(*doc.sweep)) {
      out += fmt::format("<p>{}</p>\n", Esc(paragraph));
    }
  }
  if (!doc.has_timeline) out += fmt::format("<p>{}</p>\n", Esc(kNoTimelineNote));
  for (const ReportChart& chart : charts) {
    out += fmt::format(
        "<section class=\"chart\" id=\"{0}\">\n<h{1}>{2}</h{1}>\n<figure>\n{3}<figcaption>{4}"
        "</figcaption>\n</figure>\n</section>\n",
        Esc(chart.id), h, Esc(chart.title), chart.svg, Esc(chart.caption));
  }
  for (const RunResult& run : doc.runs) {
    out += fmt::format("<h{0}>{1} (<code>{2}</code>)</h{0}>\n<p>{3}</p>\n", h, Esc(run.policy),
                       Esc(run.canonical), Esc(PeakText(run)));
    if (auto text = FragmentationText(run)) out += fmt::format("<p>{}</p>\n", Esc(*text));
    out += HtmlTable(BuildPeakCompositionTable(run));
    if (!run.peak.largest.empty()) out += HtmlTable(BuildLargestAtPeakTable(run));
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
  if (docs.size() == 1) {
    AppendDocument(out, docs.front(), charts.front(), 2);
  } else {
    for (std::size_t i = 0; i < docs.size(); ++i) {
      out += fmt::format("<section class=\"report\">\n<h2>{}. {}</h2>\n", i + 1,
                         Esc(DocumentTitle(docs[i])));
      AppendDocument(out, docs[i], charts[i], 3);
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
