// The real binary on the shipped traces, its JSON report compared exactly with a reviewed copy
// in tests/golden/ after the volatile context fields are removed (the sim backend and the exact
// model are deterministic). To accept a deliberate change:
//   BUCKETSIM_UPDATE_GOLDENS=1 ctest --test-dir build -R Golden
// then review `git diff tests/golden`.
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/run_binary.h"

namespace bucketsim {
namespace {

using nlohmann::ordered_json;
using testing::RunBucketsim;

ordered_json WithoutVolatileFields(ordered_json report) {
  if (report.contains("sweeps")) {  // `sweep TRACE...`: a report per trace
    for (ordered_json& each : report["sweeps"]) each = WithoutVolatileFields(each);
    return report;
  }
  for (const char* key : {"tool_version", "git_sha", "argv", "host", "trace_path"}) {
    report["context"].erase(key);
  }
  return report;
}

void ExpectGolden(const std::string& golden_name, const std::vector<std::string>& args) {
  testing::BinaryResult run = RunBucketsim(args);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ordered_json actual = WithoutVolatileFields(ordered_json::parse(run.out));
  std::string golden_path = std::string(BUCKETSIM_SOURCE_DIR) + "/tests/golden/" + golden_name;
  if (const char* update = std::getenv("BUCKETSIM_UPDATE_GOLDENS"); update && *update == '1') {
    std::ofstream(golden_path) << actual.dump(2) << '\n';
    GTEST_SKIP() << "rewrote " << golden_path;
  }
  std::string expected_text = testing::ReadFile(golden_path);
  ASSERT_FALSE(expected_text.empty()) << "missing golden file " << golden_path;
  ordered_json expected = ordered_json::parse(expected_text);
  // Compare as text so a failure shows where the two differ.
  EXPECT_EQ(actual.dump(2), expected.dump(2));
}

TEST(Golden, CompareTinyTraceAllPolicies) {
  ExpectGolden("compare-tiny-ws2.json", {"compare", "traces/tiny-ws2.json", "--format", "json"});
}

TEST(Golden, CompareDefaultTraceAllPolicies) {
  ExpectGolden("compare-gpt-24l-h1024-ws8.json", {"compare", "--format", "json"});
}

TEST(Golden, CompareTinyTraceExactModel) {
  ExpectGolden("compare-tiny-ws2-exact.json",
               {"compare", "traces/tiny-ws2.json", "--format", "json", "--allocator", "exact"});
}

TEST(Golden, CompareDefaultTraceExpandableSegments) {
  ExpectGolden("compare-gpt-24l-h1024-ws8-expandable.json",
               {"compare", "--format", "json", "--alloc-conf", "expandable_segments:True"});
}

TEST(Golden, CompareTinyTraceOnATooSmallDevice) {
  ExpectGolden("compare-tiny-ws2-4mib-device.json",
               {"compare", "traces/tiny-ws2.json", "--format", "json", "--device-memory", "4MiB",
                "--device-overhead", "0"});
}

// The device that just holds backward-only's peak reserved plus the estimated CUDA context and
// NCCL buffers (tests/cli/check_command_test.cc): each policy's `device` block with the estimate.
TEST(Golden, CompareTinyTraceOnADeviceWithItsOverhead) {
  ExpectGolden("compare-tiny-ws2-device-overhead.json",
               {"compare", "traces/tiny-ws2.json", "--format", "json", "--policy", "backward-only",
                "--policy", "always-allocated", "--device-memory", "1159725056"});
}

TEST(Golden, CompareGeneralPolicyFormWithCapOverride) {
  ExpectGolden(
      "compare-tiny-ws2-general.json",
      {"compare", "traces/tiny-ws2.json", "--format", "json", "--policy",
       "lifetime=always,key=members", "--policy", "backward-only", "--bucket-cap-mb", "0.125"});
}

// The time model: the H100 profile prices every collective and copy, so timing and the
// collectives' start/duration/busbw are predictions (tests/backend/sim_backend_test.cc checks the
// model by hand).
TEST(Golden, CompareTinyTraceWithTheH100Profile) {
  ExpectGolden("compare-tiny-ws2-h100.json",
               {"compare", "traces/tiny-ws2.json", "--format", "json", "--profile",
                "traces/profiles/h100-8gpu-nvlink.json"});
}

TEST(Golden, SweepDefaultTraceCapsAndPoliciesWithABudget) {
  ExpectGolden(
      "sweep-gpt-24l-h1024-ws8-h100.json",
      {"sweep", "traces/gpt-24l-h1024-ws8.json", "--bucket-cap-mb", "1,5,25,100", "--policy",
       "backward-only", "--policy", "always-allocated", "--policy", "unbucketed", "--profile",
       "traces/profiles/h100-8gpu-nvlink.json", "--budget", "3GiB", "--format", "json"});
}

// Two traces of different world sizes (2 and 4), each swept with the same flags: a report per
// trace in one file. Across them at 190 MiB: on the ws4 trace only the configurations that bucket
// nothing fit (174 MiB reserved; cap 4 MiB reserves 198 MiB), on the tiny trace everything.
const std::vector<std::string> kTwoTraceSweep = {"sweep",
                                                 "traces/tiny-ws2.json",
                                                 "traces/gpt-4l-h256-ws4.json",
                                                 "--bucket-cap-mb",
                                                 "0.25,4,16",
                                                 "--policy",
                                                 "backward-only",
                                                 "--policy",
                                                 "always-allocated",
                                                 "--policy",
                                                 "unbucketed",
                                                 "--profile",
                                                 "traces/profiles/h100-8gpu-nvlink.json",
                                                 "--budget",
                                                 "190MiB"};

TEST(Golden, SweepTwoTracesCapsAndPoliciesWithABudget) {
  std::vector<std::string> args = kTwoTraceSweep;
  args.insert(args.end(), {"--format", "json"});
  ExpectGolden("sweeps-tiny-ws2-gpt-4l-h256-ws4-h100.json", args);
}

// The console: a section per trace, each as the trace alone prints it (tests/cli/
// sweep_traces_test.cc checks that), then what fits the budget on every trace.
TEST(Golden, SweepTwoTracesConsole) {
  testing::BinaryResult run = RunBucketsim(kTwoTraceSweep);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::string golden_path =
      std::string(BUCKETSIM_SOURCE_DIR) + "/tests/golden/sweeps-tiny-ws2-gpt-4l-h256-ws4-h100.txt";
  if (const char* update = std::getenv("BUCKETSIM_UPDATE_GOLDENS"); update && *update == '1') {
    std::ofstream(golden_path, std::ios::binary) << run.out;
    GTEST_SKIP() << "rewrote " << golden_path;
  }
  std::string expected = testing::ReadFile(golden_path);
  ASSERT_FALSE(expected.empty()) << "missing golden file " << golden_path;
  EXPECT_EQ(run.out, expected);
}

TEST(Compare, WritesTheJsonReportItPrints) {
  std::string path = testing::WriteTempFile("report.json", "");
  testing::BinaryResult run =
      RunBucketsim({"compare", "traces/tiny-ws2.json", "--json", path, "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(ordered_json::parse(testing::ReadFile(path)), ordered_json::parse(run.out));
}

TEST(Compare, TablePrintsOneRowPerPolicyWithUnits) {
  testing::BinaryResult run = RunBucketsim({"compare", "traces/tiny-ws2.json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("peak alloc (MiB)"), std::string::npos);
  for (const char* policy :
       {"always-allocated", "backward-only", "per-group-dedup", "unbucketed"}) {
    EXPECT_NE(run.out.find(policy), std::string::npos) << policy;
  }
  // backward-only's peak: 3261440 B = 3.11 MiB (tests/engine/tiny_trace_test.cc).
  EXPECT_NE(run.out.find("3.11"), std::string::npos);
}

TEST(Compare, MarkdownHasTheTableAndThePeakComposition) {
  testing::BinaryResult run =
      RunBucketsim({"compare", "traces/tiny-ws2.json", "--format", "markdown"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("| policy | cap (MiB) | peak alloc (MiB) |"), std::string::npos);
  EXPECT_NE(run.out.find("## backward-only (`lifetime=backward,key=identity,cap=0.25`)"),
            std::string::npos);
  EXPECT_NE(run.out.find("| bucket_data | 0.50 |"), std::string::npos);
}

TEST(Help, EveryCommandShowsAnExample) {
  for (const char* command : {"compare", "check", "report", "validate", "version", "sweep"}) {
    testing::BinaryResult run = RunBucketsim({command, "--help"});
    EXPECT_EQ(run.exit_code, 0) << command;
    EXPECT_NE(run.out.find("Example"), std::string::npos) << command;
  }
  testing::BinaryResult gen = RunBucketsim({"gen", "transformer", "--help"});
  EXPECT_NE(gen.out.find("Example"), std::string::npos);
}

}  // namespace
}  // namespace bucketsim
