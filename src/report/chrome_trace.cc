#include "report/chrome_trace.h"

#include <algorithm>

#include <fmt/format.h>

#include "report/json_writer.h"

namespace bucketsim {
namespace {

constexpr int kPid = 1;
// Slices of one stream may touch (one ends where the next starts, the sim's clocks are exact);
// anything more than a nanosecond of overlap is a real overlap.
constexpr Micros kOverlapToleranceUs = 1e-3;

struct Slice {
  const TimedSpan* span = nullptr;
  const CollectiveRecord* collective = nullptr;  // for collective spans with a log entry
};

std::string_view SliceName(const Slice& slice) {
  switch (slice.span->kind) {
    case SpanKind::kCompute:
      return "compute";
    case SpanKind::kCopy:
      return "copy";
    case SpanKind::kCollective:
      return "reduce_scatter";
  }
  return "span";
}

void WriteMetadata(JsonWriter& w, std::string_view what, int tid, const std::string& name) {
  w.BeginObject();
  w.Field("name", what);
  w.Field("ph", "M");
  w.Field("pid", kPid);
  w.Field("tid", tid);
  w.Key("args");
  w.BeginObject();
  w.Field("name", name);
  w.EndObject();
  w.EndObject();
}

void WriteSlice(JsonWriter& w, const Slice& slice) {
  const TimedSpan& span = *slice.span;
  w.BeginObject();
  w.Field("name", SliceName(slice));
  w.Field("cat", SliceName(slice));
  w.Field("ph", "X");
  w.Field("ts", span.start_us);
  w.Field("dur", span.end_us - span.start_us);
  w.Field("pid", kPid);
  w.Field("tid", span.stream);
  if (const CollectiveRecord* c = slice.collective) {
    w.Key("args");
    w.BeginObject();
    w.Field("kind", CollectiveKindName(c->kind));
    w.Field("group", c->group);
    w.Field("group_size", c->group_size);
    w.Field("input_bytes", c->input_numel * ElementSize(c->dtype));
    w.Field("requests", c->requests);
    w.Field("event_index", c->event_index);
    w.EndObject();
  }
  w.EndObject();
}

void WriteCounter(JsonWriter& w, std::string_view name, Micros ts, Bytes value) {
  w.BeginObject();
  w.Field("name", name);
  w.Field("ph", "C");
  w.Field("ts", ts);
  w.Field("pid", kPid);
  w.Key("args");
  w.BeginObject();
  w.Field("bytes", value);
  w.EndObject();
  w.EndObject();
}

}  // namespace

Result<std::string> ChromeTraceJson(const RunResult& run, const TraceHeader& header) {
  if (!run.stream_timeline) return InvalidArgument("chrome trace: the replay kept no timeline");
  const Timeline& timeline = *run.stream_timeline;
  // Collective spans come in issue order, as the log does (Replay::FinishIteration).
  std::vector<Slice> slices;
  std::size_t next_collective = 0;
  StreamId streams = static_cast<StreamId>(header.streams.size());
  for (const IterationSpans& iteration : timeline.iterations) {
    for (const TimedSpan& span : iteration.spans) {
      Slice slice{&span, nullptr};
      if (span.kind == SpanKind::kCollective && next_collective < run.collectives.size()) {
        slice.collective = &run.collectives[next_collective++];
      }
      streams = std::max(streams, span.stream + 1);
      slices.push_back(slice);
    }
  }
  std::stable_sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
    if (a.span->stream != b.span->stream) return a.span->stream < b.span->stream;
    return a.span->start_us < b.span->start_us;
  });
  for (std::size_t i = 1; i < slices.size(); ++i) {
    const TimedSpan& before = *slices[i - 1].span;
    const TimedSpan& after = *slices[i].span;
    if (before.stream == after.stream && after.start_us + kOverlapToleranceUs < before.end_us) {
      return InvalidArgument(fmt::format(
          "chrome trace: two slices overlap on stream {} ({} us to {} us, then from {} us)",
          after.stream, before.start_us, before.end_us, after.start_us));
    }
  }

  JsonWriter w;
  w.BeginObject();
  w.Field("displayTimeUnit", "ms");
  w.Key("traceEvents");
  w.BeginArray();
  WriteMetadata(w, "process_name", 0,
                fmt::format("bucketsim {} ({}, {})", run.policy, run.canonical, run.backend));
  for (StreamId s = 0; s < streams; ++s) {
    std::string name = s < header.streams.size() ? header.streams[s].name : "stream";
    WriteMetadata(w, "thread_name", static_cast<int>(s), fmt::format("stream {}: {}", s, name));
  }
  for (const Slice& slice : slices) WriteSlice(w, slice);
  for (const MemorySample& sample : timeline.memory) {
    WriteCounter(w, "allocated_bytes", sample.ts_us, sample.allocated_bytes);
    WriteCounter(w, "reserved_bytes", sample.ts_us, sample.reserved_bytes);
    WriteCounter(w, "bucket_bytes", sample.ts_us, sample.bucket_bytes);
  }
  for (const TimelineInstant& instant : timeline.instants) {
    w.BeginObject();
    w.Field("name", instant.name);
    w.Field("cat", instant.category);
    w.Field("ph", "i");
    w.Field("s", "p");  // process-wide: a phase or a mark concerns every stream
    w.Field("ts", instant.ts_us);
    w.Field("pid", kPid);
    w.Field("tid", 0);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.Finish();
}

}  // namespace bucketsim
