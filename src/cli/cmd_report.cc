// bucketsim report REPORT.json... -o DIR : the JSON reports as a page for a design review.
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "cli/command.h"
#include "report/html_report.h"
#include "report/json_report.h"
#include "report/markdown_report.h"
#include "report/report_reader.h"

namespace bucketsim {
namespace {

// The charts of report.md live beside it, in this directory.
constexpr std::string_view kChartDir = "charts";

struct ReportFlags {
  std::vector<std::string> reports;
  std::string out_dir;
};

Status WriteReportDirectory(const std::vector<ReportDocument>& docs, const std::string& dir) {
  const std::vector<std::vector<ReportChart>> charts = PageCharts(docs);
  const std::filesystem::path root(dir);
  BUCKETSIM_RETURN_IF_ERROR(
      WriteTextFile((root / "report.html").string(), FormatHtmlReport(docs, charts)));
  BUCKETSIM_RETURN_IF_ERROR(
      WriteTextFile((root / "report.md").string(), FormatMarkdownReport(docs, charts, kChartDir)));
  for (const std::vector<ReportChart>& page : charts) {
    for (const ReportChart& chart : page) {
      BUCKETSIM_RETURN_IF_ERROR(
          WriteTextFile((root / kChartDir / (chart.id + ".svg")).string(),
                        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + chart.svg));
    }
  }
  return Status::Ok();
}

int RunReport(const ReportFlags& flags) {
  std::vector<ReportDocument> docs;
  for (const std::string& path : flags.reports) {
    Result<std::vector<ReportDocument>> read = ReadReportDocuments(path);
    if (!read.ok()) return ReportError(read.status());
    for (ReportDocument& doc : *read) docs.push_back(std::move(doc));
  }
  Status written = WriteReportDirectory(docs, flags.out_dir);
  if (!written.ok()) return ReportError(written);
  std::printf("report: %s/report.html, %s/report.md\n", flags.out_dir.c_str(),
              flags.out_dir.c_str());
  return kExitOk;
}

}  // namespace

void AddReportCommand(CLI::App& command, CommandContext& context) {
  auto flags = std::make_shared<ReportFlags>();
  command
      .add_option("reports", flags->reports,
                  "JSON reports (from compare, check or sweep --json; a sweep of several traces "
                  "gives a section per trace)")
      ->required();
  command.add_option("-o,--out", flags->out_dir, "Directory to write report.html and report.md")
      ->required();
  command.footer(
      "Writes DIR/report.html (self-contained: inline SVG and CSS, opens offline), DIR/report.md\n"
      "(the same content in Markdown) and DIR/charts/*.svg (the charts report.md shows).\n\n"
      "Example:\n"
      "  bucketsim compare traces/tiny-ws2.json --json out/compare.json\n"
      "  bucketsim report out/compare.json -o out/report\n"
      "  bucketsim sweep traces/tiny-ws2.json --bucket-cap-mb 0.25,1 --json out/sweep.json\n"
      "  bucketsim report out/sweep.json -o out/sweep   # the Pareto chart and the sweep table\n"
      "  bucketsim sweep traces/tiny-ws2.json traces/convnet-ws2.json --bucket-cap-mb 0.25,1 \\\n"
      "      --json out/sweeps.json\n"
      "  bucketsim report out/sweeps.json -o out/sweeps # one section per trace");
  command.callback([flags, &context] { context.exit_code = RunReport(*flags); });
}

}  // namespace bucketsim
