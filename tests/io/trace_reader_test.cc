#include "io/trace_reader.h"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "recording_sink.h"

namespace bucketsim {
namespace {

// Header keys of a small valid trace, without the braces, so that tests can add or move keys.
constexpr std::string_view kHeaderKeys = R"(
  "schema_version": 1,
  "world_size": 8,
  "rank": 0,
  "streams": ["default", "all_gather", "post_backward"],
  "groups": [{"id": 140234, "ranks": [0, 1, 2, 3, 4, 5, 6, 7]},
             {"id": 3, "ranks": [0, 1], "name": "pair"}],
  "fsdp": [{"name": "block0", "params": [{"name": "w", "numel": 40, "dtype": "fp32"},
                                         {"name": "b", "numel": 7, "dtype": "bf16"}]}])";

// A trace with the standard header and these events (a comma-separated list of objects).
std::string Trace(std::string_view events) {
  return fmt::format("{{{},\n  \"events\": [\n{}\n]}}\n", kHeaderKeys, events);
}

struct ReadResult {
  Status status;
  TraceHeader header;
  RecordingSink sink;
};

ReadResult Read(std::string_view json) {
  ReadResult r;
  r.status = ReadTraceFromString(json, "t.json", r.header, r.sink);
  return r;
}

// Reads `json` and expects an error of `code` whose message starts with the file name and
// contains every part.
void ExpectError(std::string_view json, std::initializer_list<std::string_view> parts,
                 StatusCode code = StatusCode::kInvalidTrace) {
  ReadResult r = Read(json);
  ASSERT_FALSE(r.status.ok()) << json;
  EXPECT_EQ(r.status.code(), code) << r.status.ToString();
  const std::string& message = r.status.message();
  EXPECT_TRUE(message.starts_with("t.json: ")) << message;
  for (std::string_view part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

// One bad event at index 2 (after two good ones): the message names the event and the reason.
void ExpectEventError(std::string_view bad_event, std::string_view reason) {
  std::string events = fmt::format(
      "{{\"ev\": \"iteration\", \"index\": 0}},\n{{\"ev\": \"phase\", \"phase\": "
      "\"backward\"}},\n{}",
      bad_event);
  ExpectError(Trace(events), {"event 2: ", reason});
}

TEST(ReadTrace, ParsesHeader) {
  std::string json = fmt::format(
      "{{\"description\": \"tiny\", \"bucket_cap_mb\": 12.5,{},\n\"events\": []}}", kHeaderKeys);
  ReadResult r = Read(json);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const TraceHeader& h = r.header;
  EXPECT_EQ(h.schema_version, 1);
  EXPECT_EQ(h.world_size, 8);
  EXPECT_EQ(h.rank, 0);
  EXPECT_EQ(h.bucket_cap_mb, 12.5);
  EXPECT_EQ(h.description, "tiny");
  ASSERT_EQ(h.streams.size(), 3u);
  EXPECT_EQ(h.streams[1].name, "all_gather");
  EXPECT_EQ(h.post_backward_stream(), 2u);
  ASSERT_EQ(h.groups.size(), 2u);
  EXPECT_EQ(h.groups[0].id, 140234u);
  EXPECT_EQ(h.groups[0].size(), 8);
  EXPECT_EQ(h.groups[1].name, "pair");
  ASSERT_NE(h.FindGroup(3), nullptr);
  EXPECT_EQ(h.FindGroup(3)->ranks, (std::vector<int>{0, 1}));
  ASSERT_EQ(h.units.size(), 1u);
  EXPECT_EQ(h.units[0].name, "block0");
  ASSERT_EQ(h.units[0].params.size(), 2u);
  EXPECT_EQ(h.units[0].params[1].name, "b");
  EXPECT_EQ(h.units[0].params[1].numel, 7u);
  EXPECT_EQ(h.units[0].params[1].dtype, DType::kBFloat16);
  EXPECT_EQ(h.num_params(), 2u);
  EXPECT_EQ(r.sink.headers, 1);
  EXPECT_EQ(r.sink.header_seen, &r.header);
  EXPECT_EQ(r.sink.ends, 1);
}

TEST(ReadTrace, AppliesHeaderDefaults) {
  ReadResult r = Read(R"({"rank": 0, "world_size": 1, "schema_version": 1, "events": []})");
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.header.bucket_cap_mb, 25.0);
  ASSERT_EQ(r.header.streams.size(), 1u);
  EXPECT_EQ(r.header.streams[0].name, "default");
  EXPECT_TRUE(r.header.groups.empty());
  EXPECT_TRUE(r.header.units.empty());
  EXPECT_EQ(r.sink.ends, 1);
}

TEST(ReadTrace, AcceptsUnbucketedCap) {
  ReadResult r = Read(R"({"schema_version": 1, "world_size": 1, "rank": 0, "bucket_cap_mb": -1,
                          "events": []})");
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.header.bucket_cap_mb, -1.0);
}

