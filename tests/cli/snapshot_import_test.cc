// PyTorch memory snapshots end to end: pickles written by Python's pickle module at test time
// (tests/tools/snapshot_fixtures.py), imported by tools/snapshot_to_trace.py, validated and
// replayed by the real binary.
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/run_binary.h"

namespace bucketsim {
namespace {

using testing::RunBucketsim;

constexpr std::uint64_t kMiB = 1 << 20;

// Writes every fixture pickle and imports it; returns the directory of the traces.
const std::string& ImportedTraces() {
  static const std::string dir = [] {
    std::string out = (std::filesystem::temp_directory_path() /
                       ("bucketsim-snapshots-" + std::to_string(::getpid())))
                          .string();
    std::string source = BUCKETSIM_SOURCE_DIR;
    std::string command = "python3 " + source + "/tests/tools/snapshot_fixtures.py " + out;
    for (const char* name :
         {"default-old", "default-new", "expandable", "streams-deferred", "wrapped"}) {
      command += " && python3 " + source + "/tools/snapshot_to_trace.py " + out + "/" + name +
                 ".pickle -o " + out + "/" + name + ".json";
    }
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    return out;
  }();
  return dir;
}

nlohmann::json Validate(const std::string& name, std::vector<std::string> extra, int exit_code) {
  std::string trace = ImportedTraces() + "/" + name + ".json";
  std::string json = trace + ".validate.json";
  std::vector<std::string> args = {"validate", trace, "--json", json};
  args.insert(args.end(), extra.begin(), extra.end());
  testing::BinaryResult run = RunBucketsim(args);
  EXPECT_EQ(run.exit_code, exit_code) << run.out << run.err;
  return nlohmann::json::parse(testing::ReadFile(json));
}

TEST(SnapshotImport, EveryFixtureReplaysToTheSnapshotsOwnAccounting) {
  // name, replayed events, segment events, allocated at the dump, reserved at the dump
  struct Expected {
    const char* name;
    std::uint64_t events;
    std::uint64_t segments;
    std::uint64_t allocated;
    std::uint64_t reserved;
  };
  for (const Expected& e : {
           Expected{"default-old", 5, 3, 65536000, 70 * kMiB},
           Expected{"default-new", 7, 4, 34078720, 40 * kMiB},
           Expected{"expandable", 5, 3, 44564480, 60 * kMiB},
           Expected{"streams-deferred", 8, 3, 5243392, 42 * kMiB},
           Expected{"wrapped", 4, 2, 3149824, 22 * kMiB},
       }) {
    SCOPED_TRACE(e.name);
    nlohmann::json report = Validate(e.name, {}, 0);
    EXPECT_EQ(report["consistent"], true);
    const nlohmann::json& s = report["snapshot"];
    EXPECT_EQ(s["accounting_agrees"], true);
    EXPECT_EQ(s["allocated"]["events_checked"], e.events);
    EXPECT_EQ(s["allocated"]["events_matching"], e.events);
    EXPECT_EQ(s["observed_totals"]["allocated_bytes"], e.allocated);
    EXPECT_EQ(s["allocated"]["predicted_final_bytes"], e.allocated);
    EXPECT_EQ(s["observed_totals"]["reserved_bytes"], e.reserved);
    EXPECT_EQ(s["reserved"]["predicted_final_bytes"], e.reserved);
    EXPECT_EQ(s["reserved"]["observed_final_bytes"], e.reserved);
    EXPECT_EQ(s["segments"]["predicted"], e.segments);
    EXPECT_EQ(s["segments"]["observed"], e.segments);
    EXPECT_EQ(s["segments"]["matching"], e.segments);
    EXPECT_TRUE(s["segments"]["first_divergence"].is_null());
  }
}

TEST(SnapshotImport, AnotherAllocConfReportsTheFirstDivergence) {
  nlohmann::json report = Validate("default-old", {"--alloc-conf", "expandable_segments:True"}, 0);
  const nlohmann::json& s = report["snapshot"];
  EXPECT_EQ(s["alloc_conf"], "expandable_segments:True");
  EXPECT_EQ(s["segments"]["matching"], 0);
  const nlohmann::json& d = s["segments"]["first_divergence"];
  EXPECT_EQ(d["event_index"], 1);
  EXPECT_EQ(d["predicted"]["action"], "segment_map");
  EXPECT_EQ(d["predicted"]["bytes"], 40 * kMiB);
  EXPECT_EQ(d["observed"]["action"], "segment_alloc");
  EXPECT_EQ(d["observed"]["bytes"], 26 * kMiB);
  EXPECT_EQ(s["reserved"]["predicted_peak_bytes"], 80 * kMiB);
  EXPECT_EQ(s["reserved"]["observed_peak_bytes"], 70 * kMiB);
}

TEST(SnapshotImport, ObservedOomIsReported) {
  nlohmann::json report = Validate("streams-deferred", {}, 0);
  EXPECT_EQ(report["snapshot"]["oom"]["observed"], 1);
  EXPECT_EQ(report["snapshot"]["oom"]["first_observed_event"], 12);
  EXPECT_TRUE(report["snapshot"]["oom"]["predicted_event"].is_null());
}

TEST(SnapshotImport, ATraceThatDisagreesWithItsDumpExitsWith1) {
  std::string text = testing::ReadFile(ImportedTraces() + "/default-old.json");
  const std::string from = R"("requested_bytes": 65536000)";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), R"("requested_bytes": 65536512)");
  std::string path = testing::WriteTempFile("tampered.json", text);
  testing::BinaryResult run = RunBucketsim({"validate", path});
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_NE(run.out.find("requested 65536512 (alive in the trace: 65536000)"), std::string::npos)
      << run.out;
}

