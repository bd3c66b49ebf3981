// Reads a JSON report (reports/README.md, schema_version 1) back into a ReportDocument, for
// `bucketsim report`. Only the figures the page reporters use are read; every one of them is
// checked for presence and type, and a bad file is an error naming the file and the JSON path
// ("report.json: policies[2].peak.by_category.param: expected an unsigned integer"). Keys added
// after the first v1 reports (the timeline, bucket lifetimes, phase end events) may be absent.
#pragma once

#include <string>

#include "core/status.h"
#include "report/report_document.h"

namespace bucketsim {

inline constexpr int kOldestReadableReportSchema = 1;
inline constexpr int kNewestReadableReportSchema = 1;

Result<ReportDocument> ReadReportFile(const std::string& path);
// `source` names the text in error messages.
Result<ReportDocument> ParseReport(const std::string& text, const std::string& source);

}  // namespace bucketsim