TEST(ReadTrace, ParsesEveryEventKind) {
  ReadResult r = Read(Trace(R"(
{"ev": "iteration", "index": 3},
{"ev": "phase", "phase": "forward"},
{"ev": "alloc", "id": 1, "bytes": 4096, "stream": 1, "cat": "activation"},
{"ev": "free", "id": 1},
{"ev": "compute", "stream": 2, "dur_us": 12.5, "name": "block0.fwd"},
{"ev": "mark", "name": "after fwd"},
{"ev": "rs", "fsdp": 0, "param": 0, "group": 3, "dtype": "bf16", "numel": 20, "shard": "cast", "cast_dtype": "fp32"},
{"ev": "rs", "fsdp": 0, "param": 1, "group": 140234, "dtype": "fp32", "numel": 1, "shard": "accumulate"},
{"ev": "flush"},
{"ev": "zero_grad", "set_to_none": false})"));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const std::vector<Event>& e = r.sink.events;
  ASSERT_EQ(e.size(), 10u);
  for (std::size_t i = 0; i < e.size(); ++i) EXPECT_EQ(e[i].index, i);

  EXPECT_EQ(e[0].kind, EventKind::kIteration);
  EXPECT_EQ(e[0].id, 3u);
  EXPECT_EQ(e[1].kind, EventKind::kPhase);
  EXPECT_EQ(e[1].phase, Phase::kForward);
  EXPECT_EQ(e[2].kind, EventKind::kAlloc);
  EXPECT_EQ(e[2].id, 1u);
  EXPECT_EQ(e[2].bytes, 4096u);
  EXPECT_EQ(e[2].stream, 1u);
  EXPECT_EQ(e[2].category, Category::kActivation);
  EXPECT_EQ(e[3].kind, EventKind::kFree);
  EXPECT_EQ(e[3].id, 1u);
  EXPECT_EQ(e[4].kind, EventKind::kCompute);
  EXPECT_EQ(e[4].stream, 2u);
  EXPECT_EQ(e[4].dur_us, 12.5);
  EXPECT_EQ(r.header.names[e[4].name], "block0.fwd");
  EXPECT_EQ(e[5].kind, EventKind::kMark);
  EXPECT_EQ(r.header.names[e[5].name], "after fwd");
  EXPECT_EQ(e[6].kind, EventKind::kReduceScatter);
  EXPECT_EQ(e[6].unit, 0u);
  EXPECT_EQ(e[6].param, 0u);
  EXPECT_EQ(e[6].group, 3u);
  EXPECT_EQ(e[6].dtype, DType::kBFloat16);
  EXPECT_EQ(e[6].numel, 20u);
  EXPECT_EQ(e[6].shard_mode, ShardMode::kCast);
  EXPECT_EQ(e[6].cast_dtype, DType::kFloat32);
  EXPECT_EQ(e[7].param, 1u);
  EXPECT_EQ(e[7].group, 140234u);
  EXPECT_EQ(e[7].numel, 1u);  // ceil(7 / 8)
  EXPECT_EQ(e[7].shard_mode, ShardMode::kAccumulate);
  EXPECT_EQ(e[8].kind, EventKind::kFlush);
  EXPECT_EQ(e[9].kind, EventKind::kZeroGrad);
  EXPECT_FALSE(e[9].set_to_none);
  EXPECT_EQ(r.sink.ends, 1);
}

TEST(ReadTrace, ParsesStreamEventsOfSchemaVersion2) {
  std::string json = R"({"schema_version": 2, "world_size": 1, "rank": 0,
    "streams": ["default", "post_backward"], "events": [
    {"ev": "alloc", "id": 9, "bytes": 64, "cat": "grad"},
    {"stream": 1, "ev": "record_stream", "id": 9},
    {"ev": "sync", "stream": 1}]})";
  ReadResult r = Read(json);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.header.schema_version, 2);
  ASSERT_EQ(r.sink.events.size(), 3u);
  EXPECT_EQ(r.sink.events[1].kind, EventKind::kRecordStream);
  EXPECT_EQ(r.sink.events[1].id, 9u);
  EXPECT_EQ(r.sink.events[1].stream, 1u);
  EXPECT_EQ(r.sink.events[2].kind, EventKind::kSync);
  EXPECT_EQ(r.sink.events[2].stream, 1u);
  ReadResult missing = Read(R"({"schema_version": 2, "world_size": 1, "rank": 0,
    "events": [{"ev": "sync"}]})");
  EXPECT_NE(missing.status.message().find("event 0: sync: missing field 'stream'"),
            std::string::npos)
      << missing.status.message();
}

TEST(ReadTrace, AppliesEventDefaults) {
  ReadResult r = Read(Trace(R"(
{"ev": "alloc", "id": 1, "bytes": 0, "cat": "other"},
{"ev": "compute", "dur_us": 3},
{"ev": "zero_grad"},
{"ev": "rs", "fsdp": 0, "param": 0, "group": 3, "dtype": "fp32", "numel": 20, "shard": "view"})"));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const std::vector<Event>& e = r.sink.events;
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].stream, 0u);
  EXPECT_EQ(e[0].bytes, 0u);
  EXPECT_EQ(e[1].stream, 0u);
  EXPECT_EQ(e[1].dur_us, 3.0);
  EXPECT_EQ(r.header.names[e[1].name], "");
  EXPECT_TRUE(e[2].set_to_none);
  EXPECT_EQ(e[3].shard_mode, ShardMode::kView);
}

