// Bad input through the real binary: each case exits 2 with one clear message on stderr naming
// the file, the event where there is one, and what is wrong; nothing crashes, nothing passes.
#include <gtest/gtest.h>

#include "testing/run_binary.h"

namespace bucketsim {
namespace {

using testing::RunBucketsim;
using testing::WriteTempFile;

const char* kHeader = R"({"schema_version": 1, "world_size": 2, "rank": 0,
  "streams": ["default", "post_backward"],
  "groups": [{"id": 1, "ranks": [0, 1]}],
  "fsdp": [{"name": "layer", "params": [{"name": "w", "numel": 2000, "dtype": "fp32"}]}],
  "events": [
)";

std::string TraceWith(const std::string& events) { return kHeader + events + "\n]}\n"; }

// Cut in the middle of the event, as a file whose writer died would be.
std::string Truncated(const std::string& trace) { return trace.substr(0, trace.size() - 20); }

struct Case {
  const char* name;
  std::string contents;
  std::vector<std::string> fragments;  // all must appear in the message
  // A broken consistency rule: replays reject it (exit 2); validate reports it (exit 1).
  bool consistency = false;
};

std::vector<Case> Cases() {
  return {
      {"empty", "", {"the file is empty"}},
      {"truncated",
       Truncated(TraceWith(R"({"ev": "alloc", "id": 1, "bytes": 10, "cat": "param"})")),
       {"truncated"}},
      {"not_json", "this is not a trace\n", {"not JSON"}},
      {"unknown_kind",
       TraceWith(R"({"ev": "allocate", "id": 1})"),
       {"event 0", "unknown event kind 'allocate'"}},
      {"unknown_free",
       TraceWith(R"({"ev": "alloc", "id": 1, "bytes": 10, "cat": "param"},
                    {"ev": "free", "id": 2})"),
       {"event 1", "free of unknown allocation id 2"},
       true},
      {"double_free",
       TraceWith(R"({"ev": "alloc", "id": 1, "bytes": 10, "cat": "param"},
                    {"ev": "free", "id": 1}, {"ev": "free", "id": 1})"),
       {"event 2", "double free of id 1"},
       true},
      {"negative_size",
       TraceWith(R"({"ev": "alloc", "id": 1, "bytes": -10, "cat": "param"})"),
       {"event 0", "bytes", "negative"}},
      {"overflowing_size",
       TraceWith(
           R"({"ev": "alloc", "id": 1, "bytes": 123456789012345678901234567890, "cat": "param"})"),
       {"event 0", "bytes", "64 bits"}},
      {"absurd_size",
       TraceWith(R"({"ev": "alloc", "id": 1, "bytes": 4503599627370496, "cat": "param"})"),
       {"event 0", "bytes"}},
      {"group_bigger_than_world",
       R"({"schema_version": 1, "world_size": 2, "rank": 0,
           "groups": [{"id": 1, "ranks": [0, 1, 2]}], "events": []})",
       {"header", "group 1"}},
      {"rs_numel_mismatch",
       TraceWith(R"({"ev": "phase", "phase": "backward"},
                    {"ev": "rs", "fsdp": 0, "param": 0, "group": 1, "dtype": "fp32", "numel": 10, "shard": "view"})"),
       {"event 1", "numel 10", "expected 1000"}},
      {"schema_version_7",
       R"({"schema_version": 7, "world_size": 1, "rank": 0, "events": []})",
       {"schema_version 7 is not supported"}},
      {"all_gather_in_v4",
       R"({"schema_version": 4, "world_size": 1, "rank": 0, "events": [{"ev": "all_gather", "id": 1, "stream": 0, "group": 1, "dtype": "fp32", "numel": 4}]})",
       {"event 0", "'all_gather' events need schema_version 5 (this trace has 4)"}},
      {"all_gather_into_a_dead_id",
       R"({"schema_version": 5, "world_size": 2, "rank": 0, "groups": [{"id": 1, "ranks": [0, 1]}], "events": [{"ev": "all_gather", "id": 1, "stream": 0, "group": 1, "dtype": "fp32", "numel": 4}]})",
       {"event 0", "all_gather into id 1, which is not live"},
       true},
      {"fsdp_impl_in_v3",
       R"({"schema_version": 3, "world_size": 1, "rank": 0, "fsdp_impl": "fsdp1", "events": []})",
       {"header", "key 'fsdp_impl' needs schema_version 4 (this trace has 3)"}},
      {"unknown_fsdp_impl",
       R"({"schema_version": 4, "world_size": 1, "rank": 0, "fsdp_impl": "fsdp3", "events": []})",
       {"header", "fsdp_impl 'fsdp3' is not fairscale, fsdp1 or fsdp2"}},
      {"observed_event_in_v2",
       R"({"schema_version": 2, "world_size": 1, "rank": 0,
           "events": [{"ev": "segment_alloc", "addr": 4096, "bytes": 2097152, "stream": 0}]})",
       {"event 0", "'segment_alloc' events need schema_version 3"}},
      {"stream_events_in_v1",
       R"({"schema_version": 1, "world_size": 1, "rank": 0, "streams": ["default", "side"],
           "events": [{"ev": "sync", "stream": 1}]})",
       {"event 0", "'sync' events need schema_version 2"}},
      {"record_stream_of_freed_id",
       R"({"schema_version": 2, "world_size": 1, "rank": 0, "streams": ["default", "side"],
           "events": [{"ev": "alloc", "id": 1, "bytes": 10, "cat": "grad"},
                      {"ev": "free", "id": 1},
                      {"ev": "record_stream", "id": 1, "stream": 1}]})",
       {"event 2", "record_stream of id 1, which is not live"},
       true},
  };
}

