// For tests of the trace reader: knobs that ReadTrace and ReadTraceFromString fix.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/event_sink.h"
#include "core/status.h"
#include "core/trace_header.h"

namespace bucketsim::internal {

// ReadTraceFromString, reading its input `chunk_bytes` at a time (it reads 1 MiB at a time): with
// a few bytes, buffer refills fall inside every kind of token, which the tests rely on.
Status ReadTraceFromStringInChunks(std::string_view json, std::string_view display_name,
                                   TraceHeader& header, EventSink& sink, std::size_t chunk_bytes);

}  // namespace bucketsim::internal