TEST(SnapshotImport, AnImportedSnapshotReplaysAsAnAllocatorWhatIf) {
  std::string trace = ImportedTraces() + "/default-old.json";
  testing::BinaryResult run = RunBucketsim({"compare", trace, "--policy", "backward-only"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // 62.5 MiB allocated, 70 MiB reserved, as the snapshot; and too small a device fails.
  EXPECT_NE(run.out.find("62.50                70.00"), std::string::npos) << run.out;
  testing::BinaryResult small =
      RunBucketsim({"check", trace, "--policy", "backward-only", "--device-memory", "60MiB",
                    "--device-overhead", "0", "--max-peak-reserved", "1GiB"});
  EXPECT_EQ(small.exit_code, 1) << small.out << small.err;
  EXPECT_NE(small.out.find("out of memory at event 7"), std::string::npos) << small.out;
}

// Without a reduce-scatter request every policy replays the same events: compare and sweep say
// so in one line, and a generated trace (which has them) does not get the line.
TEST(SnapshotImport, CompareAndSweepSayThePoliciesCannotDifferWithoutReduceScatters) {
  const std::string note =
      "This trace has no reduce-scatter request (rs event), so the policies cannot differ on it; "
      "record your model's program with tools/record_program.py";
  std::string trace = ImportedTraces() + "/default-new.json";
  testing::BinaryResult compare = RunBucketsim({"compare", trace});
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  EXPECT_NE(compare.out.find(note), std::string::npos) << compare.out;
  testing::BinaryResult sweep = RunBucketsim({"sweep", trace, "--bucket-cap-mb", "1,25"});
  ASSERT_EQ(sweep.exit_code, 0) << sweep.err;
  EXPECT_NE(sweep.out.find(note), std::string::npos) << sweep.out;
  testing::BinaryResult generated = RunBucketsim({"compare", "traces/tiny-ws2.json"});
  ASSERT_EQ(generated.exit_code, 0) << generated.err;
  EXPECT_EQ(generated.out.find("no reduce-scatter request"), std::string::npos) << generated.out;
}

// compare models the allocator settings the snapshot was recorded under unless told otherwise,
// and the report says which: the expandable fixture peaks at 80 MiB reserved with
// expandable_segments, 70 MiB with PyTorch's defaults (--alloc-conf '').
TEST(SnapshotImport, CompareDefaultsToTheTracesAllocConf) {
  std::string trace = ImportedTraces() + "/expandable.json";
  struct Case {
    std::vector<std::string> flags;
    const char* memory_model;
    std::uint64_t peak_reserved;
  };
  for (const Case& c : {
           Case{{}, "caching, alloc_conf expandable_segments:True (the trace's)", 80 * kMiB},
           Case{{"--alloc-conf", "expandable_segments:True"},
                "caching, alloc_conf expandable_segments:True",
                80 * kMiB},
           Case{{"--alloc-conf", ""}, "caching", 70 * kMiB},
       }) {
    std::string json = trace + ".compare.json";
    std::vector<std::string> args = {"compare", trace, "--policy", "unbucketed", "--json", json};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    testing::BinaryResult run = RunBucketsim(args);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    nlohmann::json report = nlohmann::json::parse(testing::ReadFile(json));
    EXPECT_EQ(report["context"]["memory_model"], c.memory_model);
    EXPECT_EQ(report["policies"][0]["peak_reserved_bytes"], c.peak_reserved) << c.memory_model;
  }
}

TEST(SnapshotImport, ABadAllocConfInTheTraceIsAnInputError) {
  std::string text = testing::ReadFile(ImportedTraces() + "/expandable.json");
  std::string from = "\"expandable_segments:True\"";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), "\"no_such_setting:1\"");
  std::string path = testing::WriteTempFile("bad-alloc-conf.json", text);
  testing::BinaryResult run = RunBucketsim({"compare", path, "--policy", "unbucketed"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("header: alloc_conf: "), std::string::npos) << run.err;
}

}  // namespace
}  // namespace bucketsim
