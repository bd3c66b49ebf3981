// The report as one self-contained HTML page: inline CSS and inline SVG charts, no script, no
// external font, image or link, so it opens offline and from a CI artifact as it is. The same
// content as the Markdown report (markdown_report.h), in the same order.
#pragma once

#include <string>
#include <vector>

#include "report/report_charts.h"
#include "report/report_document.h"

namespace bucketsim {

// `charts[i]` are the charts of `docs[i]` (ReportCharts).
std::string FormatHtmlReport(const std::vector<ReportDocument>& docs,
                             const std::vector<std::vector<ReportChart>>& charts);

}  // namespace bucketsim