TEST(ReadTrace, AcceptsFieldsInAnyOrderAndTorchDTypeNames) {
  ReadResult r = Read(Trace(
      R"({"cat": "grad", "bytes": 8, "ev": "alloc", "id": 9},
         {"numel": 20, "shard": "cast", "cast_dtype": "torch.float16", "ev": "rs", "group": 3,
          "param": 0, "fsdp": 0, "dtype": "bfloat16"})"));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.sink.events.size(), 2u);
  EXPECT_EQ(r.sink.events[0].category, Category::kGrad);
  EXPECT_EQ(r.sink.events[1].dtype, DType::kBFloat16);
  EXPECT_EQ(r.sink.events[1].cast_dtype, DType::kFloat16);
}

TEST(ReadTrace, InternsEachNameOnce) {
  ReadResult r =
      Read(Trace(R"({"ev": "mark", "name": "a"}, {"ev": "compute", "dur_us": 1, "name": "b"},
                               {"ev": "mark", "name": "a"})"));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.sink.events[0].name, r.sink.events[2].name);
  EXPECT_NE(r.sink.events[0].name, r.sink.events[1].name);
  EXPECT_EQ(r.header.names.size(), 2u);
}

TEST(ReadTrace, StopsAtTheSinksErrorAndNamesTheFile) {
  ReadResult r;
  r.sink.fail_at = 1;
  r.status = ReadTraceFromString(Trace(R"({"ev": "flush"}, {"ev": "flush"}, {"ev": "flush"})"),
                                 "t.json", r.header, r.sink);
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidTrace);
  EXPECT_EQ(r.status.message(), "t.json: event 1: refused");
  EXPECT_EQ(r.sink.events.size(), 1u);
  EXPECT_EQ(r.sink.ends, 0);
}

class ReadTraceFile : public testing::Test {
 protected:
  std::string Write(std::string_view name, std::string_view text) {
    std::filesystem::path path = std::filesystem::path(testing::TempDir()) / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
};

// ReadTraceHeader stops before the events: a trace whose third event is malformed still gives
// its header, while reading it whole fails at that event.
TEST_F(ReadTraceFile, HeaderAloneStopsBeforeTheEvents) {
  std::string path =
      Write("header-only.json", Trace(R"({"ev": "mark", "name": "a"}, {"ev": "mark", "name": "b"},
                                    {"ev": "no-such-event"})"));
  Result<TraceHeader> header = ReadTraceHeader(path);
  ASSERT_TRUE(header.ok()) << header.status().message();
  EXPECT_EQ(header->world_size, 8);
  EXPECT_EQ(header->groups.size(), 2u);
  TraceHeader whole;
  RecordingSink sink;
  EXPECT_FALSE(ReadTrace(path, whole, sink).ok());
  // A header error is still an error, and so is a missing file.
  EXPECT_NE(ReadTraceHeader(Write("bad-header.json", R"({"schema_version": 1, "world_size": 0,
      "rank": 0, "events": []})"))
                .status()
                .message()
                .find("bad-header.json"),
            std::string::npos);
  EXPECT_EQ(ReadTraceHeader("/nonexistent/trace.json").status().code(), StatusCode::kIoError);
  EXPECT_EQ(ReadTraceHeader("-").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ReadTraceFile, ReadsAFileLargerThanOneChunk) {
  std::string events;
  constexpr int kEvents = 40000;  // ~2 MiB: crosses the reader's 1 MiB chunks
  for (int i = 0; i < kEvents; ++i) {
    events += fmt::format(
        "{}{{\"ev\": \"alloc\", \"id\": {}, \"bytes\": {}, \"stream\": 1, \"cat\": "
        "\"activation\"}}",
        i == 0 ? "" : ",\n", i, i * 512);
  }
  std::string path = Write("large.json", Trace(events));
  TraceHeader header;
  RecordingSink sink;
  Status status = ReadTrace(path, header, sink);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_EQ(sink.events.size(), static_cast<std::size_t>(kEvents));
  EXPECT_EQ(sink.events.back().id, static_cast<std::uint64_t>(kEvents - 1));
  EXPECT_EQ(sink.events.back().bytes, static_cast<Bytes>(kEvents - 1) * 512);
}

// FNV-1a, 64 bit, of `bytes`: the digest reports carry (reports/README.md, `trace_digest`).
std::string Fnv1a64(std::string_view bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  return fmt::format("fnv1a64:{:016x}", hash);
}

TEST(Fnv1a64, MatchesThePublishedTestVectors) {
  // Landon Curt Noll's FNV test vectors: "" and "a".
  EXPECT_EQ(Fnv1a64(""), "fnv1a64:cbf29ce484222325");
  EXPECT_EQ(Fnv1a64("a"), "fnv1a64:af63dc4c8601ec8c");
}

// The reader hashes the bytes as it reads them: its digest is the FNV-1a of every byte of the
// file (the value reports and baselines carry; no command reads a file a second time for it).
TEST_F(ReadTraceFile, DigestsEveryByteOfTheFileInTheSamePass) {
  std::string events;
  for (int i = 0; i < 30000; ++i) {  // ~1.5 MiB: more than one chunk
    events += fmt::format("{}{{\"ev\": \"alloc\", \"id\": {}, \"bytes\": 512, \"cat\": \"other\"}}",
                          i == 0 ? "" : ",\n", i);
  }
  // A NUL ends the input for the parser (as for nlohmann), but the digest is of every byte.
  const std::string with_tail = Trace(events) + std::string(1, '\0') + "not json";
  for (const std::string& text : {Trace(events), with_tail}) {
    std::string path = Write("digest.json", text);
    TraceHeader header;
    RecordingSink sink;
    Status status = ReadTrace(path, header, sink);
    ASSERT_TRUE(status.ok()) << status.ToString();
    EXPECT_EQ(header.content_digest, Fnv1a64(text));
  }
  // From memory, the same bytes give the same digest.
  ReadResult r = Read(with_tail);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.header.content_digest, Fnv1a64(with_tail));
  // A header read alone does not digest what it did not read.
  Result<TraceHeader> header = ReadTraceHeader(Write("digest.json", with_tail));
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->content_digest, "");
}

TEST_F(ReadTraceFile, ReportsATruncatedFileWithItsPath) {
  std::string text =
      Trace(R"({"ev": "flush"}, {"ev": "alloc", "id": 1, "bytes": 10, "cat": "grad"})");
  std::string path = Write("cut.json", text.substr(0, text.find("\"bytes\"")));
  TraceHeader header;
  RecordingSink sink;
  Status status = ReadTrace(path, header, sink);
  EXPECT_EQ(status.code(), StatusCode::kInvalidTrace);
  EXPECT_TRUE(status.message().starts_with(path + ": truncated: unexpected end of input at line"))
      << status.message();
  EXPECT_NE(status.message().find("(while reading event 1)"), std::string::npos)
      << status.message();
}

TEST_F(ReadTraceFile, ReportsAnEmptyFile) {
  std::string path = Write("empty.json", "");
  TraceHeader header;
  RecordingSink sink;
  Status status = ReadTrace(path, header, sink);
  EXPECT_EQ(status.code(), StatusCode::kInvalidTrace);
  EXPECT_EQ(status.message(), path + ": the file is empty");
}

TEST(ReadTraceErrors, NonexistentFile) {
  TraceHeader header;
  RecordingSink sink;
  Status status = ReadTrace("/nonexistent/x.json", header, sink);
  EXPECT_EQ(status.code(), StatusCode::kIoError);
  EXPECT_EQ(status.message(), "cannot open '/nonexistent/x.json': No such file or directory");
}

TEST(ReadTraceErrors, ADirectoryIsAReadError) {
  TraceHeader header;
  RecordingSink sink;
  Status status = ReadTrace(testing::TempDir(), header, sink);
  EXPECT_EQ(status.code(), StatusCode::kIoError) << status.ToString();
  EXPECT_NE(status.message().find(testing::TempDir()), std::string::npos) << status.message();
}

// --- Bad documents ---

TEST(ReadTraceErrors, EmptyFile) { ExpectError("", {"t.json: the file is empty"}); }

TEST(ReadTraceErrors, WhitespaceOnly) { ExpectError(" \n\t \n", {"t.json: the file is empty"}); }

TEST(ReadTraceErrors, TruncatedInTheMiddleOfAnEvent) {
  std::string text = Trace(R"({"ev": "flush"},
{"ev": "free", "id": 12})");
  ExpectError(text.substr(0, text.find("12")),
              {"t.json: truncated: unexpected end of input at line 12, column 22",
               "(while reading event 1)"});
}

TEST(ReadTraceErrors, TruncatedInTheHeader) {
  std::string text = Trace("");
  ExpectError(text.substr(0, 40),
              {"truncated: unexpected end of input", "(while reading the header)"});
}

TEST(ReadTraceErrors, NotJson) {
  ExpectError("hello", {"t.json: not JSON: syntax error at line 1, column 1: "});
  ExpectError(Trace(R"({"ev": "flush"} {"ev": "flush"})"),
              {"not JSON: syntax error at line", "(while reading event 1)"});
}

TEST(ReadTraceErrors, TopLevelNotAnObject) {
  ExpectError("[1, 2]", {"t.json: the top-level value must be an object, got an array"});
  ExpectError("42", {"the top-level value must be an object, got a number"});
}

TEST(ReadTraceErrors, MissingSchemaVersion) {
  ExpectError(R"({"world_size": 1, "rank": 0, "events": []})",
              {"t.json: header: missing key 'schema_version'"});
}

TEST(ReadTraceErrors, UnsupportedSchemaVersion) {
  ExpectError(R"({"schema_version": 7, "world_size": 1, "rank": 0, "new_key": 1, "events": []})",
              {"t.json: header: schema_version 7 is not supported (this build reads 1 to 6)"});
  ExpectError(R"({"schema_version": 0, "world_size": 1, "rank": 0, "events": []})",
              {"t.json: header: schema_version 0 is not supported (this build reads 1 to 6)"});
  ExpectError(R"({"schema_version": "1", "world_size": 1, "rank": 0, "events": []})",
              {"t.json: header: 'schema_version' must be an integer, got a string"});
}

TEST(ReadTraceErrors, HeaderKeyAfterEvents) {
  ExpectError(
      R"({"schema_version": 1, "world_size": 1, "rank": 0, "events": [], "description": ""})",
      {"t.json: header: key 'description' comes after 'events'", "'events' must be the last key"});
}

TEST(ReadTraceErrors, UnknownHeaderKey) {
  ExpectError(R"({"schema_version": 1, "world_size": 1, "rank": 0, "ranks": 0, "events": []})",
              {"t.json: header: unknown key 'ranks'"});
}

TEST(ReadTraceErrors, DuplicateHeaderKey) {
  ExpectError(R"({"schema_version": 1, "world_size": 1, "rank": 0, "rank": 0, "events": []})",
              {"t.json: header: key 'rank' appears twice"});
}

TEST(ReadTraceErrors, MissingEvents) {
  ExpectError(R"({"schema_version": 1, "world_size": 1, "rank": 0})",
              {"t.json: missing key 'events'"});
}

TEST(ReadTraceErrors, MissingWorldSize) {
  ExpectError(R"({"schema_version": 1, "rank": 0, "events": []})",
              {"t.json: header: missing key 'world_size'"});
}

TEST(ReadTraceErrors, EventsNotAnArray) {
  ExpectError(R"({"schema_version": 1, "world_size": 1, "rank": 0, "events": {}})",
              {"t.json: 'events' must be an array, got an object"});
}

TEST(ReadTraceErrors, RankOutsideWorldSize) {
  ExpectError(R"({"schema_version": 1, "world_size": 8, "rank": 8, "events": []})",
              {"t.json: header: rank 8 is outside world_size 8"});
}

TEST(ReadTraceErrors, WorldSizeNotAnInteger) {
  ExpectError(R"({"schema_version": 1, "world_size": 8.5, "rank": 0, "events": []})",
              {"t.json: header: 'world_size' must be an integer (got 8.5)"});
  ExpectError(R"({"schema_version": 1, "world_size": 99999999999, "rank": 0, "events": []})",
              {"t.json: header: 'world_size' is out of range (got 99999999999)"});
}

TEST(ReadTraceErrors, GroupRankOutsideWorldSize) {
  ExpectError(R"({"schema_version": 1, "world_size": 8, "rank": 0,
                  "groups": [{"id": 7, "ranks": [0, 9]}], "events": []})",
              {"t.json: header: group 7: rank 9 is outside world_size 8"});
}

