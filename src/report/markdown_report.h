// The comparison as a Markdown document: the policy table, each policy's peak (when, in which
// phase, what is alive by category, the largest allocations), and the context block.
#pragma once

#include <string>

#include "engine/replay_policies.h"
#include "report/report_context.h"

namespace bucketsim {

std::string FormatMarkdownReport(const ReplayOutcome& outcome, const ReportContext& context);

}  // namespace bucketsim
