#include "io/trace_writer.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "io/trace_reader.h"
#include "recording_sink.h"

namespace bucketsim {
namespace {

// A trace with every event kind, awkward names and doubles that need all their digits.
constexpr std::string_view kTrace = R"({
  "schema_version": 2,
  "description": "round trip \"test\"\nwith a newline",
  "world_size": 4,
  "rank": 1,
  "bucket_cap_mb": 12.5,
  "streams": ["default", "post_backward"],
  "groups": [{"id": 18446744073709551615, "ranks": [0, 1, 2, 3], "name": "world"},
             {"id": 5, "ranks": [1, 3]}],
  "fsdp": [{"name": "root", "params": [{"name": "flat", "numel": 1001, "dtype": "fp32"}]},
           {"name": "block0", "params": [{"name": "w", "numel": 8, "dtype": "bf16"},
                                         {"name": "b", "numel": 3, "dtype": "fp8_e4m3"}]}],
  "events": [
    {"ev": "iteration", "index": 0},
    {"ev": "phase", "phase": "forward"},
    {"ev": "alloc", "id": 18446744073709551615, "bytes": 1125899906842624, "stream": 1, "cat": "optimizer_state"},
    {"ev": "compute", "dur_us": 0.1, "name": "fwd \"quoted\" \\ tab\t \u00e9 \u2603"},
    {"ev": "compute", "stream": 1, "dur_us": 0.3333333333333333},
    {"ev": "compute", "dur_us": 1e-7, "name": "tiny"},
    {"ev": "compute", "dur_us": 123456789.125, "name": "tiny"},
    {"ev": "mark", "name": "after fwd"},
    {"ev": "phase", "phase": "backward"},
    {"ev": "rs", "fsdp": 0, "param": 0, "group": 18446744073709551615, "dtype": "fp32", "numel": 251, "shard": "view"},
    {"ev": "rs", "fsdp": 1, "param": 0, "group": 5, "dtype": "bf16", "numel": 4, "shard": "cast", "cast_dtype": "fp32"},
    {"ev": "rs", "fsdp": 1, "param": 1, "group": 5, "dtype": "fp16", "numel": 2, "shard": "accumulate"},
    {"ev": "flush"},
    {"ev": "record_stream", "id": 18446744073709551615, "stream": 0},
    {"ev": "sync", "stream": 0},
    {"ev": "empty_cache"},
    {"ev": "free", "id": 18446744073709551615},
    {"ev": "phase", "phase": "step"},
    {"ev": "phase", "phase": "zero_grad"},
    {"ev": "zero_grad", "set_to_none": false},
    {"ev": "zero_grad"}
  ]
})";

struct Trace {
  TraceHeader header;
  RecordingSink sink;
};

void ReadFrom(std::string_view json, Trace& trace) {
  Status status = ReadTraceFromString(json, "in.json", trace.header, trace.sink);
  ASSERT_TRUE(status.ok()) << status.ToString();
}

// Replays a read trace into a writer and returns the text.
std::string Write(Trace& trace) {
  std::ostringstream out;
  TraceWriter writer(out);
  EXPECT_TRUE(writer.OnHeader(trace.header).ok());
  for (const Event& e : trace.sink.events) EXPECT_TRUE(writer.OnEvent(e).ok());
  EXPECT_TRUE(writer.OnEnd().ok());
  return out.str();
}

auto Fields(const Event& e) {
  return std::tie(e.kind, e.phase, e.category, e.dtype, e.cast_dtype, e.shard_mode, e.set_to_none,
                  e.stream, e.name, e.unit, e.param, e.slot, e.id, e.bytes, e.group, e.numel,
                  e.dur_us, e.time_us, e.has_totals, e.index);
}