TEST(ReadTraceErrors, DuplicateRankInGroup) {
  ExpectError(R"({"schema_version": 1, "world_size": 8, "rank": 0,
                  "groups": [{"id": 7, "ranks": [0, 1, 1]}], "events": []})",
              {"t.json: header: group 7: rank 1 is listed twice"});
}

TEST(ReadTraceErrors, BadGroupEntries) {
  ExpectError(R"({"schema_version": 1, "world_size": 8, "rank": 0,
                  "groups": [{"id": 7, "ranks": [0], "color": 1}], "events": []})",
              {"t.json: header: groups[0]: unknown field 'color'"});
  ExpectError(R"({"schema_version": 1, "world_size": 8, "rank": 0,
                  "groups": [{"ranks": [0]}], "events": []})",
              {"t.json: header: groups[0]: missing field 'id'"});
  ExpectError(R"({"schema_version": 1, "world_size": 8, "rank": 0,
                  "groups": [{"id": -7, "ranks": [0]}], "events": []})",
              {"t.json: header: groups[0]: 'id' must not be negative (got -7)"});
  ExpectError(R"({"schema_version": 1, "world_size": 8, "rank": 0,
                  "groups": [{"id": 7, "ranks": [0, "1"]}], "events": []})",
              {"t.json: header: groups[0]: 'ranks[1]' must be an integer, got a string"});
  ExpectError(R"({"schema_version": 1, "world_size": 8, "rank": 0,
                  "groups": [{"id": 7, "ranks": [0], "id": 8}], "events": []})",
              {"t.json: header: 'groups': key 'id' appears twice"});
}

