// The reader's own parser of the events array (src/io/json_scanner.h): JSON details that the
// header, read by nlohmann_json, never meets in the other tests, its messages, and buffer
// refills at every position (internal::ReadTraceFromStringInChunks with a few bytes per read).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "io/trace_reader.h"
#include "io/trace_reader_internal.h"
#include "recording_sink.h"

namespace bucketsim {
namespace {

constexpr std::string_view kHeader = R"({"schema_version": 1, "world_size": 8, "rank": 0,
 "streams": ["default", "all_gather", "post_backward"],
 "groups": [{"id": 3, "ranks": [0, 1]}],
 "fsdp": [{"name": "block0", "params": [{"name": "w", "numel": 40, "dtype": "fp32"}]}],
 "events": [
)";

// A trace with this header and these events (text placed between the brackets as it is).
std::string Trace(std::string_view events) { return fmt::format("{}{}\n]}}\n", kHeader, events); }

struct Result {
  Status status;
  TraceHeader header;
  RecordingSink sink;
};

// Reads `json` in chunks of `chunk` bytes (0: as ReadTraceFromString does).
Result Read(std::string_view json, std::size_t chunk = 0) {
  Result r;
  r.status = chunk == 0
                 ? ReadTraceFromString(json, "t.json", r.header, r.sink)
                 : internal::ReadTraceFromStringInChunks(json, "t.json", r.header, r.sink, chunk);
  return r;
}

std::string Describe(const Result& r) {
  std::string text = r.status.ToString() + "\n";
  for (const Event& e : r.sink.events) {
    text += fmt::format("{} {} {} {} {} {} {} {} {} {} '{}'\n", e.index, EventKindName(e.kind),
                        e.id, e.bytes, e.stream, e.dur_us, e.group, e.numel, e.set_to_none,
                        static_cast<int>(e.phase),
                        e.name < r.header.names.size() ? r.header.names[e.name] : "");
  }
  return text + fmt::format("ends {}", r.sink.ends);
}

// Reads `json` whole and in chunks of 1, 2, 3, 7 and 64 bytes: the results must be the same.
// Returns the whole read's.
Result ReadEveryWay(std::string_view json) {
  Result whole = Read(json);
  std::string expected = Describe(whole);
  for (std::size_t chunk : {1, 2, 3, 7, 64}) {
    EXPECT_EQ(Describe(Read(json, chunk)), expected) << "chunk " << chunk << ": " << json;
  }
  return whole;
}

// The message of reading `json` every way, which must fail.
std::string ErrorOf(std::string_view json) {
  Result r = ReadEveryWay(json);
  EXPECT_FALSE(r.status.ok()) << json;
  return r.status.message();
}

// The message for one bad event at index 0, the first line after the header (line 6).
std::string EventError(std::string_view event) { return ErrorOf(Trace(event)); }

TEST(ReadTraceEvents, SameResultWhateverTheBufferSize) {
  Result r = ReadEveryWay(Trace(R"({"ev": "iteration", "index": 0},
{"ev": "phase", "phase": "forward"},
{"ev": "alloc", "id": 1, "bytes": 4096, "stream": 1, "cat": "activation"},
{"cat":"grad","bytes":8,"ev":"alloc","id":2},
  {  "ev" : "compute" , "dur_us" : 12.5 , "name" : "block0.fwd" }  ,
{"ev": "mark", "name": "after fwd"},
{"ev": "phase", "phase": "backward"},
{"ev": "rs", "fsdp": 0, "param": 0, "group": 3, "dtype": "bf16", "numel": 20, "shard": "cast", "cast_dtype": "fp32"},
{"ev": "flush"},
{"ev": "free", "id": 1},{"ev": "free", "id": 2},
{"ev": "zero_grad", "set_to_none": false}, {"ev": "zero_grad"})"));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.sink.events.size(), 13u);
  EXPECT_EQ(r.sink.events[4].dur_us, 12.5);
  EXPECT_EQ(r.header.names[r.sink.events[4].name], "block0.fwd");
  EXPECT_EQ(r.sink.events[7].cast_dtype, DType::kFloat32);
  EXPECT_FALSE(r.sink.events[11].set_to_none);
  EXPECT_TRUE(r.sink.events[12].set_to_none);
  EXPECT_EQ(r.sink.ends, 1);
}

TEST(ReadTraceEvents, EmptyEventsArray) {
  Result r = ReadEveryWay(fmt::format("{}]}}", kHeader));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_TRUE(r.sink.events.empty());
  EXPECT_EQ(r.sink.headers, 1);
  EXPECT_EQ(r.sink.ends, 1);
}

TEST(ReadTraceEvents, DecodesEscapesInNamesAndKeys) {
  Result r = ReadEveryWay(Trace(
      R"({"ev": "mark", "name": "q\"b\\s\/ \b\f\n\r\t \u0041\u00e9\u2603 \uD83D\uDE00 é☃😀"},
{"\u0065v": "compute", "dur_\u0075s": 1, "name": "\u0000"})"));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.sink.events.size(), 2u);
  EXPECT_EQ(r.header.names[r.sink.events[0].name],
            "q\"b\\s/ \b\f\n\r\t A\u00e9\u2603 \U0001F600 \u00e9\u2603\U0001F600");
  EXPECT_EQ(r.sink.events[1].kind, EventKind::kCompute);
  EXPECT_EQ(r.header.names[r.sink.events[1].name], std::string(1, '\0'));
}

TEST(ReadTraceEvents, RejectsBadStrings) {
  EXPECT_EQ(
      EventError(R"({"ev": "mark", "name": "a\x"})"),
      "t.json: not JSON: syntax error at line 6, column 27: while parsing value - invalid "
      "string: forbidden character after backslash; last read: '\"a\\x' (while reading event 0)");
  EXPECT_EQ(EventError(R"({"ev": "mark", "name": "\u12G4"})"),
            "t.json: not JSON: syntax error at line 6, column 29: while parsing value - invalid "
            "string: '\\u' must be followed by 4 hex digits; last read: '\"\\u12G' (while reading "
            "event 0)");
  EXPECT_EQ(EventError(R"({"ev": "mark", "name": "\uD800x"})"),
            "t.json: not JSON: syntax error at line 6, column 31: while parsing value - invalid "
            "string: surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF; last read: "
            "'\"\\uD800x' (while reading event 0)");
  EXPECT_EQ(EventError(R"({"ev": "mark", "name": "\uDC00"})"),
            "t.json: not JSON: syntax error at line 6, column 30: while parsing value - invalid "
            "string: surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF; last read: '\"\\uDC00' "
            "(while reading event 0)");
  EXPECT_EQ(EventError("{\"ev\": \"mark\", \"name\": \"a\tb\"}"),
            "t.json: not JSON: syntax error at line 6, column 26: while parsing value - invalid "
            "string: control character U+0009 (HT) must be escaped to \\u0009 or \\t; last read: "
            "'\"a<U+0009>' (while reading event 0)");
  EXPECT_EQ(EventError("{\"ev\": \"mark\", \"name\": \"a\xC3(\"}"),
            "t.json: not JSON: syntax error at line 6, column 27: while parsing value - invalid "
            "string: ill-formed UTF-8 byte; last read: '\"a\xC3(' (while reading event 0)");
  EXPECT_EQ(EventError("{\"ev\": \"mark\", \"name\": \"\xED\xA0\x80\"}"),  // an encoded surrogate
            "t.json: not JSON: syntax error at line 6, column 26: while parsing value - invalid "
            "string: ill-formed UTF-8 byte; last read: '\"\xED\xA0' (while reading event 0)");
  EXPECT_EQ(
      EventError("{\"e\\v\": \"mark\"}"),
      "t.json: not JSON: syntax error at line 6, column 5: while parsing object key - invalid "
      "string: forbidden character after backslash; last read: '\"e\\v'; expected string "
      "literal (while reading event 0)");
  // A raw newline: nlohmann counts it on the next line, at column 0.
  EXPECT_EQ(EventError("{\"ev\": \"mark\", \"name\": \"a\nb\"}"),
            "t.json: not JSON: syntax error at line 7, column 0: while parsing value - invalid "
            "string: control character U+000A (LF) must be escaped to \\u000A or \\n; last read: "
            "'\"a<U+000A>' (while reading event 0)");
}

TEST(ReadTraceEvents, NumbersAtTheLimitsOf64Bits) {
  Result r = ReadEveryWay(Trace(R"({"ev": "free", "id": 18446744073709551615},
{"ev": "free", "id": 9223372036854775808},
{"ev": "free", "id": 9223372036854775807},
{"ev": "free", "id": 0},
{"ev": "free", "id": -0},
{"ev": "iteration", "index": 12345678901234567890},
{"ev": "compute", "dur_us": 1e-400},
{"ev": "compute", "dur_us": 0.1},
{"ev": "compute", "dur_us": 1.5E+1},
{"ev": "compute", "dur_us": 25e-1},
{"ev": "compute", "dur_us": 123456789012345678901234567890})"));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const std::vector<Event>& e = r.sink.events;
  ASSERT_EQ(e.size(), 11u);
  EXPECT_EQ(e[0].id, 18446744073709551615u);
  EXPECT_EQ(e[1].id, 9223372036854775808u);
  EXPECT_EQ(e[2].id, 9223372036854775807u);
  EXPECT_EQ(e[3].id, 0u);
  EXPECT_EQ(e[4].id, 0u);
  EXPECT_EQ(e[5].id, 12345678901234567890u);
  EXPECT_EQ(e[6].dur_us, 0.0);
  EXPECT_EQ(e[7].dur_us, 0.1);
  EXPECT_EQ(e[8].dur_us, 15.0);
  EXPECT_EQ(e[9].dur_us, 2.5);
  EXPECT_EQ(e[10].dur_us, 1.2345678901234568e29);

  EXPECT_EQ(EventError(R"({"ev": "free", "id": 18446744073709551616})"),
            "t.json: event 0: free: 'id' overflows 64 bits (got 1.8446744073709552e+19)");
  EXPECT_EQ(EventError(R"({"ev": "free", "id": 99999999999999999999})"),
            "t.json: event 0: free: 'id' overflows 64 bits (got 1e+20)");
  EXPECT_EQ(EventError(R"({"ev": "free", "id": -9223372036854775808})"),
            "t.json: event 0: free: 'id' must not be negative (got -9223372036854775808)");
  EXPECT_EQ(EventError(R"({"ev": "free", "id": -9223372036854775809})"),
            "t.json: event 0: free: 'id' must not be negative (got -9.223372036854776e+18)");
  EXPECT_EQ(EventError(R"({"ev": "free", "id": -1})"),
            "t.json: event 0: free: 'id' must not be negative (got -1)");
  EXPECT_EQ(EventError(R"({"ev": "free", "id": 0.0})"),
            "t.json: event 0: free: 'id' must be an integer (got 0.0)");
  EXPECT_EQ(EventError(R"({"ev": "free", "id": -0.0})"),
            "t.json: event 0: free: 'id' must be an integer (got -0.0)");
  EXPECT_EQ(EventError(R"({"ev": "free", "id": 1E2})"),
            "t.json: event 0: free: 'id' must be an integer (got 100.0)");
  EXPECT_EQ(EventError(R"({"ev": "compute", "dur_us": -1e-3})"),
            "t.json: event 0: compute: 'dur_us' must not be negative (got -0.001)");
  EXPECT_EQ(
      EventError(R"({"ev": "compute", "dur_us": -1e999})"),
      "t.json: not JSON: number overflow parsing '-1e999' at byte 282 (while reading event 0)");
}

TEST(ReadTraceEvents, RejectsBadNumbers) {
  EXPECT_EQ(
      EventError(R"({"ev": "free", "id": 01})"),
      "t.json: not JSON: syntax error at line 6, column 23: while parsing object - unexpected "
      "number literal; expected '}' (while reading event 0)");
  EXPECT_EQ(EventError(R"({"ev": "free", "id": -})"),
            "t.json: not JSON: syntax error at line 6, column 23: while parsing value - invalid "
            "number; expected digit after '-'; last read: '-}' (while reading event 0)");
  EXPECT_EQ(EventError(R"({"ev": "free", "id": 1.})"),
            "t.json: not JSON: syntax error at line 6, column 24: while parsing value - invalid "
            "number; expected digit after '.'; last read: '1.}' (while reading event 0)");
  EXPECT_EQ(EventError(R"({"ev": "free", "id": 1e})"),
            "t.json: not JSON: syntax error at line 6, column 24: while parsing value - invalid "
            "number; expected '+', '-', or digit after exponent; last read: '1e}' (while reading "
            "event 0)");
  EXPECT_EQ(
      EventError(R"({"ev": "free", "id": 1e+})"),
      "t.json: not JSON: syntax error at line 6, column 25: while parsing value - invalid "
      "number; expected digit after exponent sign; last read: '1e+}' (while reading event 0)");
  EXPECT_EQ(EventError(R"({"ev": "free", "id": +1})"),
            "t.json: not JSON: syntax error at line 6, column 22: while parsing value - invalid "
            "literal; last read: '+' (while reading event 0)");
  // nlohmann "ungets" the newline after a number: column 0 of the number's line.
  EXPECT_EQ(EventError("{\"ev\": \"free\", \"id\": 1\n 2}"),
            "t.json: not JSON: syntax error at line 7, column 2: while parsing object - unexpected "
            "number literal; expected '}' (while reading event 0)");
  EXPECT_EQ(EventError("{\"ev\": \"free\", \"id\": 1} 2\n"),
            "t.json: not JSON: syntax error at line 6, column 0: while parsing array - unexpected "
            "number literal; expected ']' (while reading event 1)");
}

TEST(ReadTraceEvents, SyntaxErrorsNameTheEventAndWhatWasExpected) {
  EXPECT_EQ(EventError(R"({"ev" "flush"})"),
            "t.json: not JSON: syntax error at line 6, column 13: while parsing object separator - "
            "unexpected string literal; expected ':' (while reading event 0)");
  EXPECT_EQ(EventError(R"({"ev": "flush",})"),
            "t.json: not JSON: syntax error at line 6, column 16: while parsing object key - "
            "unexpected '}'; expected string literal (while reading event 0)");
  EXPECT_EQ(
      EventError(R"({ev: "flush"})"),
      "t.json: not JSON: syntax error at line 6, column 2: while parsing object key - invalid "
      "literal; last read: 'e'; expected string literal (while reading event 0)");
  EXPECT_EQ(EventError(R"({"ev": "flush"},)"),
            "t.json: not JSON: syntax error at line 7, column 1: while parsing value - unexpected "
            "']'; expected '[', '{', or a literal (while reading event 1)");
  EXPECT_EQ(EventError(R"({"ev": "flush"} {"ev": "flush"})"),
            "t.json: not JSON: syntax error at line 6, column 17: while parsing array - unexpected "
            "'{'; expected ']' (while reading event 1)");
  EXPECT_EQ(EventError(R"({"ev": "zero_grad", "set_to_none": nul})"),
            "t.json: not JSON: syntax error at line 6, column 39: while parsing value - invalid "
            "literal; last read: 'nul}' (while reading event 0)");
  EXPECT_EQ(EventError(R"({"ev": "zero_grad", "set_to_none": truex})"),
            "t.json: not JSON: syntax error at line 6, column 40: while parsing object - invalid "
            "literal; last read: 'x'; expected '}' (while reading event 0)");
  EXPECT_EQ(EventError(R"({"ev": "free", "id": })"),
            "t.json: not JSON: syntax error at line 6, column 22: while parsing value - unexpected "
            "'}'; expected '[', '{', or a literal (while reading event 0)");
  EXPECT_EQ(EventError("{\"ev\": \"flush\"}\x01"),
            "t.json: not JSON: syntax error at line 6, column 16: while parsing array - invalid "
            "literal; last read: '<U+0001>'; expected ']' (while reading event 1)");
}

TEST(ReadTraceEvents, ElementsThatAreNotObjects) {
  EXPECT_EQ(EventError(R"("flush")"), "t.json: event 0: must be an object, got a string");
  EXPECT_EQ(EventError("12"), "t.json: event 0: must be an object, got a number");
  EXPECT_EQ(EventError("true"), "t.json: event 0: must be an object, got a boolean");
  EXPECT_EQ(EventError("null"), "t.json: event 0: must be an object, got null");
  EXPECT_EQ(EventError("[]"), "t.json: event 0: must be an object, got an array");
  EXPECT_EQ(EventError(R"({"ev": "flush"}, [1, )"),
            "t.json: event 1: must be an object, got an array");
}

TEST(ReadTraceEvents, NestedValuesAreCheckedAndSkipped) {
  EXPECT_EQ(
      EventError(R"({"ev": "free", "id": {"a": [1, 2.5, -3, "x\n", true, false, null, {}, []]}})"),
      "t.json: event 0: free: 'id' must be an integer, got an object");
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(ErrorOf(Trace(fmt::format(R"({{"ev": "mark", "name": {}}})", deep))),
            "t.json: event 0: mark: 'name' must be a string, got an array");
  EXPECT_EQ(EventError(R"({"ev": "free", "id": [1 2]})"),
            "t.json: not JSON: syntax error at line 6, column 25: while parsing array - unexpected "
            "number literal; expected ']' (while reading event 0)");
  EXPECT_EQ(EventError(R"({"ev": "free", "id": {"a" 1}})"),
            "t.json: not JSON: syntax error at line 6, column 27: while parsing object separator - "
            "unexpected number literal; expected ':' (while reading event 0)");
  EXPECT_EQ(EventError(R"({"ev": "free", "id": {"a": 1,}})"),
            "t.json: not JSON: syntax error at line 6, column 30: while parsing object key - "
            "unexpected '}'; expected string literal (while reading event 0)");
  EXPECT_EQ(
      EventError(R"({"ev": "free", "id": [1, 1e999]})"),
      "t.json: not JSON: number overflow parsing '1e999' at byte 278 (while reading event 0)");
  EXPECT_EQ(EventError(R"({"ev": "free", "id": [1, ]})"),
            "t.json: not JSON: syntax error at line 6, column 26: while parsing value - unexpected "
            "']'; expected '[', '{', or a literal (while reading event 0)");
  EXPECT_EQ(EventError(R"({"ev": "free", "id": [1} ]})"),
            "t.json: not JSON: syntax error at line 6, column 24: while parsing array - unexpected "
            "'}'; expected ']' (while reading event 0)");
}

TEST(ReadTraceEvents, CrlfLineEndings) {
  std::string json = Trace(R"({"ev": "iteration", "index": 0},
{"ev": "phase", "phase": "forward"}
,{"ev": "mark", "name": "m"})");
  for (std::size_t at = json.find('\n'); at != std::string::npos; at = json.find('\n', at + 2)) {
    json.insert(at, "\r");
  }
  Result r = ReadEveryWay(json);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.sink.events.size(), 3u);
  EXPECT_EQ(r.header.names[r.sink.events[2].name], "m");
  // Columns count the '\r'.
  std::string cut = json.substr(0, json.find("\"forward\""));
  EXPECT_EQ(
      ErrorOf(cut),
      "t.json: truncated: unexpected end of input at line 7, column 26 (while reading event 1)");
}

TEST(ReadTraceEvents, TruncatedAnywhereInTheEvents) {
  std::string json =
      Trace(R"({"ev": "alloc", "id": 1, "bytes": 4096, "stream": 1, "cat": "activation"},
{"ev": "compute", "dur_us": 1.5e1, "name": "a\u00e9\"b"}, {"ev": "zero_grad", "set_to_none": true},
{"ev": "free", "id": {"a": [null, false]}})");
  std::size_t begin = json.find("\"events\": [") + 11;
  std::size_t last_event = json.rfind("{\"ev\"");
  for (std::size_t size = begin; size < json.size(); ++size) {
    std::string cut = json.substr(0, size);
    // Up to the end of the last event, the trace is truncated; after it, the last event is bad.
    if (size > last_event + 41) break;
    std::string message = ErrorOf(cut);
    EXPECT_TRUE(message.starts_with("t.json: truncated: unexpected end of input at line "))
        << size << ": " << message;
    EXPECT_NE(message.find(" (while reading event "), std::string::npos) << message;
  }
  EXPECT_EQ(ErrorOf(json.substr(0, json.rfind(']'))),
            "t.json: event 3: free: 'id' must be an integer, got an object");
}

TEST(ReadTraceEvents, WhatFollowsTheEvents) {
  std::string events = R"({"ev": "flush"})";
  Result ok = ReadEveryWay(fmt::format("{}{}]  \r\n}}\n\n \t", kHeader, events));
  EXPECT_TRUE(ok.status.ok()) << ok.status.ToString();
  EXPECT_EQ(ok.sink.ends, 1);
  EXPECT_EQ(ErrorOf(fmt::format("{}{}]", kHeader, events)),
            "t.json: truncated: unexpected end of input at line 6, column 17 (after the events)");
  EXPECT_EQ(
      ErrorOf(fmt::format("{}{}] ]", kHeader, events)),
      "t.json: not JSON: syntax error at line 6, column 18: while parsing object - unexpected "
      "']'; expected '}' (after the events)");
  EXPECT_EQ(ErrorOf(fmt::format("{}{}], 7", kHeader, events)),
            "t.json: not JSON: syntax error at line 6, column 19: while parsing object key - "
            "unexpected number literal; expected string literal (after the events)");
  EXPECT_EQ(ErrorOf(fmt::format("{}{}], \"rank\"", kHeader, events)),
            "t.json: header: key 'rank' comes after 'events'; the reader streams the events, so "
            "'events' must be the last key");
  EXPECT_EQ(ErrorOf(fmt::format("{}{}]}}\n{{}}", kHeader, events)),
            "t.json: not JSON: syntax error at line 7, column 1: while parsing value - unexpected "
            "'{'; expected end of input (after the top-level object)");
  Result refused = ReadEveryWay(fmt::format("{}{}]}} x", kHeader, events));
  EXPECT_EQ(refused.sink.ends, 0);
}

TEST(ReadTraceEvents, AnEventLargerThanTheBuffer) {
  std::string name(100000, 'n');
  name[5000] = '\xE2';  // a three-byte character across reads
  name[5001] = '\x98';
  name[5002] = '\x83';
  Result r = ReadEveryWay(Trace(fmt::format(R"({{"ev": "flush"}}, {{"ev": "mark", "name": "{}"}},
{{"ev": "flush"}})",
                                            name)));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.sink.events.size(), 3u);
  EXPECT_EQ(r.header.names[r.sink.events[1].name], name);
}

TEST(ReadTraceEvents, LinesAreCountedAcrossReads) {
  std::string events;
  for (int i = 0; i < 500; ++i) events += fmt::format("{{\"ev\": \"free\", \"id\": {}}},\n", i);
  events += R"({"ev": "free", "id": 1 "x"})";
  EXPECT_EQ(ErrorOf(Trace(events)),
            "t.json: not JSON: syntax error at line 506, column 26: while parsing object - "
            "unexpected string literal; expected '}' (while reading event 500)");
}

TEST(ReadTraceEvents, ANulByteEndsTheInputAsInNlohmann) {
  std::string json = fmt::format("{}{{\"ev\": \"flush\"}}]}}", kHeader);
  Result r = ReadEveryWay(json + std::string(1, '\0') + "anything");
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(ErrorOf(fmt::format("{}{{\"ev\": \"flush\"}}", kHeader) + std::string(1, '\0')),
            "t.json: not JSON: syntax error at line 6, column 16: while parsing array - unexpected "
            "end of input; expected ']' (while reading event 1)");
}

}  // namespace
}  // namespace bucketsim
