#include "report/console_table.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace bucketsim {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

Table ThreeColumns() {
  Table table;
  table.headers = {"policy", "peak (MiB)", "buckets"};
  table.right_aligned = {false, true, true};
  table.rows = {{"backward-only", "1968.39", "24"}, {"unbucketed", "0.00", "0"}};
  return table;
}

TEST(RenderText, WithoutALimitOneBlockAlignedTwoSpacesApart) {
  EXPECT_EQ(RenderText(ThreeColumns()),
            "policy         peak (MiB)  buckets\n"
            "backward-only     1968.39       24\n"
            "unbucketed           0.00        0\n");
  // A width the table fits changes nothing.
  EXPECT_EQ(RenderText(ThreeColumns(), 34), RenderText(ThreeColumns()));
}

TEST(RenderText, ANarrowerWidthSplitsIntoBlocksThatRepeatTheKey) {
  EXPECT_EQ(RenderText(ThreeColumns(), 33),  // one short of the 34 it needs
            "policy         peak (MiB)\n"
            "backward-only     1968.39\n"
            "unbucketed           0.00\n"
            "\n"
            "policy         buckets\n"
            "backward-only       24\n"
            "unbucketed           0\n");
}

TEST(RenderText, TwoKeyColumnsAndAColumnWiderThanTheWidthAlone) {
  Table table = ThreeColumns();
  table.key_columns = 2;
  table.headers.push_back("setting");
  table.right_aligned.push_back(false);
  table.rows[0].push_back("FullyShardedDataParallel(module, sharding_strategy=FULL_SHARD)");
  table.rows[1].push_back("-");
  const std::string text = RenderText(table, 40);
  const std::vector<std::string> lines = Lines(text);
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[0], "policy         peak (MiB)  buckets");
  EXPECT_EQ(lines[4], "policy         peak (MiB)  setting");
  EXPECT_EQ(
      lines[5],
      "backward-only     1968.39  FullyShardedDataParallel(module, sharding_strategy=FULL_SHARD)");
}

TEST(WrapText, BreaksAtSpacesKeepsNewlinesAndLongWords) {
  EXPECT_EQ(WrapText("the largest batch that fits is 4", 0), "the largest batch that fits is 4\n");
  EXPECT_EQ(WrapText("the largest batch that fits is 4", 12),
            "the largest\nbatch that\nfits is 4\n");
  EXPECT_EQ(WrapText("a verylongwordindeed b", 6), "a\nverylongwordindeed\nb\n");
  EXPECT_EQ(WrapText("one two\nthree four", 7), "one two\nthree\nfour\n");
  EXPECT_EQ(WrapText("", 10), "\n");
}

}  // namespace
}  // namespace bucketsim
