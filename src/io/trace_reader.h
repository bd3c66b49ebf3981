// Reading trace format v1 (traces/README.md). The reader streams: it parses the JSON with a SAX
// handler and turns each element of "events" into an `Event` as soon as its closing brace is
// read, so a trace of millions of events never sits in memory as a document (this is why
// "events" must be the last key of a trace). It checks structure, types, ranges and references
// to the header; the dynamic consistency of the events (frees of unknown ids, double frees,
// reduce-scatters outside backward) is TraceChecker's job, downstream in the sink chain.
//
// Every error is an InvalidTrace (IoError when the file cannot be opened or read) whose message
// starts with the file name and says where and what: "t.json: event 12: free: missing field 'id'".
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "core/event_sink.h"
#include "core/status.h"
#include "core/trace_header.h"

namespace bucketsim {

// Reads the trace at `path` ("-" = stdin): fills and Finalize()s `header`, then calls
// sink.OnHeader(header), sink.OnEvent(e) for each event in order (e.index = 0-based position in
// "events"), then sink.OnEnd(). Mark/compute names are interned with header.Intern(name) into
// e.name. A non-OK status from the sink stops the reading and is returned with "<file>: " in
// front of its message. Never throws.
Status ReadTrace(const std::string& path, TraceHeader& header, EventSink& sink);
// The same, calling `on_read` with the bytes read so far after each chunk (about 1 MiB): the
// feed of a progress display (cli/progress_reporter.h). The reader itself never prints.
using ReadProgress = std::function<void(std::uint64_t bytes_read)>;
Status ReadTrace(const std::string& path, TraceHeader& header, EventSink& sink,
                 const ReadProgress& on_read);

// The header alone (checked and Finalize()d): the reading stops before the first event, so a
// large trace costs no more than its header. Not for "-" (stdin can be read once).
Result<TraceHeader> ReadTraceHeader(const std::string& path);

// Same, from memory; `display_name` is used in messages in place of the path.
Status ReadTraceFromString(std::string_view json, std::string_view display_name,
                           TraceHeader& header, EventSink& sink);

}  // namespace bucketsim
