// One replay as a Chrome trace-event / Perfetto JSON file (--chrome-trace): open it in
// ui.perfetto.dev or chrome://tracing. One track (tid) per stream, named after the trace's
// streams; compute spans, collectives and copies as complete ("X") slices; counter tracks ("C")
// for allocated, reserved and bucket bytes; instant events ("i") for iterations, phases and
// marks. Timestamps are µs on the backend's clock. The format is Google's "Trace Event Format"
// document (JSON object form, `traceEvents` array, `displayTimeUnit`).
#pragma once

#include <string>

#include "core/status.h"
#include "core/trace_header.h"
#include "engine/run_result.h"

namespace bucketsim {

// Needs `run.stream_timeline` (ReplayOptions::keep_timeline). Fails when there is none or when two
// slices of one stream overlap (a backend bug: a stream runs one thing at a time).
Result<std::string> ChromeTraceJson(const RunResult& run, const TraceHeader& header);

}  // namespace bucketsim
