// sweep, --profile and --chrome-trace through the real binary: what the user sees, the exit
// codes, and the errors for bad input.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/run_binary.h"

namespace bucketsim {
namespace {

using nlohmann::json;
using testing::RunBucketsim;

constexpr const char* kH100 = "traces/profiles/h100-8gpu-nvlink.json";

TEST(Sweep, TableMarksTheParetoSetAndAnswersTheBudget) {
  testing::BinaryResult run = RunBucketsim(
      {"sweep", "traces/tiny-ws2.json", "--bucket-cap-mb", "0.0625,0.25,1", "--policy",
       "backward-only", "--policy", "unbucketed", "--profile", kH100, "--budget", "8MiB"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("4 configurations, time profile h100-8gpu-nvlink-derived"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("step time (ms)"), std::string::npos);
  EXPECT_NE(run.out.find("* Pareto-optimal"), std::string::npos);
  // Cap 1 MiB reserves 8 MiB (2 MiB more than the others) and is the fastest: one flush of a
  // larger bucket instead of several.
  EXPECT_NE(run.out.find("budget 8.00 MiB: fastest that fits is backward-only at cap 1 MiB"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("uses 2.00 MiB more peak reserved memory"), std::string::npos) << run.out;
}

TEST(Sweep, JsonHasOnePointPerPolicyEntry) {
  testing::BinaryResult run =
      RunBucketsim({"sweep", "traces/tiny-ws2.json", "--bucket-cap-mb", "0.0625,0.25", "--policy",
                    "backward-only", "--policy", "always-allocated", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json report = json::parse(run.out);
  ASSERT_EQ(report["sweep"]["points"].size(), 4u);
  ASSERT_EQ(report["policies"].size(), 4u);
  EXPECT_EQ(report["policies"][1]["canonical"], "lifetime=backward,key=identity,cap=0.25");
  EXPECT_EQ(report["sweep"]["points"][1]["peak_reserved_bytes"],
            report["policies"][1]["peak_reserved_bytes"]);
  EXPECT_TRUE(report["sweep"]["budget"].is_null());
  EXPECT_EQ(report["context"]["time_profile"], "none");
}

TEST(Sweep, NothingFitsSaysBySoMuch) {
  testing::BinaryResult run =
      RunBucketsim({"sweep", "traces/tiny-ws2.json", "--bucket-cap-mb", "0.25", "--policy",
                    "backward-only", "--budget", "1KiB"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("nothing fits; the smallest is backward-only at cap 0.25 MiB"),
            std::string::npos)
      << run.out;
}

TEST(Sweep, BadInputIsExitCode2) {
  EXPECT_EQ(RunBucketsim({"sweep", "traces/tiny-ws2.json"}).exit_code, 2);  // caps required
  EXPECT_EQ(RunBucketsim({"sweep", "traces/tiny-ws2.json", "--bucket-cap-mb", "1,inf"}).exit_code,
            2);
  testing::BinaryResult budget =
      RunBucketsim({"sweep", "traces/tiny-ws2.json", "--bucket-cap-mb", "1", "--budget", "lots"});
  EXPECT_EQ(budget.exit_code, 2);
  EXPECT_NE(budget.err.find("--budget"), std::string::npos) << budget.err;
}

TEST(Profile, ABadProfileIsAnInputError) {
  std::string bad = testing::WriteTempFile(
      "bad-profile.json",
      R"({"schema_version": 1, "name": "x", "context": {"provenance": "measured"},
          "copy_GBps": 1, "collectives": {"reduce_scatter": []}})");
  testing::BinaryResult run = RunBucketsim({"compare", "traces/tiny-ws2.json", "--profile", bad});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("bad-profile.json: profile: reduce_scatter needs at least one group size"),
            std::string::npos)
      << run.err;
  testing::BinaryResult missing =
      RunBucketsim({"check", "traces/tiny-ws2.json", "--policy", "backward-only", "--profile",
                    "/nonexistent/p.json", "--max-peak-allocated", "1GiB"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("/nonexistent/p.json: cannot open the profile"), std::string::npos)
      << missing.err;
}

TEST(Profile, PricesCollectivesInTheReport) {
  testing::BinaryResult run = RunBucketsim({"compare", "traces/tiny-ws2.json", "--policy",
                                            "unbucketed", "--profile", kH100, "--format", "json",
                                            "--full-log"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json report = json::parse(run.out);
  EXPECT_EQ(report["context"]["time_profile"], "h100-8gpu-nvlink-derived");
  const json& first = report["policies"][0]["collectives"][0];
  // Group of 2 (clamped to the profile's 8-GPU figures): alpha + 1/2 * bytes / busbw.
  double expected = 87.73 + 0.5 * first["bytes"].get<double>() / (362.93 * 1e3);
  EXPECT_NEAR(first["dur_us"].get<double>(), expected, 1e-9);
  EXPECT_GT(report["policies"][0]["timing"]["copy_us"].get<double>(), 0);
}

TEST(ChromeTrace, CompareWritesTheChosenPolicysTimeline) {
  std::string path = testing::WriteTempFile("tiny.trace.json", "");
  testing::BinaryResult run =
      RunBucketsim({"compare", "traces/tiny-ws2.json", "--profile", kH100, "--chrome-trace", path,
                    "--chrome-trace-policy", "backward-only"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("chrome trace (backward-only): "), std::string::npos) << run.out;
  json trace = json::parse(testing::ReadFile(path));
  EXPECT_EQ(trace["traceEvents"][0]["args"]["name"],
            "bucketsim backward-only (lifetime=backward,key=identity,cap=0.25, sim)");
  std::size_t slices = 0;
  for (const json& e : trace["traceEvents"]) slices += e["ph"] == "X";
  EXPECT_GT(slices, 0u);
}

TEST(ChromeTrace, UnknownPolicyIsExitCode2) {
  testing::BinaryResult run = RunBucketsim({"compare", "traces/tiny-ws2.json", "--chrome-trace",
                                            "/tmp/x.json", "--chrome-trace-policy", "nope"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--chrome-trace-policy: 'nope' is not one of the policies "
                         "(always-allocated, backward-only, per-group-dedup, unbucketed)"),
            std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace bucketsim
