// Replays one trace under several policies in a single pass: the trace is read once, checked
// once, and every event is handed to one Replay per policy. Nothing of the trace is kept in
// memory beyond the live state of each replay, so a ten-million-event trace costs no more
// memory than a short one with the same peak.
//
// With `jobs` > 1 the replays run on worker threads: the calling thread reads and checks the
// trace and hands batches of checked events to every worker through bounded queues (a few
// batches in flight, so memory stays bounded); each worker replays its share of the policies
// (policy i on worker i % workers; one policy too: its replay runs beside the reading and
// checking). Each replay sees exactly the events, in the same order, that a serial run gives it,
// so the results are the same byte for byte; an error is the one a serial run would stop at (the
// earliest event, then the first policy). The alternative, each worker reading its own stream,
// was measured slower (bench/end_to_end.sh).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "core/event_sink.h"
#include "engine/replay.h"
#include "engine/trace_checker.h"
#include "memory/make_memory_model.h"

namespace bucketsim {

// Something that fills a header and streams events into a sink: a file reader, a generator,
// a test's event list.
using TraceSource = std::function<Status(TraceHeader& header, EventSink& sink)>;

struct ReplayRequest {
  std::vector<PolicySpec> policies;
  // Unset: the exact model.
  MemoryModelFactory make_memory_model;
  // The device every run of the trace replays on (DeviceBudgetOf: --device-memory and its
  // overhead), kept in each RunResult; unset, or none: no device.
  std::function<Result<std::optional<DeviceBudget>>(const TraceHeader&)> device_budget;
  // Unset: the sim backend. One backend per policy; a real backend executes each replay.
  std::function<std::unique_ptr<Backend>()> make_backend;
  // --bucket-cap-mb: overrides the trace's cap for every policy that does not fix its own.
  std::optional<double> bucket_cap_mb;
  ReplayOptions options;
  // Keep the timeline (ReplayOptions::keep_timeline) and the full collective log of this policy
  // only: --chrome-trace.
  std::optional<std::size_t> timeline_policy;
  // Threads replaying (at most one per policy); 0: one per core. A real backend must stay at 1.
  unsigned jobs = 1;
  // By policy: who is told of everything that policy's memory model does (--memory-viz); not
  // owned, each fed by its replay's thread. Shorter than the policies, or null: nobody.
  std::vector<MemoryEventSink*> memory_events;
};

struct ReplayOutcome {
  TraceHeader header;
  TraceSummary summary;
  std::vector<RunResult> runs;  // in the order of ReplayRequest::policies
};

Result<ReplayOutcome> ReplayPolicies(const TraceSource& source, const ReplayRequest& request);

// The replays of a request, made when the header arrives (a policy's cap and the memory model's
// settings may come from it), in the order of the request's policies; ReplayPolicies feeds them.
Result<std::vector<std::unique_ptr<Replay>>> MakeReplays(const ReplayRequest& request,
                                                         const TraceHeader& header);

// The cap a policy replays with: its own, else the override, else the trace's.
double ResolveBucketCap(const PolicySpec& spec, std::optional<double> override_mb,
                        const TraceHeader& header);

}  // namespace bucketsim
