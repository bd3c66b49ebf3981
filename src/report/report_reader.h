// Reads a JSON report (reports/README.md, schema_version 1) back into a ReportDocument: the one
// reader of reports, for `bucketsim report` (the pages) and `check --baseline` (the figures a
// gate compares). Every figure read is checked for presence and type, and a bad file is an error
// naming the file and the JSON pointer of the bad field ("report.json:
// /policies/2/peak/by_category/param: expected an integer >= 0, got \"x\""). Keys added after the
// first v1 reports (the timeline, bucket lifetimes, phase end events, timing, the sweep) may be
// absent. A report of several traces (`sweep TRACE...`: a top-level `sweeps` array of sweep
// reports) is read as one document per trace, in order, its errors naming the pointer within
// the file (/sweeps/1/policies/0/...).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "report/report_document.h"

namespace bucketsim {

inline constexpr int kOldestReadableReportSchema = 1;
inline constexpr int kNewestReadableReportSchema = 1;

// What the reader needs of a report. kPage: every figure a page draws. kFigures: only what a
// baseline is compared by (context.memory_model and trace_digest; per policy its name, peaks,
// mark samples (name and allocated bytes), out-of-memory event and step time), so a baseline
// cut to those reads; a policy named twice is then an error (a baseline names each once).
enum class ReportContent { kPage, kFigures };

// One report; a report of several traces is an error that says so.
Result<ReportDocument> ReadReportFile(const std::string& path,
                                      ReportContent content = ReportContent::kPage);
// `source` names the text in error messages.
Result<ReportDocument> ParseReport(const std::string& text, const std::string& source,
                                   ReportContent content = ReportContent::kPage);

// Every report a file holds (kPage): the one, or each trace's of a report of several.
Result<std::vector<ReportDocument>> ReadReportDocuments(const std::string& path);
Result<std::vector<ReportDocument>> ParseReportDocuments(const std::string& text,
                                                         const std::string& source);

}  // namespace bucketsim