TEST(ReadTraceErrors, BadParams) {
  ExpectError(R"({"schema_version": 1, "world_size": 1, "rank": 0,
                  "fsdp": [{"name": "f", "params": [{"name": "w", "numel": 4, "dtype": "fp33"}]}],
                  "events": []})",
              {"t.json: header: fsdp[0]: params[0]: dtype 'fp33' is not a known dtype"});
  ExpectError(R"({"schema_version": 1, "world_size": 1, "rank": 0,
                  "fsdp": [{"name": "f", "params": [{"name": "w", "numel": 0, "dtype": "fp32"}]}],
                  "events": []})",
              {"t.json: header: fsdp 0 ('f') param 0: numel 0 is out of range"});
  ExpectError(R"({"schema_version": 1, "world_size": 1, "rank": 0,
                  "fsdp": [{"name": "f", "params": [{"name": "w", "dtype": "fp32"}]}],
                  "events": []})",
              {"t.json: header: fsdp[0]: params[0]: missing field 'numel'"});
}

TEST(ReadTraceErrors, DeeplyNestedHeaderValue) {
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  ExpectError(fmt::format(R"({{"schema_version": 1, "description": {}, "events": []}})", deep),
              {"t.json: header: 'description': a value is nested too deeply"});
}

// --- Bad events ---

