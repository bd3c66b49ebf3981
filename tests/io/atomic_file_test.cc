#include "io/atomic_file.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace bucketsim {
namespace {

namespace fs = std::filesystem;

// A fresh, empty directory per test.
fs::path EmptyDir(const std::string& name) {
  fs::path dir =
      fs::temp_directory_path() / ("bucketsim-atomic-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string Contents(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(AtomicFile, AppearsAtItsPathOnlyWhenCommitted) {
  fs::path dir = EmptyDir("commit");
  fs::path target = dir / "report.json";
  Result<std::unique_ptr<AtomicFile>> file = AtomicFile::Create(target.string());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  (*file)->stream() << "{\"a\": 1}\n";
  EXPECT_FALSE(fs::exists(target));
  // While it is written, the only thing beside the target is one hidden temporary file.
  std::vector<std::string> open = Entries(dir);
  ASSERT_EQ(open.size(), 1u);
  EXPECT_TRUE(open[0].starts_with(".report.json.") && open[0].ends_with(".tmp")) << open[0];
  ASSERT_TRUE((*file)->Commit().ok());
  EXPECT_EQ(Contents(target), "{\"a\": 1}\n");
  EXPECT_EQ(Entries(dir), std::vector<std::string>{"report.json"});
}

TEST(AtomicFile, AbandonedKeepsThePreviousFileAndLeavesNoTemporary) {
  fs::path dir = EmptyDir("abandon");
  fs::path target = dir / "trace.json";
  std::ofstream(target) << "previous";
  {
    Result<std::unique_ptr<AtomicFile>> file = AtomicFile::Create(target.string());
    ASSERT_TRUE(file.ok());
    (*file)->stream() << "half a tr";
  }  // destroyed without Commit, as when a writer fails midway
  EXPECT_EQ(Contents(target), "previous");
  EXPECT_EQ(Entries(dir), std::vector<std::string>{"trace.json"});
}

TEST(AtomicFile, ReplacesThePreviousFileWhole) {
  fs::path dir = EmptyDir("replace");
  fs::path target = dir / "out.html";
  std::ofstream(target) << "a much longer previous version of the page";
  ASSERT_TRUE(WriteFileAtomically(target.string(), "new").ok());
  EXPECT_EQ(Contents(target), "new");
}

TEST(AtomicFile, CreatesMissingParentDirectories) {
  fs::path dir = EmptyDir("parents");
  fs::path target = dir / "a" / "b" / "chart.svg";
  ASSERT_TRUE(WriteFileAtomically(target.string(), "<svg/>").ok());
  EXPECT_EQ(Contents(target), "<svg/>");
}

TEST(AtomicFile, AnUnwritablePlaceIsAnIoErrorNamingTheTarget) {
  fs::path dir = EmptyDir("unwritable");
  std::ofstream(dir / "file") << "x";
  std::string target = (dir / "file" / "report.json").string();  // under a regular file
  Status status = WriteFileAtomically(target, "{}");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kIoError);
  EXPECT_NE(status.message().find(target), std::string::npos) << status.message();
}

}  // namespace
}  // namespace bucketsim
