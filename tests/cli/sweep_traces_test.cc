// `sweep TRACE...` through the real binary: several traces swept with the same flags give, per
// trace, exactly what `sweep TRACE` gives for it alone (its console section, its report), in the
// order given; a bad or missing later trace is named with exit code 2 and leaves no file.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/run_binary.h"

namespace bucketsim {
namespace {

using nlohmann::ordered_json;
using testing::BinaryResult;
using testing::RunBucketsim;

const std::vector<std::string> kTraces = {"traces/tiny-ws2.json", "traces/gpt-4l-h256-ws4.json"};

// The sweep of `traces` with the same flags for every test here: two policies at two caps and
// unbucketed, the H100 profile, a budget of 190 MiB (tests/cli/golden_test.cc has the tables).
std::vector<std::string> Sweep(const std::vector<std::string>& traces,
                               std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"sweep"};
  args.insert(args.end(), traces.begin(), traces.end());
  for (const char* arg :
       {"--bucket-cap-mb", "0.25,4", "--policy", "backward-only", "--policy", "unbucketed",
        "--profile", "traces/profiles/h100-8gpu-nvlink.json", "--budget", "190MiB"}) {
    args.push_back(arg);
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(SweepTraces, EachSectionIsWhatTheTraceAlonePrints) {
  BinaryResult both = RunBucketsim(Sweep(kTraces));
  ASSERT_EQ(both.exit_code, 0) << both.err;
  std::string expected;
  for (std::size_t i = 0; i < kTraces.size(); ++i) {
    BinaryResult alone = RunBucketsim(Sweep({kTraces[i]}));
    ASSERT_EQ(alone.exit_code, 0) << alone.err;
    expected +=
        (i == 0 ? "== trace 1 of 2: " : "\n== trace 2 of 2: ") + kTraces[i] + " ==\n\n" + alone.out;
  }
  // On the ws4 trace only the caps that bucket nothing and unbucketed fit 190 MiB (174 MiB
  // reserved, cap 4 MiB 198 MiB); on the tiny trace everything fits and cap 4 MiB is fastest.
  expected +=
      "\nAcross the 2 traces, budget 190.00 MiB: 2 configurations fit on every trace "
      "(backward-only at cap 0.25 MiB and unbucketed); the fastest that fits is not the same on "
      "every trace: backward-only at cap 4 MiB for traces/tiny-ws2.json and unbucketed for "
      "traces/gpt-4l-h256-ws4.json.\n";
  EXPECT_EQ(both.out, expected);
}

TEST(SweepTraces, EachReportIsWhatTheTraceAloneWrites) {
  BinaryResult both = RunBucketsim(Sweep(kTraces, {"--format", "json"}));
  ASSERT_EQ(both.exit_code, 0) << both.err;
  ordered_json file = ordered_json::parse(both.out);
  ASSERT_EQ(file.size(), 2u);
  EXPECT_EQ(file["schema_version"], 1);
  ASSERT_EQ(file["sweeps"].size(), 2u);
  for (std::size_t i = 0; i < kTraces.size(); ++i) {
    SCOPED_TRACE(kTraces[i]);
    BinaryResult alone = RunBucketsim(Sweep({kTraces[i]}, {"--format", "json"}));
    ASSERT_EQ(alone.exit_code, 0) << alone.err;
    ordered_json report = file["sweeps"][i];
    ordered_json single = ordered_json::parse(alone.out);
    // argv is the command's own: both traces there, one here.
    EXPECT_EQ(report["context"]["argv"][2], kTraces[0]);
    EXPECT_EQ(report["context"]["argv"][3], kTraces[1]);
    report["context"].erase("argv");
    single["context"].erase("argv");
    EXPECT_EQ(report.dump(2), single.dump(2));
  }
  // The same with --json FILE: the file is what stdout showed.
  const std::string path = testing::WriteTempFile("sweeps.json", "");
  BinaryResult written = RunBucketsim(Sweep(kTraces, {"--json", path}));
  ASSERT_EQ(written.exit_code, 0) << written.err;
  ordered_json from_file = ordered_json::parse(testing::ReadFile(path));
  for (ordered_json& each : from_file["sweeps"]) each["context"].erase("argv");
  for (ordered_json& each : file["sweeps"]) each["context"].erase("argv");
  EXPECT_EQ(from_file, file);
  EXPECT_NE(written.out.find("\nreport: " + path + "\n"), std::string::npos) << written.out;
}

// `--bucket-cap-mb auto` searches each trace from its own thresholds: the tiny trace from
// 0.157 MiB (its least bucketing cap, 0.15625, rounded up), the convnet from 0.000123 MiB; each
// report is the one the trace's own search writes.
TEST(SweepTraces, ACapSearchRunsPerTraceFromItsOwnThresholds) {
  const std::vector<std::string> traces = {"traces/tiny-ws2.json", "traces/convnet-ws2.json"};
  auto sweep = [](std::vector<std::string> args) {
    args.insert(args.begin(), "sweep");
    args.insert(args.end(),
                {"--bucket-cap-mb", "auto", "--policy", "backward-only", "--format", "json"});
    BinaryResult run = RunBucketsim(args);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return ordered_json::parse(run.out);
  };
  ordered_json both = sweep(traces);
  ASSERT_EQ(both["sweeps"].size(), 2u);
  EXPECT_EQ(both["sweeps"][0]["sweep"]["search"]["from_mb"], 0.157);
  EXPECT_EQ(both["sweeps"][1]["sweep"]["search"]["from_mb"], 0.000123);
  for (std::size_t i = 0; i < traces.size(); ++i) {
    ordered_json alone = sweep({traces[i]});
    ordered_json report = both["sweeps"][i];
    report["context"].erase("argv");
    alone["context"].erase("argv");
    EXPECT_EQ(report.dump(2), alone.dump(2)) << traces[i];
  }
}

// traces/tiny-ws2.json with its event 11 (a free) made to free an id that was never allocated.
std::string BrokenTrace() {
  ordered_json trace = ordered_json::parse(
      testing::ReadFile(std::string(BUCKETSIM_SOURCE_DIR) + "/traces/tiny-ws2.json"));
  EXPECT_EQ(trace["events"][11]["ev"], "free");
  trace["events"][11]["id"] = 999;
  return testing::WriteTempFile("broken.json", trace.dump());
}

TEST(SweepTraces, ABadSecondTraceIsNamedAndNoFileIsWritten) {
  const std::string broken = BrokenTrace();
  const std::string json = testing::WriteTempFile("bad-second.json", "");
  const std::string html = json + ".html";
  std::filesystem::remove(json);
  BinaryResult run = RunBucketsim(Sweep({kTraces[0], broken}, {"--json", json, "--html", html}));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "bucketsim: error: " + broken + ": event 11: free of unknown allocation id 999\n");
  EXPECT_EQ(run.out, "");  // nothing of the first trace either: every sweep ends before output
  EXPECT_FALSE(std::filesystem::exists(json));
  EXPECT_FALSE(std::filesystem::exists(html));
}

TEST(SweepTraces, AMissingTraceIsNamedBeforeAnyReplay) {
  const std::string json = testing::WriteTempFile("missing-second.json", "");
  std::filesystem::remove(json);
  for (const char* allocator : {"caching", "exact"}) {
    BinaryResult run = RunBucketsim(
        Sweep({kTraces[0], "/nonexistent/trace.json"}, {"--json", json, "--allocator", allocator}));
    EXPECT_EQ(run.exit_code, 2) << allocator;
    EXPECT_EQ(run.err,
              "bucketsim: error: cannot open '/nonexistent/trace.json': No such file or "
              "directory\n")
        << allocator;
    EXPECT_FALSE(std::filesystem::exists(json)) << allocator;
  }
}

TEST(SweepTraces, TheSameTraceTwiceIsRefused) {
  // By the same path or another one to the same file.
  BinaryResult run = RunBucketsim(Sweep({kTraces[0], kTraces[1], "./traces/tiny-ws2.json"}));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "bucketsim: error: trace 3 ('./traces/tiny-ws2.json') is trace 1 "
            "('traces/tiny-ws2.json') again: give each trace once\n");
  EXPECT_EQ(RunBucketsim(Sweep({kTraces[1], kTraces[1]})).exit_code, 2);
}

TEST(SweepTraces, FlagsBeforeTheTracesTakeOneValueEach) {
  // A list flag's value is one word (comma-separated): the words after it are traces.
  BinaryResult run = RunBucketsim(
      {"sweep", "--policy", "backward-only", "--bucket-cap-mb", "0.25,4", kTraces[0], kTraces[1]});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("== trace 2 of 2: traces/gpt-4l-h256-ws4.json ==\n\n"
                         "gpt-4l-h256-ws4.json: 2 configurations"),
            std::string::npos)
      << run.out;
}

