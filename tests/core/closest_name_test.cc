#include "core/closest_name.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(EditDistance, CountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("compare", "compare"), 0u);
  EXPECT_EQ(EditDistance("comapre", "compare"), 1u);  // one adjacent swap
  EXPECT_EQ(EditDistance("polcy", "policy"), 1u);     // one insertion
  EXPECT_EQ(EditDistance("checks", "check"), 1u);     // one deletion
  EXPECT_EQ(EditDistance("sweap", "sweep"), 1u);      // one substitution
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
}

TEST(ClosestName, SuggestsOnlyANearName) {
  const std::vector<std::string> commands = {"compare", "sweep", "check", "calibrate"};
  EXPECT_EQ(ClosestName("comapre", commands), "compare");
  EXPECT_EQ(ClosestName("chek", commands), "check");
  EXPECT_EQ(ClosestName("frobnicate", commands), std::nullopt);
  // Two letters may differ by one edit at most: "xy" is not "sweep".
  EXPECT_EQ(ClosestName("xy", commands), std::nullopt);
}

TEST(DidYouMean, AppendsTheSuggestionOrNothing) {
  EXPECT_EQ(DidYouMean("backward-onyl", {"always-allocated", "backward-only"}),
            "; did you mean 'backward-only'?");
  EXPECT_EQ(DidYouMean("zzz", {"always-allocated", "backward-only"}), "");
}

}  // namespace
}  // namespace bucketsim