void ExpectSameHeader(const TraceHeader& a, const TraceHeader& b) {
  EXPECT_EQ(a.schema_version, b.schema_version);
  EXPECT_EQ(a.description, b.description);
  EXPECT_EQ(a.world_size, b.world_size);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.bucket_cap_mb, b.bucket_cap_mb);
  ASSERT_EQ(a.streams.size(), b.streams.size());
  for (std::size_t s = 0; s < a.streams.size(); ++s)
    EXPECT_EQ(a.streams[s].name, b.streams[s].name);
  ASSERT_EQ(a.groups.size(), b.groups.size());
  for (std::size_t g = 0; g < a.groups.size(); ++g) {
    EXPECT_EQ(a.groups[g].id, b.groups[g].id);
    EXPECT_EQ(a.groups[g].ranks, b.groups[g].ranks);
    EXPECT_EQ(a.groups[g].name, b.groups[g].name);
  }
  ASSERT_EQ(a.units.size(), b.units.size());
  for (std::size_t f = 0; f < a.units.size(); ++f) {
    EXPECT_EQ(a.units[f].name, b.units[f].name);
    ASSERT_EQ(a.units[f].params.size(), b.units[f].params.size());
    for (std::size_t p = 0; p < a.units[f].params.size(); ++p) {
      EXPECT_EQ(a.units[f].params[p].name, b.units[f].params[p].name);
      EXPECT_EQ(a.units[f].params[p].numel, b.units[f].params[p].numel);
      EXPECT_EQ(a.units[f].params[p].dtype, b.units[f].params[p].dtype);
    }
  }
  EXPECT_EQ(a.names, b.names);
}

TEST(TraceWriter, RoundTripsHeaderAndEvents) {
  Trace original;
  ReadFrom(kTrace, original);
  std::string text = Write(original);

  Trace again;
  ReadFrom(text, again);
  ExpectSameHeader(original.header, again.header);
  ASSERT_EQ(original.sink.events.size(), again.sink.events.size());
  for (std::size_t i = 0; i < original.sink.events.size(); ++i) {
    EXPECT_TRUE(Fields(original.sink.events[i]) == Fields(again.sink.events[i])) << "event " << i;
  }
  EXPECT_EQ(again.sink.events[5].dur_us, 1e-7);
  EXPECT_EQ(again.sink.events[4].dur_us, 1.0 / 3.0);
  EXPECT_EQ(again.header.names[again.sink.events[3].name], "fwd \"quoted\" \\ tab\t \u00e9 \u2603");
}

// Version 3: an imported snapshot's alloc_conf, times and observed events.
constexpr std::string_view kSnapshotTrace = R"({
  "schema_version": 3,
  "world_size": 1,
  "rank": 0,
  "alloc_conf": "expandable_segments:True",
  "streams": ["cuda stream 0x0", "deferred_free 0"],
  "events": [
    {"ev": "segment_map", "addr": 139887084830720, "bytes": 41943040, "stream": 0, "time_us": 1700000000000007},
    {"ev": "alloc", "id": 139887084830720, "bytes": 1000, "stream": 0, "cat": "other", "time_us": 1700000000000014},
    {"ev": "record_stream", "id": 139887084830720, "stream": 1},
    {"ev": "free", "id": 139887084830720, "time_us": 1700000000000021},
    {"ev": "snapshot", "bytes": 1024},
    {"ev": "sync", "stream": 1},
    {"ev": "oom", "bytes": 85899345920, "stream": 0, "device_free": 3145728},
    {"ev": "segment_unmap", "addr": 139887084830720, "bytes": 20971520, "stream": 0},
    {"ev": "empty_cache"},
    {"ev": "segment_alloc", "addr": 4096, "bytes": 2097152, "stream": 0},
    {"ev": "segment_free", "addr": 4096, "bytes": 2097152, "stream": 0},
    {"ev": "snapshot", "bytes": 0, "allocated_bytes": 0, "reserved_bytes": 20971520, "requested_bytes": 0}
  ]
})";

