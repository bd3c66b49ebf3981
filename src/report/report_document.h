// A JSON report as the page reporters read it: the context block, the trace summary and one
// RunResult per policy. `bucketsim report` fills it from report files (io/report_reader.h);
// `compare --html` fills it from the replay it just ran, so both render the same figures.
#pragma once

#include <string>
#include <vector>

#include "engine/replay_policies.h"
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

// One configuration of a sweep: its peak memory and step time, a point of the Pareto chart.
// Nothing writes sweeps yet (the time model will); the page draws them when a report has them.
struct ParetoPoint {
  std::string label;  // the configuration, e.g. "backward-only cap=50"
  Bytes peak_allocated_bytes = 0;
  Micros step_us = 0;
};

struct ReportDocument {
  std::string source;  // the report file it was read from; empty for a replay just run
  ReportContext context;
  ReportTraceInfo trace;
  std::vector<RunResult> runs;
  // Reports written before the timeline existed have none: their charts say so.
  bool has_timeline = true;
  std::vector<ParetoPoint> sweep;
};

ReportDocument DocumentFromOutcome(const ReplayOutcome& outcome, const ReportContext& context);

}  // namespace bucketsim
