// The sentences and lists the Markdown and HTML reports share, as plain text (each renderer
// escapes for its format), so the two documents never disagree about a figure.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "report/report_document.h"

namespace bucketsim {

// "World size 8, rank 0, 26 FSDP instances, ... memory model caching, backend sim."
std::string TraceSummaryText(const ReportDocument& doc);
// "Peak 3.11 MiB allocated at event 27 (iteration 1, backward); peak reserved 4.00 MiB."
std::string PeakText(const RunResult& run);
// Where reserved-but-unallocated memory sat at the peak; unset under the exact model.
std::optional<std::string> FragmentationText(const RunResult& run);
// The context block as (label, value) pairs; values empty in the report are left out.
std::vector<std::pair<std::string, std::string>> ContextItems(const ReportDocument& doc);
// The heading of one document: the trace's name and the memory model.
std::string DocumentTitle(const ReportDocument& doc);

}  // namespace bucketsim
