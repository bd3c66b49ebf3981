// The JSON report: schema_version, the context block, a summary of the trace, and per policy
// every figure the replay produced (reports/README.md documents each field, reports/
// report-v1.schema.json validates it). Field names carry units (`_bytes`, `_us`, `_numel`).
// The text is streamed by a JsonWriter. The collective log is summarised per stretch of the trace
// (`collective_summary`); the full log (`collectives`) is written for a run that kept it
// (--full-log), so a report's size follows the number of iterations, not of events.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/replay_policies.h"
#include "engine/sweep_summary.h"
#include "report/json_writer.h"
#include "report/report_context.h"
#include "report/report_document.h"

namespace bucketsim {

// The whole report, indented by two spaces, with a final newline; with `sweep`, its section
// follows the policies (`bucketsim sweep`).
std::string ReportJsonText(const ReplayOutcome& outcome, const ReportContext& context,
                           const SweepSection* sweep = nullptr);
// The same, streamed to `path` (created with its missing parent directories; "-": stdout)
// without holding the text.
Status WriteReportJson(const std::string& path, const ReplayOutcome& outcome,
                       const ReportContext& context, const SweepSection* sweep = nullptr);
// The "context" key and its block, as every JSON report of the tool writes it (`tune`'s too).
void WriteContext(JsonWriter& w, const ReportContext& context);
// One policy's entry of a report, exactly as WriteReportJson writes it inside `policies`: how
// `sweep` under mpirun gathers the entries every rank replayed into one report.
std::string RunJsonFragment(const RunResult& run);

// One trace's report as `sweep` writes it: its policies' entries are `runs` (replayed in this
// process) or `run_fragments` (RunJsonFragment, gathered from mpirun's ranks), whichever is set.
struct TraceReportParts {
  const ReportTraceInfo* trace = nullptr;
  const std::vector<RunResult>* runs = nullptr;
  const std::vector<std::string>* run_fragments = nullptr;
  const ReportContext* context = nullptr;
  const SweepSection* sweep = nullptr;
};
// `sweep TRACE`: that trace's report. `sweep TRACE...` (several): {"schema_version": 1,
// "sweeps": [...]}, each element the report its trace alone gets, in the order given (nested
// one level deeper, so indented four spaces more).
Status WriteSweepReportJson(const std::string& path, const std::vector<TraceReportParts>& reports);
// Writes `text` to `path`, creating missing parent directories, through an AtomicFile: the
// file appears only when complete (io/atomic_file.h).
Status WriteTextFile(const std::string& path, std::string_view text);

}  // namespace bucketsim
