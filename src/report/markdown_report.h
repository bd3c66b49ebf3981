// The report as a Markdown document: per report the policy table, the charts (as SVG files the
// document links), each policy's peak (when, in which phase, what is alive by category, the
// largest allocations, fragmentation under the caching model) and the context block; memory in
// the page's one unit (byte_unit.h), as the HTML page states it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "report/report_charts.h"
#include "report/report_document.h"

namespace bucketsim {

// `charts[i]` are the charts of `docs[i]`, linked as images `<chart_dir>/<id>.svg` (the caller
// writes those files); with no charts the document has none (`compare --format markdown`).
std::string FormatMarkdownReport(const std::vector<ReportDocument>& docs,
                                 const std::vector<std::vector<ReportChart>>& charts,
                                 std::string_view chart_dir);

}  // namespace bucketsim
