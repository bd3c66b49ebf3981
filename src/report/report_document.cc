#include "report/report_document.h"

namespace bucketsim {

ReportTraceInfo TraceInfoOf(const TraceHeader& header, const TraceSummary& summary) {
  ReportTraceInfo trace;
  trace.schema_version = header.schema_version;
  trace.description = header.description;
  trace.world_size = header.world_size;
  trace.rank = header.rank;
  trace.bucket_cap_mb = header.bucket_cap_mb;
  trace.events = summary.events;
  trace.iterations = summary.iterations;
  trace.fsdp_instances = header.units.size();
  for (const UnitInfo& instance : header.units) trace.params += instance.params.size();
  trace.process_groups = header.groups.size();
  trace.compute_us = summary.compute_us;
  return trace;
}

ReportDocument DocumentFromOutcome(const ReplayOutcome& outcome, const ReportContext& context,
                                   const SweepSection* sweep) {
  ReportDocument doc;
  doc.context = context;
  doc.trace = TraceInfoOf(outcome.header, outcome.summary);
  doc.runs = outcome.runs;
  for (const RunResult& run : doc.runs) doc.step_time_us.push_back(FiguresOf(run).step_time_us);
  doc.predictions = PredictionRows(doc.runs);
  if (sweep) doc.sweep = *sweep;
  return doc;
}

std::vector<PredictionRow> PredictionRows(const std::vector<RunResult>& runs) {
  std::vector<PredictionRow> rows;
  for (const RunResult& run : runs) {
    if (!run.prediction) continue;
    TimingTotals measured = SumTimings(run.iterations, run.collective_summary.totals());
    TimingTotals predicted =
        SumTimings(run.prediction->iterations, run.collective_summary.totals());
    rows.push_back({run.policy, run.prediction->profile, measured.step_time_us,
                    predicted.step_time_us, measured.per_iteration.exposed_communication_us,
                    predicted.per_iteration.exposed_communication_us,
                    measured.per_iteration.communication_us,
                    predicted.per_iteration.communication_us});
  }
  return rows;
}

PolicyFigures FiguresOf(const ReportDocument& doc, std::size_t run) {
  PolicyFigures figures = FiguresOf(doc.runs[run]);
  figures.step_time_us = doc.step_time_us[run];
  return figures;
}

}  // namespace bucketsim