TEST(ReadTraceErrors, EventNotAnObject) {
  ExpectEventError("[1]", "must be an object, got an array");
}

TEST(ReadTraceErrors, UnknownEventKind) {
  ExpectError(Trace(R"({"ev": "flush"}, {"ev": "flush"}, {"ev": "flush"},
                       {"ev": "allocate", "id": 1})"),
              {"t.json: event 3: unknown event kind 'allocate'"});
}

TEST(ReadTraceErrors, MissingEv) {
  ExpectEventError(R"({"id": 1})", "event 2: missing field 'ev'");
  ExpectEventError(R"({"ev": 4})", "event 2: 'ev' must be a string, got a number");
}

TEST(ReadTraceErrors, UnknownField) {
  ExpectEventError(R"({"ev": "free", "id": 1, "size": 3})", "event 2: free: unknown field 'size'");
  ExpectEventError(R"({"ev": "free", "id": 1, "bytes": 3})",
                   "event 2: free: unknown field 'bytes'");
  ExpectEventError(R"({"ev": "free", "id": 1, "": 3})", "event 2: free: unknown field ''");
  ExpectEventError(R"({"ev": "rs", "fsdp": 0, "param": 0, "group": 3, "dtype": "bf16", "numel": 20,
                      "shard": "view", "cast_dtype": "fp32"})",
                   "event 2: rs: field 'cast_dtype' is only allowed with shard 'cast', not 'view'");
}

TEST(ReadTraceErrors, DuplicateField) {
  ExpectEventError(R"({"ev": "free", "id": 1, "id": 2})",
                   "event 2: free: field 'id' appears twice");
}

TEST(ReadTraceErrors, NestedValueInEvent) {
  ExpectEventError(R"({"ev": "free", "id": {"a": [1, {"b": 2}]}})",
                   "event 2: free: 'id' must be an integer, got an object");
  ExpectEventError(R"({"ev": "mark", "name": ["x"]})",
                   "event 2: mark: 'name' must be a string, got an array");
}

TEST(ReadTraceErrors, MissingRequiredField) {
  ExpectEventError(R"({"ev": "free"})", "event 2: free: missing field 'id'");
  ExpectEventError(R"({"ev": "iteration"})", "event 2: iteration: missing field 'index'");
  ExpectEventError(R"({"ev": "mark"})", "event 2: mark: missing field 'name'");
  ExpectEventError(R"({"ev": "compute", "name": "x"})", "event 2: compute: missing field 'dur_us'");
  ExpectEventError(R"({"ev": "alloc", "id": 1, "bytes": 4})",
                   "event 2: alloc: missing field 'cat'");
}

TEST(ReadTraceErrors, WrongType) {
  ExpectEventError(R"({"ev": "alloc", "id": 1, "bytes": "4096", "cat": "grad"})",
                   "event 2: alloc: 'bytes' must be an integer, got a string");
  ExpectEventError(R"({"ev": "compute", "dur_us": "fast"})",
                   "event 2: compute: 'dur_us' must be a number, got a string");
  ExpectEventError(R"({"ev": "zero_grad", "set_to_none": 1})",
                   "event 2: zero_grad: 'set_to_none' must be true or false, got a number");
  ExpectEventError(R"({"ev": "free", "id": null})",
                   "event 2: free: 'id' must be an integer, got null");
}

TEST(ReadTraceErrors, NegativeBytes) {
  ExpectEventError(R"({"ev": "alloc", "id": 1, "bytes": -4096, "cat": "grad"})",
                   "event 2: alloc: 'bytes' must not be negative (got -4096)");
}

TEST(ReadTraceErrors, NonIntegerBytes) {
  ExpectEventError(R"({"ev": "alloc", "id": 1, "bytes": 1.5, "cat": "grad"})",
                   "event 2: alloc: 'bytes' must be an integer (got 1.5)");
  ExpectEventError(R"({"ev": "alloc", "id": 1, "bytes": 4e3, "cat": "grad"})",
                   "event 2: alloc: 'bytes' must be an integer (got 4000.0)");
}

TEST(ReadTraceErrors, BytesOverflowing64Bits) {
  ExpectEventError(R"({"ev": "alloc", "id": 1, "bytes": 18446744073709551616, "cat": "grad"})",
                   "event 2: alloc: 'bytes' overflows 64 bits");
  ExpectEventError(R"({"ev": "free", "id": 100000000000000000000000})",
                   "event 2: free: 'id' overflows 64 bits");
}

TEST(ReadTraceErrors, BytesBeyondSanity) {
  ExpectEventError(R"({"ev": "alloc", "id": 1, "bytes": 1125899906842625, "cat": "grad"})",
                   "event 2: alloc: bytes 1125899906842625 is beyond the sanity limit of 1 PiB");
  ReadResult r =
      Read(Trace(R"({"ev": "alloc", "id": 1, "bytes": 1125899906842624, "cat": "grad"})"));
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
}