TEST(SweepTraces, HelpShowsSeveralTraces) {
  BinaryResult run = RunBucketsim({"sweep", "--help"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.out.find("[OPTIONS] traces..."), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Several traces: each is swept with the same flags"), std::string::npos);
  EXPECT_NE(run.out.find("bucketsim sweep traces/tiny-ws2.json traces/gpt-4l-h256-ws4.json"),
            std::string::npos);
}

TEST(SweepTraces, TheHtmlPageHasASectionPerTrace) {
  const std::string html = testing::WriteTempFile("sweeps.html", "");
  BinaryResult run = RunBucketsim(Sweep(kTraces, {"--html", html}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string page = testing::ReadFile(html);
  const std::size_t first = page.find("<h2>1. tiny-ws2.json (caching memory model)</h2>");
  const std::size_t second = page.find("<h2>2. gpt-4l-h256-ws4.json (caching memory model)</h2>");
  ASSERT_NE(first, std::string::npos);
  ASSERT_NE(second, std::string::npos);
  EXPECT_LT(first, second);
  // Each section has its sweep table and advice.
  EXPECT_NE(page.find("<h3>Sweep</h3>", first), std::string::npos);
  EXPECT_NE(page.find("<h3>Sweep</h3>", second), std::string::npos);
  EXPECT_NE(page.find("Setting for unbucketed", second), std::string::npos);
}

}  // namespace
}  // namespace bucketsim