TEST(TraceWriter, RoundTripsTheObservedEventsOfVersion3) {
  Trace original;
  ReadFrom(kSnapshotTrace, original);
  EXPECT_EQ(original.header.alloc_conf, "expandable_segments:True");
  const std::vector<Event>& e = original.sink.events;
  ASSERT_EQ(e.size(), 12u);
  EXPECT_EQ(e[0].kind, EventKind::kSegmentMap);
  EXPECT_EQ(e[0].id, 139887084830720u);  // the address
  EXPECT_EQ(e[0].bytes, 41943040u);
  EXPECT_EQ(e[0].time_us, 1700000000000007u);
  EXPECT_EQ(e[3].time_us, 1700000000000021u);
  EXPECT_EQ(e[6].kind, EventKind::kOom);
  EXPECT_EQ(e[6].id, 3145728u);  // device_free
  EXPECT_FALSE(e[4].has_totals);
  EXPECT_TRUE(e[11].has_totals);
  EXPECT_EQ(e[11].numel, 0u);
  EXPECT_EQ(e[11].group, 20971520u);
  std::string text = Write(original);
  EXPECT_NE(text.find(R"("alloc_conf": "expandable_segments:True")"), std::string::npos);
  Trace again;
  ReadFrom(text, again);
  ExpectSameHeader(original.header, again.header);
  EXPECT_EQ(again.header.alloc_conf, original.header.alloc_conf);
  ASSERT_EQ(again.sink.events.size(), e.size());
  for (std::size_t i = 0; i < e.size(); ++i) {
    EXPECT_TRUE(Fields(e[i]) == Fields(again.sink.events[i])) << "event " << i;
  }
  EXPECT_EQ(Write(again), text);
}

// Format 5's framework collectives and replicate group are written as read, and a header with a
// replicate group is written as version 5 whatever it was read as.
TEST(TraceWriter, RoundTripsTheFrameworkCollectivesOfVersion5) {
  constexpr std::string_view kVersion5 = R"({
  "schema_version": 5,
  "world_size": 4,
  "rank": 1,
  "streams": ["default", "unshard", "post_backward"],
  "groups": [{"id": 1, "ranks": [0, 1], "name": "shard_group"},
             {"id": 2, "ranks": [1, 3], "name": "inter_node_pg"}],
  "replicate_group": 2,
  "events": [
    {"ev": "alloc", "id": 7, "bytes": 64, "stream": 1, "cat": "all_gather"},
    {"ev": "all_gather", "id": 7, "stream": 1, "group": 1, "dtype": "bf16", "numel": 16},
    {"ev": "all_reduce", "id": 7, "stream": 2, "group": 2, "dtype": "fp32", "numel": 16},
    {"ev": "free", "id": 7}
  ]
})";
  Trace original;
  ReadFrom(kVersion5, original);
  EXPECT_EQ(original.header.replicate_group, std::optional<GroupId>(2));
  std::string text = Write(original);
  EXPECT_NE(text.find(R"("replicate_group": 2)"), std::string::npos) << text;
  EXPECT_NE(
      text.find(
          R"({"ev": "all_gather", "id": 7, "stream": 1, "group": 1, "dtype": "bf16", "numel": 16})"),
      std::string::npos)
      << text;
  Trace again;
  ReadFrom(text, again);
  EXPECT_EQ(again.header.replicate_group, original.header.replicate_group);
  ASSERT_EQ(again.sink.events.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(Fields(original.sink.events[i]) == Fields(again.sink.events[i])) << "event " << i;
  }
  TraceHeader older = original.header;
  older.schema_version = 3;
  EXPECT_EQ(older.WrittenSchemaVersion(), 5);
}

// A trace that names its FSDP implementation is written as v4 and read back the same; one that
// does not stays v3, byte for byte what it was.
TEST(TraceWriter, ImplementationKeysMakeAVersion4Trace) {
  TraceHeader header;
  header.world_size = 2;
  ASSERT_TRUE(header.Finalize().ok());
  EXPECT_EQ(header.WrittenSchemaVersion(), 3);
  header.fsdp_impl = FsdpImpl::kFsdp1;
  header.fsdp_setting = "FullyShardedDataParallel(module)";
  EXPECT_EQ(header.WrittenSchemaVersion(), 4);
  std::ostringstream out;
  TraceWriter writer(out, "t.json");
  ASSERT_TRUE(writer.OnHeader(header).ok());
  ASSERT_TRUE(writer.OnEnd().ok());
  EXPECT_NE(out.str().find(R"("schema_version": 4)"), std::string::npos) << out.str();
  Trace t;
  ASSERT_TRUE(ReadTraceFromString(out.str(), "t.json", t.header, t.sink).ok());
  EXPECT_EQ(t.header.schema_version, 4);
  EXPECT_EQ(t.header.fsdp_impl, FsdpImpl::kFsdp1);
  EXPECT_EQ(t.header.fsdp_setting, "FullyShardedDataParallel(module)");
}

