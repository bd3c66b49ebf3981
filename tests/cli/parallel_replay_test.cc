// Replaying on several threads (--jobs) gives the report a serial run gives, byte for byte: each
// replay sees the same events in the same order whichever thread runs it.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/run_binary.h"

namespace bucketsim {
namespace {

using testing::RunBucketsim;

// The report `args` write with -jN; the argv entry "-jN" is the one difference allowed, so it
// is written as "-jJOBS" before comparing.
std::string ReportWithJobs(std::vector<std::string> args, int jobs, const std::string& name) {
  const std::string path = testing::WriteTempFile(name + "-j" + std::to_string(jobs) + ".json", "");
  const std::string flag = "-j" + std::to_string(jobs);
  args.push_back(flag);
  args.push_back("--json");
  args.push_back(path);
  testing::BinaryResult run = RunBucketsim(args);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  std::string text = testing::ReadFile(path);
  // Every argv (a sweep of several traces has one per trace).
  auto replace_all = [&text](const std::string& from, const std::string& to) {
    std::size_t count = 0;
    for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
      text.replace(at, from.size(), to);
      ++count;
    }
    return count;
  };
  EXPECT_NE(replace_all("\"" + flag + "\"", "\"-jJOBS\""), 0u);
  // The trace path in argv and context differs by nothing here; the json path does.
  replace_all(path, "REPORT");
  return text;
}

TEST(ParallelReplay, CompareReportIsByteIdenticalToSerial) {
  const std::vector<std::string> args = {"compare", "traces/gpt-24l-h1024-ws8.json"};
  const std::string serial = ReportWithJobs(args, 1, "compare");
  ASSERT_FALSE(serial.empty());
  EXPECT_EQ(ReportWithJobs(args, 2, "compare"), serial);
  EXPECT_EQ(ReportWithJobs(args, 4, "compare"), serial);  // more jobs than cores: one per policy
}

TEST(ParallelReplay, FullLogReportIsByteIdenticalToSerial) {
  const std::vector<std::string> args = {"compare", "traces/tiny-ws2.json", "--full-log",
                                         "--profile", "traces/profiles/h100-8gpu-nvlink.json"};
  const std::string serial = ReportWithJobs(args, 1, "full");
  ASSERT_NE(serial.find("\"collectives\": ["), std::string::npos);
  EXPECT_EQ(ReportWithJobs(args, 3, "full"), serial);
}

TEST(ParallelReplay, SweepReportIsByteIdenticalToSerial) {
  const std::vector<std::string> args = {
      "sweep",           "traces/gpt-24l-h1024-ws8.json",
      "--bucket-cap-mb", "1,5,25,100",
      "--policy",        "backward-only",
      "--policy",        "always-allocated",
      "--policy",        "unbucketed",
      "--profile",       "traces/profiles/h100-8gpu-nvlink.json"};
  const std::string serial = ReportWithJobs(args, 1, "sweep");
  ASSERT_FALSE(serial.empty());
  EXPECT_EQ(ReportWithJobs(args, 2, "sweep"), serial);
}

TEST(ParallelReplay, SweepOfSeveralTracesIsByteIdenticalToSerial) {
  const std::vector<std::string> args = {"sweep",
                                         "traces/tiny-ws2.json",
                                         "traces/gpt-4l-h256-ws4.json",
                                         "--bucket-cap-mb",
                                         "0.25,4",
                                         "--policy",
                                         "backward-only",
                                         "--policy",
                                         "always-allocated",
                                         "--profile",
                                         "traces/profiles/h100-8gpu-nvlink.json"};
  const std::string serial = ReportWithJobs(args, 1, "sweeps");
  ASSERT_NE(serial.find("\"sweeps\": ["), std::string::npos);
  EXPECT_EQ(ReportWithJobs(args, 2, "sweeps"), serial);
}

TEST(ParallelReplay, ErrorIsTheOneASerialRunStopsAt) {
  // A trace broken half way: the reader's error is reported whatever the number of threads.
  const std::string trace =
      testing::ReadFile(std::string(BUCKETSIM_SOURCE_DIR) + "/traces/tiny-ws2.json");
  const std::size_t cut = trace.size() / 2;
  const std::string path = testing::WriteTempFile("truncated.json", trace.substr(0, cut));
  testing::BinaryResult serial = RunBucketsim({"compare", path, "-j1"});
  testing::BinaryResult parallel = RunBucketsim({"compare", path, "-j3"});
  EXPECT_EQ(serial.exit_code, 2);
  EXPECT_EQ(parallel.exit_code, serial.exit_code);
  EXPECT_EQ(parallel.err, serial.err);
}

}  // namespace
}  // namespace bucketsim

