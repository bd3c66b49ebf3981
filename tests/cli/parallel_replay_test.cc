// Replaying on several threads (--jobs) gives the report a serial run gives, byte for byte: each
// replay sees the same events in the same order whichever thread runs it.
#include <string>

#include <gtest/gtest.h>

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
  const std::string quoted = "\"" + flag + "\"";
  const std::size_t at = text.find(quoted);
  EXPECT_NE(at, std::string::npos);
  if (at != std::string::npos) text.replace(at, quoted.size(), "\"-jJOBS\"");
  // The trace path in argv and context differs by nothing here; the json path does.
  const std::size_t json_at = text.find(path);
  if (json_at != std::string::npos) text.replace(json_at, path.size(), "REPORT");
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

// mpirun -np 2: the configurations spread over two ranks, and rank 0 writes the report one
// process writes, byte for byte (the arguments, hence argv, are the same).
TEST(SweepOverRanks, TwoRanksWriteTheSingleProcessReport) {
  const std::string single = testing::WriteTempFile("sweep-single.json", "");
  const std::string ranks = testing::WriteTempFile("sweep-ranks.json", "");
  auto args = [](const std::string& path) {
    return std::vector<std::string>{"sweep",
                                    "traces/gpt-24l-h1024-ws8.json",
                                    "--bucket-cap-mb",
                                    "1,25",
                                    "--policy",
                                    "backward-only",
                                    "--policy",
                                    "unbucketed",
                                    "--policy",
                                    "always-allocated",
                                    "--budget",
                                    "3GiB",
                                    "--profile",
                                    "traces/profiles/h100-8gpu-nvlink.json",
                                    "-j1",
                                    "--json",
                                    path};
  };
  testing::BinaryResult one = testing::RunBucketsim(args(single));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  testing::BinaryResult two = testing::RunBucketsimUnderMpi(2, args(ranks));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  std::string single_text = testing::ReadFile(single);
  std::string ranks_text = testing::ReadFile(ranks);
  ASSERT_FALSE(single_text.empty());
  // The report names its own path in argv; the two differ only there.
  single_text.replace(single_text.find(single), single.size(), "REPORT");
  ranks_text.replace(ranks_text.find(ranks), ranks.size(), "REPORT");
  EXPECT_EQ(ranks_text, single_text);
  // The table too, but for the report's path it names.
  EXPECT_EQ(two.out.substr(0, two.out.find("report: ")),
            one.out.substr(0, one.out.find("report: ")));
}

}  // namespace
}  // namespace bucketsim