TEST(TraceReader, Version3AdditionsAreRejectedInOlderTraces) {
  auto error_of = [](std::string_view json) {
    Trace t;
    Status status = ReadTraceFromString(json, "t.json", t.header, t.sink);
    EXPECT_FALSE(status.ok()) << json;
    return status.message();
  };
  EXPECT_EQ(error_of(R"({"schema_version": 2, "world_size": 1, "rank": 0, "events": [
      {"ev": "oom", "bytes": 1, "stream": 0, "device_free": 0}]})"),
            "t.json: event 0: oom: 'oom' events need schema_version 3 (this trace has 2)");
  EXPECT_EQ(error_of(R"({"schema_version": 1, "world_size": 1, "rank": 0, "events": [
      {"ev": "alloc", "id": 1, "bytes": 1, "cat": "other", "time_us": 5}]})"),
            "t.json: event 0: alloc: field 'time_us' needs schema_version 3 (this trace has 1)");
  EXPECT_EQ(error_of(R"({"schema_version": 2, "world_size": 1, "rank": 0,
      "alloc_conf": "expandable_segments:True", "events": []})"),
            "t.json: header: key 'alloc_conf' needs schema_version 3 (this trace has 2)");
  EXPECT_EQ(error_of(R"({"schema_version": 3, "world_size": 1, "rank": 0, "events": [
      {"ev": "snapshot", "bytes": 1, "reserved_bytes": 2}]})"),
            "t.json: event 0: snapshot: 'allocated_bytes', 'reserved_bytes' and "
            "'requested_bytes' go together: give all three or none");
  EXPECT_EQ(error_of(R"({"schema_version": 3, "world_size": 1, "rank": 0, "events": [
      {"ev": "segment_alloc", "bytes": 1, "stream": 0}]})"),
            "t.json: event 0: segment_alloc: missing field 'addr'");
  EXPECT_EQ(error_of(R"({"schema_version": 3, "world_size": 1, "rank": 0, "events": [
      {"ev": "segment_free", "addr": 1, "bytes": 1, "stream": 2}]})"),
            "t.json: event 0: segment_free: stream 2 is not declared in the header (1 stream)");
  EXPECT_EQ(error_of(R"({"schema_version": 3, "world_size": 1, "rank": 0, "events": [
      {"ev": "segment_map", "addr": 1, "bytes": 1, "stream": 0, "device_free": 3}]})"),
            "t.json: event 0: segment_map: unknown field 'device_free'");
}

TEST(TraceWriter, IsDeterministicAndAFixedPoint) {
  Trace original;
  ReadFrom(kTrace, original);
  std::string first = Write(original);
  EXPECT_EQ(Write(original), first);
  Trace again;
  ReadFrom(first, again);
  EXPECT_EQ(Write(again), first);
}

TEST(TraceWriter, WritesOneEventPerLineAfterThePrettyHeader) {
  Trace original;
  ReadFrom(kTrace, original);
  std::string text = Write(original);
  EXPECT_TRUE(text.starts_with("{\n  \"schema_version\": 2,\n")) << text;
  EXPECT_TRUE(text.ends_with("\n]}\n")) << text;
  std::size_t events_at = text.find("  \"events\": [\n");
  ASSERT_NE(events_at, std::string::npos) << text;
  std::istringstream lines(text.substr(text.find('\n', events_at) + 1));
  std::string line;
  std::vector<std::string> event_lines;
  while (std::getline(lines, line) && line != "]}") event_lines.push_back(line);
  ASSERT_EQ(event_lines.size(), original.sink.events.size());
  EXPECT_EQ(event_lines[0], R"({"ev": "iteration", "index": 0},)");
  EXPECT_EQ(
      event_lines[2],
      R"({"ev": "alloc", "id": 18446744073709551615, "bytes": 1125899906842624, "stream": 1, "cat": "optimizer_state"},)");
  EXPECT_EQ(event_lines[4],
            R"({"ev": "compute", "stream": 1, "dur_us": 0.3333333333333333, "name": ""},)");
  EXPECT_EQ(
      event_lines[10],
      R"({"ev": "rs", "fsdp": 1, "param": 0, "group": 5, "dtype": "bf16", "numel": 4, "shard": "cast", "cast_dtype": "fp32"},)");
  EXPECT_EQ(event_lines[12], R"({"ev": "flush"},)");
  EXPECT_EQ(event_lines[13],
            R"({"ev": "record_stream", "id": 18446744073709551615, "stream": 0},)");
  EXPECT_EQ(event_lines[14], R"({"ev": "sync", "stream": 0},)");
  EXPECT_EQ(event_lines[15], R"({"ev": "empty_cache"},)");
  EXPECT_EQ(event_lines.back(), R"({"ev": "zero_grad", "set_to_none": true})");
}