namespace bucketsim {
namespace {

// `sweep TRACES... FLAGS... -j1` under `mpirun -np ranks`: its report and its table are the single
// process's, byte for byte (the arguments, hence argv, are the same) but for the report's own
// path.
void ExpectSweepOverRanks(int ranks, const std::vector<std::string>& traces,
                          const std::vector<std::string>& flags) {
  const std::string single = testing::WriteTempFile("sweep-single.json", "");
  const std::string spread =
      testing::WriteTempFile("sweep-np" + std::to_string(ranks) + ".json", "");
  auto args = [&](const std::string& path) {
    std::vector<std::string> all = {"sweep"};
    all.insert(all.end(), traces.begin(), traces.end());
    all.insert(all.end(), flags.begin(), flags.end());
    all.insert(all.end(), {"-j1", "--json", path});
    return all;
  };
  testing::BinaryResult one = testing::RunBucketsim(args(single));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  testing::BinaryResult many = testing::RunBucketsimUnderMpi(ranks, args(spread));
  ASSERT_EQ(many.exit_code, 0) << many.err;
  std::string single_text = testing::ReadFile(single);
  std::string spread_text = testing::ReadFile(spread);
  ASSERT_FALSE(single_text.empty());
  EXPECT_EQ(single_text.find("\"sweeps\": [") != std::string::npos, traces.size() > 1);
  // The report names its own path in argv (each trace's report, with several).
  for (auto [text, path] : {std::pair(&single_text, single), std::pair(&spread_text, spread)}) {
    for (std::size_t at = text->find(path); at != std::string::npos; at = text->find(path)) {
      text->replace(at, path.size(), "REPORT");
    }
  }
  EXPECT_EQ(spread_text, single_text);
  // The table too, but for the report's path it names.
  EXPECT_EQ(many.out.substr(0, many.out.find("report: ")),
            one.out.substr(0, one.out.find("report: ")));
}

// mpirun -np 2: the configurations of one trace spread over two ranks.
TEST(SweepOverRanks, TwoRanksWriteTheSingleProcessReport) {
  if (auto why = testing::WithoutMpi(); !why.empty()) GTEST_SKIP() << why;
  ExpectSweepOverRanks(2, {"traces/gpt-24l-h1024-ws8.json"},
                       {"--bucket-cap-mb", "1,25", "--policy", "backward-only", "--policy",
                        "unbucketed", "--policy", "always-allocated", "--budget", "3GiB",
                        "--profile", "traces/profiles/h100-8gpu-nvlink.json"});
}

const std::vector<std::string> kTwoTraces = {"traces/tiny-ws2.json", "traces/gpt-4l-h256-ws4.json"};

const std::vector<std::string> kFiveConfigurations = {
    "--bucket-cap-mb", "1,25",       "--policy",
    "backward-only",   "--policy",   "always-allocated",
    "--policy",        "unbucketed", "--budget",
    "190MiB",          "--profile",  "traces/profiles/h100-8gpu-nvlink.json"};

// 2 traces x 5 configurations (backward-only and always-allocated at 1 and 25 MiB, unbucketed):
// pairs 0..4 are trace 1's, 5..9 trace 2's, in runs of 5: rank 0 sweeps trace 1 alone, rank 1
// trace 2, which rank 0 never reads (rank 1 sends what the report says of it).
TEST(SweepOverRanks, TwoRanksWriteTheSingleProcessReportOfTwoTraces) {
  if (auto why = testing::WithoutMpi(); !why.empty()) GTEST_SKIP() << why;
  ExpectSweepOverRanks(2, kTwoTraces, kFiveConfigurations);
}

// The same on 3 ranks, in runs of 4 pairs: rank 0 has configurations 0..3 of trace 1, rank 1
// configuration 4 of trace 1 and 0..2 of trace 2 (it reads both traces, and tells trace 2), rank
// 2 configurations 3 and 4 of trace 2.
TEST(SweepOverRanks, ThreeRanksSplitATracesConfigurations) {
  if (auto why = testing::WithoutMpi(); !why.empty()) GTEST_SKIP() << why;
  ExpectSweepOverRanks(3, kTwoTraces, kFiveConfigurations);
}

// 2 traces x 1 configuration on 3 ranks: rank 0 replays trace 1, rank 1 trace 2, rank 2 nothing.
TEST(SweepOverRanks, MoreRanksThanPairs) {
  if (auto why = testing::WithoutMpi(); !why.empty()) GTEST_SKIP() << why;
  ExpectSweepOverRanks(3, kTwoTraces, {"--bucket-cap-mb", "1", "--policy", "unbucketed"});
}

// An error on one rank is every rank's: exit 2, the trace and event named, no report. With 7
// configurations per trace (the four default policies at two caps, unbucketed once) in runs of
// 7, rank 1 alone reads the broken trace.
TEST(SweepOverRanks, ABadSecondTraceFailsEveryRank) {
  if (auto why = testing::WithoutMpi(); !why.empty()) GTEST_SKIP() << why;
  nlohmann::ordered_json trace = nlohmann::ordered_json::parse(
      testing::ReadFile(std::string(BUCKETSIM_SOURCE_DIR) + "/traces/tiny-ws2.json"));
  trace["events"][11]["id"] = 999;  // a free of an id never allocated
  const std::string broken = testing::WriteTempFile("broken-for-ranks.json", trace.dump());
  const std::string json = broken + ".report.json";
  testing::BinaryResult run = testing::RunBucketsimUnderMpi(
      2,
      {"sweep", "traces/gpt-4l-h256-ws4.json", broken, "--bucket-cap-mb", "1,25", "--json", json});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("bucketsim: error: rank 1: " + broken +
                         ": event 11: free of unknown allocation id 999\n"),
            std::string::npos)
      << run.err;
  EXPECT_FALSE(std::filesystem::exists(json));
}

}  // namespace
}  // namespace bucketsim
