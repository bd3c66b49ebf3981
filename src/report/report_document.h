// A JSON report as its readers see it: the context block, the trace summary, one RunResult per
// policy and, for a sweep, its Pareto points. `bucketsim report` and `check --baseline` fill it
// from report files (report/report_reader.h); `compare --html` and `sweep --html` from the replay
// they just ran, so both render the same figures.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/budget.h"
#include "engine/replay_policies.h"
#include "engine/sweep_summary.h"
#include "report/report_context.h"

namespace bucketsim {

// The report's `trace` object.
struct ReportTraceInfo {
  int schema_version = 0;
  std::string description;
  int world_size = 0;
  int rank = 0;
  double bucket_cap_mb = 0;
  std::uint64_t events = 0;
  std::uint64_t iterations = 0;
  std::uint64_t fsdp_instances = 0;
  std::uint64_t params = 0;
  std::uint64_t process_groups = 0;
  Micros compute_us = 0;
};

// run --backend host|cuda --profile P: one policy's measured time beside the sim's prediction of
// it (timing and timing.prediction of the report).
struct PredictionRow {
  std::string policy;
  std::string profile;  // the profile's name
  Micros measured_step_us = 0;
  Micros predicted_step_us = 0;
  // Per iteration (TimingTotals::per_iteration), as the step time is.
  Micros measured_exposed_us = 0;
  Micros predicted_exposed_us = 0;
  Micros measured_communication_us = 0;
  Micros predicted_communication_us = 0;
};

// The rows of the runs that carry a prediction, in order.
std::vector<PredictionRow> PredictionRows(const std::vector<RunResult>& runs);

struct ReportDocument {
  std::string source;  // the report file it was read from; empty for a replay just run
  ReportContext context;
  ReportTraceInfo trace;
  std::vector<RunResult> runs;
  // timing.step_time_us of runs[i]; unset where no iteration was timed. A report keeps its
  // iterations' totals, not their spans, so a document read back carries the figure itself.
  std::vector<std::optional<Micros>> step_time_us;
  // Reports written before the timeline existed have none: their charts say so.
  bool has_timeline = true;
  // Measured against predicted, for the runs that have a prediction (run --profile).
  std::vector<PredictionRow> predictions;
  // `bucketsim sweep`'s section: points[i] is runs[i] (engine/sweep_summary.h).
  std::optional<SweepSection> sweep;
};

// The report's `trace` object of a trace as read (its header) and checked (its summary).
ReportTraceInfo TraceInfoOf(const TraceHeader& header, const TraceSummary& summary);

ReportDocument DocumentFromOutcome(const ReplayOutcome& outcome, const ReportContext& context,
                                   const SweepSection* sweep = nullptr);

// What `check --baseline` compares against: the figures of runs[i] (engine/budget.h), its
// step time the one the report states.
PolicyFigures FiguresOf(const ReportDocument& doc, std::size_t run);

}  // namespace bucketsim