TEST(BadInput, EachCaseIsRejectedWithItsReasonAndExitCode2) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    std::string path = WriteTempFile(std::string(c.name) + ".json", c.contents);
    for (const char* command : {"validate", "compare"}) {
      if (c.consistency && std::string(command) == "validate") continue;  // see below
      testing::BinaryResult run = RunBucketsim({command, path});
      EXPECT_EQ(run.exit_code, 2) << command << ": " << run.err;
      EXPECT_TRUE(run.out.empty() || std::string(command) == "compare") << run.out;
      EXPECT_NE(run.err.find("bucketsim: error: "), std::string::npos) << run.err;
      EXPECT_NE(run.err.find(std::string(c.name) + ".json"), std::string::npos) << run.err;
      for (const std::string& fragment : c.fragments) {
        EXPECT_NE(run.err.find(fragment), std::string::npos)
            << command << " message lacks '" << fragment << "': " << run.err;
      }
    }
  }
}

TEST(BadInput, MissingFileIsAnErrorNotACrash) {
  testing::BinaryResult run = RunBucketsim({"compare", "no/such/trace.json"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("cannot open 'no/such/trace.json'"), std::string::npos) << run.err;
}

TEST(BadInput, UnknownPolicyNameIsRejected) {
  testing::BinaryResult run =
      RunBucketsim({"compare", "traces/tiny-ws2.json", "--policy", "always"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("unknown policy 'always'"), std::string::npos) << run.err;
}

TEST(BadInput, NonFiniteBucketCapIsAUsageError) {
  testing::BinaryResult run =
      RunBucketsim({"compare", "traces/tiny-ws2.json", "--bucket-cap-mb", "inf"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("takes MiB as a plain number"), std::string::npos) << run.err;
}

TEST(BadInput, AllocatorOptionsAreChecked) {
  testing::BinaryResult conf_without_caching =
      RunBucketsim({"compare", "traces/tiny-ws2.json", "--allocator", "exact", "--alloc-conf",
                    "expandable_segments:True"});
  EXPECT_EQ(conf_without_caching.exit_code, 2);
  EXPECT_NE(conf_without_caching.err.find("use them with --allocator caching"), std::string::npos);
  testing::BinaryResult bad_key =
      RunBucketsim({"compare", "traces/tiny-ws2.json", "--alloc-conf", "bogus:1"});
  EXPECT_EQ(bad_key.exit_code, 2);
  EXPECT_NE(bad_key.err.find("unknown key 'bogus'"), std::string::npos) << bad_key.err;
  EXPECT_EQ(RunBucketsim({"compare", "traces/tiny-ws2.json", "--allocator", "lru"}).exit_code, 2);
  EXPECT_EQ(RunBucketsim({"compare", "traces/tiny-ws2.json", "--device-memory", "lots"}).exit_code,
            2);
}

TEST(Validate, ReportsEachBrokenConsistencyRuleWithExitCode1) {
  for (const Case& c : Cases()) {
    if (!c.consistency) continue;
    SCOPED_TRACE(c.name);
    std::string path = WriteTempFile(std::string(c.name) + ".json", c.contents);
    testing::BinaryResult run = RunBucketsim({"validate", path});
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_TRUE(run.err.empty()) << run.err;
    EXPECT_NE(run.out.find("INCONSISTENT trace"), std::string::npos) << run.out;
    for (const std::string& fragment : c.fragments) {
      EXPECT_NE(run.out.find(fragment), std::string::npos) << "lacks '" << fragment << "'";
    }
  }
}

// All the problems of a trace at once, counted by kind with their first events; the rest of
// the trace is still checked and summarised.
TEST(Validate, CountsEveryProblemAndListsTheFirstEvents) {
  std::string path =
      WriteTempFile("many.json", TraceWith(R"({"ev": "alloc", "id": 1, "bytes": 10, "cat": "param"},
        {"ev": "free", "id": 5}, {"ev": "free", "id": 6}, {"ev": "free", "id": 1},
        {"ev": "free", "id": 1}, {"ev": "alloc", "id": 2, "bytes": 512, "cat": "grad"},
        {"ev": "alloc", "id": 2, "bytes": 512, "cat": "grad"})"));
  std::string json = path + ".report.json";
  testing::BinaryResult run = RunBucketsim({"validate", path, "--json", json});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_NE(run.out.find("4 inconsistent event(s), not replayed"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("free_of_unknown_id                2  first at event(s) 1, 2: event 1: "
                         "free of unknown allocation id 5"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("double_free                       1  first at event(s) 4"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("alloc_of_live_id                  1  first at event(s) 6"),
            std::string::npos)
      << run.out;
  std::string report = testing::ReadFile(json);
  EXPECT_NE(report.find(R"("consistent": false)"), std::string::npos) << report;
  EXPECT_NE(report.find(R"("kind": "free_of_unknown_id",
      "count": 2,
      "first_events": [
        1,
        2
      ])"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find(R"("snapshot": null)"), std::string::npos) << report;
}

TEST(BadInput, UnknownFlagIsAUsageError) {
  testing::BinaryResult run = RunBucketsim({"compare", "--colour", "blue"});
  EXPECT_EQ(run.exit_code, 2);
}

TEST(Validate, SummarisesAValidTrace) {
  testing::BinaryResult run = RunBucketsim({"validate", "traces/tiny-ws2.json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("consistent trace (schema_version 1)"), std::string::npos);
  EXPECT_NE(run.out.find("38 events, 2 iteration(s)"), std::string::npos);
  // Alive at the end: the params (368640 B) and the Adam state (737280 B).
  EXPECT_NE(run.out.find("360.00 KiB"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("720.00 KiB"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace bucketsim
