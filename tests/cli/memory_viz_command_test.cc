// `compare --memory-viz DIR` through the real binary: what it says it wrote, and its errors, each
// a clear message, exit code 2 and no file left behind. The snapshots' contents are checked by
// tests/tools/memory_viz_test.py (read back by Python, the importer and torch's _memory_viz).
#include <filesystem>

#include <gtest/gtest.h>

#include "testing/run_binary.h"

namespace bucketsim {
namespace {

using testing::RunBucketsim;
using testing::WriteTempFile;

const char* kTrace = BUCKETSIM_SOURCE_DIR "/traces/tiny-ws2.json";

std::filesystem::path FreshDir(const std::string& name) {
  std::filesystem::path dir =
      std::filesystem::path(WriteTempFile(name + ".marker", "")).parent_path() / name;
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(MemoryViz, WritesOneFilePerPolicyAndSaysWhere) {
  const std::filesystem::path dir = FreshDir("viz_written");
  auto result = RunBucketsim({"compare", kTrace, "--policy", "backward-only", "--policy",
                              "lifetime=always,key=members,cap=50", "--memory-viz", dir.string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const char* stem : {"backward-only", "lifetime_always_key_members_cap_50"}) {
    const std::filesystem::path file = dir / (std::string(stem) + ".pickle");
    EXPECT_TRUE(std::filesystem::is_regular_file(file)) << file;
    EXPECT_NE(result.out.find(file.string() + " ("), std::string::npos) << result.out;
  }
  EXPECT_NE(result.out.find("memory snapshot (backward-only): "), std::string::npos);
  EXPECT_NE(result.out.find("torch.cuda._memory_viz trace_plot"), std::string::npos);
  // Only the two snapshots: no temporary file left.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir),
                          std::filesystem::directory_iterator()),
            2);
}

TEST(MemoryViz, SaysItOnStderrWhenStdoutIsTheReport) {
  const std::filesystem::path dir = FreshDir("viz_json");
  auto result = RunBucketsim({"compare", kTrace, "--policy", "backward-only", "--format", "json",
                              "--memory-viz", dir.string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out.find("memory snapshot"), std::string::npos);
  EXPECT_NE(result.err.find("memory snapshot (backward-only): "), std::string::npos) << result.err;
}

TEST(MemoryViz, DirectoryThatCannotBeMadeFailsBeforeTheReplay) {
  const std::string file = WriteTempFile("viz_is_a_file", "not a directory\n");
  for (const std::string& dir : {file, file + "/sub"}) {
    auto result = RunBucketsim({"compare", kTrace, "--memory-viz", dir});
    EXPECT_EQ(result.exit_code, 2) << dir;
    EXPECT_EQ(result.err, "bucketsim: error: --memory-viz: cannot create the directory '" + dir +
                              "': Not a directory\n");
    EXPECT_EQ(result.out, "");  // nothing replayed, no table
  }
}

TEST(MemoryViz, DirectoryThatCannotBeWrittenFailsBeforeTheReplay) {
  // /proc exists and is a directory, but no file can be made in it (even by root).
  auto result =
      RunBucketsim({"compare", kTrace, "--policy", "backward-only", "--memory-viz", "/proc"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err.rfind("bucketsim: error: --memory-viz: cannot write "
                             "'/proc/backward-only.pickle': ",
                             0),
            0u)
      << result.err;
  EXPECT_EQ(result.out, "");
}

TEST(MemoryViz, NeedsTheCachingAllocatorModel) {
  const std::filesystem::path dir = FreshDir("viz_exact");
  auto result =
      RunBucketsim({"compare", kTrace, "--allocator", "exact", "--memory-viz", dir.string()});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--memory-viz writes what the caching allocator model did"),
            std::string::npos)
      << result.err;
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace bucketsim
