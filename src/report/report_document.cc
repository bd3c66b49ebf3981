#include "report/report_document.h"

namespace bucketsim {

ReportDocument DocumentFromOutcome(const ReplayOutcome& outcome, const ReportContext& context,
                                   const SweepSection* sweep) {
  const TraceHeader& h = outcome.header;
  ReportDocument doc;
  doc.context = context;
  doc.trace.schema_version = h.schema_version;
  doc.trace.description = h.description;
  doc.trace.world_size = h.world_size;
  doc.trace.rank = h.rank;
  doc.trace.bucket_cap_mb = h.bucket_cap_mb;
  doc.trace.events = outcome.summary.events;
  doc.trace.iterations = outcome.summary.iterations;
  doc.trace.fsdp_instances = h.fsdp.size();
  for (const FsdpInstance& instance : h.fsdp) doc.trace.params += instance.params.size();
  doc.trace.process_groups = h.groups.size();
  doc.trace.compute_us = outcome.summary.compute_us;
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