TEST(ReadTraceErrors, UndeclaredStream) {
  ExpectEventError(R"({"ev": "alloc", "id": 1, "bytes": 4, "stream": 3, "cat": "grad"})",
                   "event 2: alloc: stream 3 is not declared in the header (3 streams)");
  ExpectEventError(R"({"ev": "compute", "dur_us": 1, "stream": 7})",
                   "event 2: compute: stream 7 is not declared in the header");
}

TEST(ReadTraceErrors, NegativeOrNonFiniteDuration) {
  ExpectEventError(R"({"ev": "compute", "dur_us": -0.5})",
                   "event 2: compute: 'dur_us' must not be negative (got -0.5)");
  ExpectError(Trace(R"({"ev": "compute", "dur_us": 1e999})"),
              {"t.json: not JSON: number overflow parsing '1e999'", "(while reading event 0)"});
}

TEST(ReadTraceErrors, UnknownGroupInReduceScatter) {
  ExpectEventError(
      R"({"ev": "rs", "fsdp": 0, "param": 0, "group": 4, "dtype": "bf16", "numel": 20, "shard": "view"})",
      "event 2: rs: group 4 is not declared in the header");
}

TEST(ReadTraceErrors, FsdpIndexOutOfRange) {
  ExpectEventError(
      R"({"ev": "rs", "fsdp": 1, "param": 0, "group": 3, "dtype": "bf16", "numel": 20, "shard": "view"})",
      "event 2: rs: fsdp 1 is out of range: the header declares 1 FSDP instances");
}

TEST(ReadTraceErrors, ParamIndexOutOfRange) {
  ExpectEventError(
      R"({"ev": "rs", "fsdp": 0, "param": 2, "group": 3, "dtype": "bf16", "numel": 20, "shard": "view"})",
      "event 2: rs: param 2 is out of range: fsdp 0 ('block0') has 2 params");
}

TEST(ReadTraceErrors, ReduceScatterNumelMismatch) {
  ExpectError(
      Trace(R"({"ev": "flush"}, {"ev": "flush"}, {"ev": "flush"}, {"ev": "flush"}, {"ev": "flush"},
               {"ev": "flush"}, {"ev": "flush"}, {"ev": "flush"}, {"ev": "flush"},
               {"ev": "rs", "fsdp": 0, "param": 0, "group": 3, "dtype": "bf16", "numel": 10, "shard": "view"})"),
      {"t.json: event 9: rs: numel 10 does not match param 'w' (numel 40) split over group 3 of "
       "size 2: expected 20"});
  // The shard is padded: ceil(7 / 2) = 4.
  ExpectEventError(
      R"({"ev": "rs", "fsdp": 0, "param": 1, "group": 3, "dtype": "bf16", "numel": 3, "shard": "view"})",
      "event 2: rs: numel 3 does not match param 'b' (numel 7) split over group 3 of size 2: "
      "expected 4");
}

TEST(ReadTraceErrors, ZeroNumel) {
  ExpectEventError(
      R"({"ev": "rs", "fsdp": 0, "param": 0, "group": 3, "dtype": "bf16", "numel": 0, "shard": "view"})",
      "event 2: rs: 'numel' must be positive (got 0)");
}

TEST(ReadTraceErrors, BadDType) {
  ExpectEventError(
      R"({"ev": "rs", "fsdp": 0, "param": 0, "group": 3, "dtype": "int8", "numel": 20, "shard": "view"})",
      "event 2: rs: dtype 'int8' is not a known dtype");
}

TEST(ReadTraceErrors, BadCategory) {
  ExpectEventError(
      R"({"ev": "alloc", "id": 1, "bytes": 4, "cat": "bucket_data"})",
      "event 2: alloc: cat 'bucket_data' is made by a bucket policy at replay and never "
      "appears in a trace");
  ExpectEventError(R"({"ev": "alloc", "id": 1, "bytes": 4, "cat": "weights"})",
                   "event 2: alloc: cat 'weights' is not a trace category");
}

TEST(ReadTraceErrors, BadShardMode) {
  ExpectEventError(
      R"({"ev": "rs", "fsdp": 0, "param": 0, "group": 3, "dtype": "bf16", "numel": 20, "shard": "copy"})",
      "event 2: rs: shard 'copy' is not a shard mode (expected view, cast, accumulate, "
      "offload or no_grad)");
  // "offload" (FSDP2's CPUOffloadPolicy) came with format v4.
  ExpectEventError(
      R"({"ev": "rs", "fsdp": 0, "param": 0, "group": 3, "dtype": "fp32", "numel": 20, "shard": "offload"})",
      "event 2: rs: shard 'offload' needs schema_version 4 (this trace has 1)");
  // "no_grad" (a parameter FSDP2 leaves out of its reduce-scatter) came with format v6.
  ExpectEventError(
      R"({"ev": "rs", "fsdp": 0, "param": 0, "group": 3, "dtype": "fp32", "numel": 20, "shard": "no_grad"})",
      "event 2: rs: shard 'no_grad' needs schema_version 6 (this trace has 1)");
}

