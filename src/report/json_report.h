// The JSON report: schema_version, the context block, a summary of the trace, and per policy
// every figure the replay produced (reports/README.md documents each field, reports/
// report-v1.schema.json validates it). Field names carry units (`_bytes`, `_us`, `_numel`).
// The text is streamed by a JsonWriter: a report of a multi-million-event trace is large.
#pragma once

#include <string>
#include <string_view>

#include "engine/replay_policies.h"
#include "engine/sweep_summary.h"
#include "report/report_context.h"

namespace bucketsim {

// The whole report, indented by two spaces, with a final newline; with `sweep`, its section
// follows the policies (`bucketsim sweep`).
std::string ReportJsonText(const ReplayOutcome& outcome, const ReportContext& context,
                           const SweepSection* sweep = nullptr);
// Writes `text` to `path`, creating missing parent directories, through an AtomicFile: the
// file appears only when complete (io/atomic_file.h).
Status WriteTextFile(const std::string& path, std::string_view text);

}  // namespace bucketsim
