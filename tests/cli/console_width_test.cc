// Console output fits the terminal: tables split into blocks of columns, paragraphs wrapped, at
// $COLUMNS (the terminal's width where stdout is one); --wide and output to a file or a pipe
// keep whole lines.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "testing/run_binary.h"

namespace bucketsim {
namespace {

using testing::BinaryResult;
using testing::RunBucketsim;
using testing::RunBucketsimInColumns;

std::size_t LongestLine(const std::string& text) {
  std::size_t longest = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) longest = std::max(longest, line.size());
  return longest;
}

std::size_t Count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ConsoleWidth, CompareFitsEightyColumnsAndKeepsEveryColumn) {
  const std::vector<std::string> args = {"compare", "traces/gpt-24l-h1024-ws8.json"};
  BinaryResult whole = RunBucketsim(args);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_GT(LongestLine(whole.out), 200u);  // one line per policy, every column on it
  EXPECT_EQ(Count(whole.out, "policy  "), 1u);

  BinaryResult narrow = RunBucketsimInColumns(80, args);
  ASSERT_EQ(narrow.exit_code, 0) << narrow.err;
  EXPECT_LE(LongestLine(narrow.out), 80u) << narrow.out;
  EXPECT_GT(Count(narrow.out, "policy  "), 1u);  // blocks, each naming the policies
  for (const char* header :
       {"peak alloc (MiB)", "peak reserved (MiB)", "after fwd (MiB)", "buckets", "exposed (ms)"}) {
    EXPECT_NE(narrow.out.find(header), std::string::npos) << header;
  }
  EXPECT_EQ(Count(narrow.out, "per-group-dedup "), Count(narrow.out, "policy  "));

  // --wide: the whole table again, whatever the width.
  std::vector<std::string> wide = args;
  wide.push_back("--wide");
  EXPECT_EQ(RunBucketsimInColumns(80, wide).out, whole.out);
}

TEST(ConsoleWidth, SweepAdviceIsWrappedAtTheWidth) {
  const std::vector<std::string> args = {
      "sweep", "traces/tiny-ws2.json", "--bucket-cap-mb", "1,5,auto", "--budget", "4MiB"};
  BinaryResult whole = RunBucketsim(args);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_GT(LongestLine(whole.out), 100u);
  BinaryResult narrow = RunBucketsimInColumns(72, args);
  ASSERT_EQ(narrow.exit_code, 0) << narrow.err;
  EXPECT_LE(LongestLine(narrow.out), 72u) << narrow.out;
  // The same words, only the line breaks and the table's blocks differ.
  auto words = [](const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
  };
  std::vector<std::string> narrow_words = words(narrow.out);
  std::vector<std::string> whole_words = words(whole.out);
  // Everything after the table (the notes and the advice, from the Pareto note on) is the same
  // text, and there is some.
  auto after_table = [](const std::vector<std::string>& w) {
    auto at = std::find(w.begin(), w.end(), "Pareto-optimal:");
    return std::vector<std::string>(at, w.end());
  };
  EXPECT_GT(after_table(narrow_words).size(), 20u);
  EXPECT_EQ(after_table(narrow_words), after_table(whole_words));
}

TEST(ConsoleWidth, ABadColumnsIsNoWidth) {
  const std::vector<std::string> args = {"compare", "traces/tiny-ws2.json"};
  const std::string whole = RunBucketsim(args).out;
  EXPECT_EQ(RunBucketsimInColumns(0, args).out, whole);
}

}  // namespace
}  // namespace bucketsim