TEST(TraceWriter, WritesATraceWithoutEvents) {
  Trace original;
  ReadFrom(R"({"schema_version": 1, "world_size": 1, "rank": 0, "events": []})", original);
  std::string text = Write(original);
  EXPECT_TRUE(text.ends_with("\"events\": [\n]}\n")) << text;
  Trace again;
  ReadFrom(text, again);
  ExpectSameHeader(original.header, again.header);
  EXPECT_TRUE(again.sink.events.empty());
}

TEST(TraceWriter, RefusesWhatATraceCannotHold) {
  TraceHeader header;
  ASSERT_TRUE(header.Finalize().ok());
  std::ostringstream out;
  TraceWriter writer(out);
  ASSERT_TRUE(writer.OnHeader(header).ok());
  Event init;
  init.kind = EventKind::kPhase;
  init.phase = Phase::kInit;
  init.index = 4;
  Status status = writer.OnEvent(init);
  EXPECT_EQ(status.code(), StatusCode::kInvalidTrace);
  EXPECT_EQ(status.message(), "event 4: phase 'init' cannot be written to a trace");
  Event bucket;
  bucket.kind = EventKind::kAlloc;
  bucket.category = Category::kBucketData;
  EXPECT_EQ(writer.OnEvent(bucket).code(), StatusCode::kInvalidTrace);
}

TEST(TraceWriter, OpensAndWritesAFile) {
  Trace original;
  ReadFrom(kTrace, original);
  std::string path = (std::filesystem::path(testing::TempDir()) / "written.json").string();
  Result<std::unique_ptr<TraceWriter>> writer = TraceWriter::Open(path);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  ASSERT_TRUE((*writer)->OnHeader(original.header).ok());
  for (const Event& e : original.sink.events) ASSERT_TRUE((*writer)->OnEvent(e).ok());
  ASSERT_TRUE((*writer)->OnEnd().ok());

  Trace again;
  Status status = ReadTrace(path, again.header, again.sink);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(again.sink.events.size(), original.sink.events.size());
}

TEST(TraceWriter, ReportsAPathThatCannotBeCreated) {
  // Missing directories are created (as for every file bucketsim writes); a regular file in the
  // way of one cannot be.
  std::string file = std::filesystem::temp_directory_path() / "bucketsim-trace-writer-not-a-dir";
  std::ofstream(file) << "x";
  std::string path = file + "/t.json";
  Result<std::unique_ptr<TraceWriter>> writer = TraceWriter::Open(path);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), StatusCode::kIoError);
  EXPECT_EQ(writer.status().message(), "cannot write '" + path + "': Not a directory");
}

TEST(TraceWriter, TheFileAppearsOnlyWhenTheTraceIsComplete) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "bucketsim-trace-writer-atomic";
  std::filesystem::remove_all(dir);
  std::string path = (dir / "t.json").string();
  Result<std::unique_ptr<TraceWriter>> writer = TraceWriter::Open(path);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  TraceHeader header;
  ASSERT_TRUE(header.Finalize().ok());
  ASSERT_TRUE((*writer)->OnHeader(header).ok());
  EXPECT_FALSE(std::filesystem::exists(path));
  ASSERT_TRUE((*writer)->OnEnd().ok());
  EXPECT_TRUE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace bucketsim