TEST(ReadTrace, OffloadShardInAVersion4Trace) {
  std::string json = Trace(
      R"({"ev": "iteration", "index": 0}, {"ev": "phase", "phase": "backward"},
         {"ev": "rs", "fsdp": 0, "param": 0, "group": 3, "dtype": "fp32", "numel": 20, "shard": "offload"})");
  json.replace(json.find("\"schema_version\": 1"), 19, "\"schema_version\": 4");
  ReadResult r = Read(json);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.sink.events.size(), 3u);
  EXPECT_EQ(r.sink.events[2].shard_mode, ShardMode::kOffload);
}

// A trace of format 5 with these events: the framework's own collectives.
std::string Version5Trace(std::string_view events, std::string_view header_extra = "") {
  std::string json = Trace(events);
  json.replace(json.find("\"schema_version\": 1"), 19,
               fmt::format("\"schema_version\": 5{}", header_extra));
  return json;
}

TEST(ReadTrace, FrameworkCollectivesInAVersion5Trace) {
  ReadResult r = Read(Version5Trace(
      R"({"ev": "alloc", "id": 9, "bytes": 80, "stream": 1, "cat": "all_gather"},
         {"ev": "all_gather", "id": 9, "stream": 1, "group": 3, "dtype": "bf16", "numel": 20},
         {"ev": "all_reduce", "id": 9, "stream": 2, "group": 140234, "dtype": "fp32", "numel": 20})",
      R"(, "replicate_group": 3)"));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.header.replicate_group, std::optional<GroupId>(3));
  ASSERT_EQ(r.sink.events.size(), 3u);
  const Event& gather = r.sink.events[1];
  EXPECT_EQ(gather.kind, EventKind::kAllGather);
  EXPECT_EQ(gather.id, 9u);
  EXPECT_EQ(gather.stream, 1u);
  EXPECT_EQ(gather.group, 3u);
  EXPECT_EQ(gather.dtype, DType::kBFloat16);
  EXPECT_EQ(gather.numel, 20u);
  EXPECT_EQ(r.sink.events[2].kind, EventKind::kAllReduce);
  EXPECT_EQ(r.sink.events[2].group, 140234u);
}

TEST(ReadTraceErrors, FrameworkCollectives) {
  // They came with format 5, as did replicate_group.
  ExpectEventError(
      R"({"ev": "all_gather", "id": 9, "stream": 1, "group": 3, "dtype": "bf16", "numel": 20})",
      "event 2: all_gather: 'all_gather' events need schema_version 5 (this trace has 1)");
  std::string json = Trace("");
  json.replace(json.find("\"rank\": 0"), 10, "\"rank\": 0, \"replicate_group\": 3,");
  ExpectError(json, {"key 'replicate_group' needs schema_version 5 (this trace has 1)"});
  ExpectError(Version5Trace("", R"(, "replicate_group": 12)"),
              {"replicate_group 12 is not declared in 'groups'"});
  ExpectError(
      Version5Trace(
          R"({"ev": "all_reduce", "id": 9, "stream": 1, "group": 4, "dtype": "fp32", "numel": 20})"),
      {"event 0: all_reduce: group 4 is not declared in the header"});
  ExpectError(
      Version5Trace(R"({"ev": "all_gather", "id": 9, "group": 3, "dtype": "fp32", "numel": 20})"),
      {"event 0: all_gather: missing field 'stream'"});
  ExpectError(
      Version5Trace(
          R"({"ev": "all_gather", "id": 9, "stream": 1, "group": 3, "dtype": "fp32", "numel": 0})"),
      {"event 0: all_gather: 'numel' must be positive (got 0)"});
  ExpectError(
      Version5Trace(
          R"({"ev": "all_gather", "id": 9, "stream": 1, "group": 3, "dtype": "fp32", "numel": 2, "shard": "view"})"),
      {"event 0: all_gather: "});
}

TEST(ReadTraceErrors, CastWithoutCastDType) {
  ExpectEventError(
      R"({"ev": "rs", "fsdp": 0, "param": 0, "group": 3, "dtype": "bf16", "numel": 20, "shard": "cast"})",
      "event 2: rs: missing field 'cast_dtype'");
}

TEST(ReadTraceErrors, BadPhase) {
  ExpectEventError(R"({"ev": "phase", "phase": "init"})",
                   "event 2: phase: phase 'init' is not a trace phase (expected forward, backward, "
                   "step or zero_grad)");
  ExpectEventError(R"({"ev": "phase", "phase": "Forward"})",
                   "event 2: phase: phase 'Forward' is not a trace phase");
}

}  // namespace
}  // namespace bucketsim

namespace bucketsim {
namespace {

// The example in the format's specification must stay a valid trace.
TEST(TraceSpec, ReadmeExampleIsValid) {
  std::ifstream in(std::string(BUCKETSIM_SOURCE_DIR) + "/traces/README.md");
  std::string readme((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t begin = readme.find("```json\n");
  ASSERT_NE(begin, std::string::npos);
  begin += 8;
  std::string example = readme.substr(begin, readme.find("```", begin) - begin);
  ReadResult r = Read(example);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.sink.events.size(), 12u);
}

}  // namespace
}  // namespace bucketsim
