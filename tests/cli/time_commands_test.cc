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

// The tiny trace's reduce requests (traces/tiny-ws2.json, fp32, world size 2), per backward:
// c (51,200 elements per rank) and a (20,480) on group 101, b (20,480) on group 102; two
// backwards, six requests. fairscale buckets n <= S = int((cap * 2^20 / 4) // 2).

// Cap 0.0625 MiB: S = 8,192, smaller than every request, so nothing is bucketed and the three
// policies have the same figures. always-allocated is listed first; unbucketed is chosen, the
// others are its ties from the simplest, and the setting is bucket_cap_mb=0. The least cap that
// buckets anything is a's and b's threshold, 20,480 * 2 * 4 B = 0.15625 MiB, written as the cap
// search writes caps, three significant digits rounded up: 0.157 MiB (issue 22).
TEST(Sweep, ACapThatBucketsNothingSaysSoAndTheTieGoesToTheSimplestPolicy) {
  const std::vector<std::string> args = {
      "sweep",    "traces/tiny-ws2.json", "--bucket-cap-mb", "0.0625",
      "--policy", "always-allocated",     "--policy",        "backward-only",
      "--policy", "unbucketed",           "--budget",        "1GiB"};
  testing::BinaryResult run = RunBucketsim(args);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const char* said :
       {"Cap 0.0625 MiB buckets nothing: all 6 reduce requests are larger than the shard size",
        "The least cap that buckets any request is 0.157 MiB.", "fastest that fits is unbucketed",
        "It ties with backward-only at cap 0.0625 MiB and always-allocated at cap 0.0625 MiB (the "
        "same step time and peak reserved) and is preferred as the simpler policy",
        "fairscale.nn.FullyShardedDataParallel(bucket_cap_mb=0)"}) {
    EXPECT_NE(run.out.find(said), std::string::npos) << said << "\n" << run.out;
  }
  std::vector<std::string> as_json = args;
  as_json.insert(as_json.end(), {"--format", "json"});
  testing::BinaryResult json_run = RunBucketsim(as_json);
  ASSERT_EQ(json_run.exit_code, 0) << json_run.err;
  json sweep = json::parse(json_run.out)["sweep"];
  EXPECT_EQ(sweep["points"][0]["bucketed_requests"], 0);
  EXPECT_EQ(sweep["points"][0]["bypassed_requests"], 6);
  EXPECT_EQ(sweep["knee"]["knee"], 2);
  EXPECT_EQ(sweep["knee"]["ties"], json::array({1, 0}));
  EXPECT_EQ(sweep["budget"]["best"], 2);
  EXPECT_EQ(sweep["budget"]["ties"], json::array({1, 0}));
  EXPECT_TRUE(sweep["budget"]["runner_up"].is_null());
  EXPECT_EQ(sweep["recommended"], 2);
  EXPECT_EQ(sweep["setting"]["setting"], "fairscale.nn.FullyShardedDataParallel(bucket_cap_mb=0)");
  EXPECT_EQ(sweep["smallest_bucketing_cap_mb"], 0.15625);
}

// Listed caps 0.0625 and 1 MiB; `auto` searches 0.157 (the threshold 0.15625 rounded up) to
// 0.704 (one bucket for a backward: 92,160 elements * 8 B = 0.703125 MiB; groups 101 and 102 have
// the same members) and finds the knee between the listed caps at 0.547 MiB:
//   S = int((0.547 * 2^20 / 4) // 2) = 71,696 >= c + a = 71,680, so c and a share group 101's
//   bucket and flush once per backward, as at cap 1 (S = 131,072): the same collectives, the same
//   step. At 0.546 (S = 71,565) c is flushed before a fits: more collectives, slower.
//   Exact model (requests rounded up to 512 B), per group's bucket: data 2 * 71,696 * 4 =
//   573,568 -> 573,952 B and output 286,784 -> 287,232 B, against 1,048,576 + 524,288 at cap 1:
//   711,680 B less, 1,423,360 B for the two groups: 5,415,936 - 1,423,360 = 3,992,576 B.
TEST(Sweep, AutoFindsTheKneeBetweenTheListedCaps) {
  testing::BinaryResult run = RunBucketsim(
      {"sweep", "traces/tiny-ws2.json", "--bucket-cap-mb", "0.0625,1,auto", "--policy",
       "backward-only", "--profile", kH100, "--allocator", "exact", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json sweep = json::parse(run.out)["sweep"];
  EXPECT_EQ(sweep["search"]["from_mb"], 0.157);
  EXPECT_EQ(sweep["search"]["to_mb"], 0.704);
  const json& points = sweep["points"];
  auto at_cap = [&points](double cap) {
    for (const json& p : points) {
      if (p["bucket_cap_mb"] == cap) return p;
    }
    ADD_FAILURE() << "no point at cap " << cap;
    return json();
  };
  const json& knee = points[sweep["knee"]["knee"].get<std::size_t>()];
  EXPECT_EQ(knee["bucket_cap_mb"], 0.547);
  EXPECT_EQ(knee["peak_reserved_bytes"], 3992576);
  EXPECT_EQ(at_cap(1)["peak_reserved_bytes"], 5415936);
  EXPECT_EQ(knee["step_time_us"], at_cap(1)["step_time_us"]);
  EXPECT_GT(at_cap(0.546)["step_time_us"].get<double>(), knee["step_time_us"].get<double>());
  EXPECT_EQ(sweep["setting"]["setting"],
            "fairscale.nn.FullyShardedDataParallel(bucket_cap_mb=0.547)");
  EXPECT_TRUE(sweep["setting"]["upstream"]);
  // Every searched point is in the report, one policies[] entry each.
  EXPECT_EQ(json::parse(run.out)["policies"].size(), points.size());
  EXPECT_EQ(points.size(), sweep["search"]["caps"].get<std::size_t>());
}

// Exact model, 3 MiB = 3,145,728 B: cap 0.0625 peaks at 2,720,768 B and fits; 0.25 (3.11 MiB)
// and 1 (5,415,936 B) do not.
TEST(Sweep, ABudgetThatOnlyOneConfigurationFits) {
  testing::BinaryResult run = RunBucketsim(
      {"sweep", "traces/tiny-ws2.json", "--bucket-cap-mb", "0.0625,0.25,1", "--policy",
       "backward-only", "--profile", kH100, "--allocator", "exact", "--budget", "3MiB"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("budget 3.00 MiB: fastest that fits is backward-only at cap 0.0625 MiB: "
                         "step 0.615 ms, peak reserved 2.59 MiB (0.41 MiB to spare); it is the "
                         "only configuration that fits."),
            std::string::npos)
      << run.out;
  // That cap buckets nothing: the setting says what it is in effect.
  EXPECT_NE(run.out.find("Cap 0.0625 MiB buckets none of the 6 requests, so this is the same as "
                         "bucket_cap_mb=0."),
            std::string::npos)
      << run.out;
}

TEST(Sweep, CapSearchInputErrors) {
  for (const char* caps : {"auto,2..3", "3..2", "0..2", "a..b", "1,x"}) {
    testing::BinaryResult run =
        RunBucketsim({"sweep", "traces/tiny-ws2.json", "--bucket-cap-mb", caps});
    EXPECT_EQ(run.exit_code, 2) << caps;
    EXPECT_NE(run.err.find("--bucket-cap-mb"), std::string::npos) << caps << ": " << run.err;
  }
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
  testing::BinaryResult run =
      RunBucketsim({"compare", "traces/tiny-ws2.json", "--policy", "unbucketed", "--profile", kH100,
                    "--format", "json", "--full-log"});
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
