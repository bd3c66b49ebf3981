// What `bucketsim validate` says about a trace: its consistency (events by kind, totals per
// category, allocations alive at the end, every broken rule counted with its first events) and,
// for a trace imported from a PyTorch memory snapshot, how well the replays reproduce the
// snapshot (SnapshotAgreement). As a console table and as JSON (reports/README.md, "validate").
#pragma once

#include <optional>
#include <string>

#include "core/trace_header.h"
#include "engine/snapshot_comparison.h"
#include "engine/trace_checker.h"

namespace bucketsim {

struct ValidationReport {
  std::string path;
  const TraceHeader* header = nullptr;
  const TraceSummary* summary = nullptr;
  // Set when the trace has observed events (an imported snapshot).
  std::optional<SnapshotAgreement> snapshot;
  std::string alloc_conf;  // what the caching model of the comparison was configured with
  bool accounting_disagrees = false;
};

std::string ValidationTable(const ValidationReport& report);
std::string ValidationJson(const ValidationReport& report);

}  // namespace bucketsim
