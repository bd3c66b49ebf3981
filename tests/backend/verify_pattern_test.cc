#include "backend/verify_pattern.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

// The expectation is the brute-force sum of what every member put in the chunk of `position`.
TEST(PatternExpectation, MatchesTheSumOverMembers) {
  const int ranks[] = {5, 2, 7};  // a group's members in group-rank order
  for (int position = 0; position < 3; ++position) {
    PatternExpectation expect;
    expect.members = 3;
    expect.position = position;
    expect.rank_term_sum = PatternRankTerm(5) + PatternRankTerm(2) + PatternRankTerm(7);
    for (std::uint64_t request : {0u, 17u, 123456u}) {
      for (std::uint64_t j = 0; j < 50; ++j) {
        float sum = 0;
        for (int rank : ranks) sum += PatternValue(rank, request, position, j);
        EXPECT_EQ(expect.At(request, j), sum) << position << " " << request << " " << j;
      }
    }
  }
}

TEST(PatternExpectation, EmulationSumsThisRanksRows) {
  PatternExpectation expect;
  expect.members = 4;
  expect.rank = 3;
  expect.emulated = true;
  for (std::uint64_t j = 0; j < 20; ++j) {
    float sum = 0;
    for (int row = 0; row < 4; ++row) sum += PatternValue(3, 9, row, j);
    EXPECT_EQ(expect.At(9, j), sum);
  }
}

TEST(PatternValue, DiffersBetweenRequestsRowsAndRanks) {
  // A bucket copy landing in the wrong columns or rows, or a wrong group, shows as a mismatch.
  EXPECT_NE(PatternValue(0, 1, 0, 0), PatternValue(0, 2, 0, 0));
  EXPECT_NE(PatternValue(0, 1, 0, 0), PatternValue(0, 1, 1, 0));
  EXPECT_NE(PatternValue(0, 1, 0, 0), PatternValue(1, 1, 0, 0));
  EXPECT_NE(PatternValue(0, 1, 0, 0), PatternValue(0, 1, 0, 1));
}

}  // namespace
}  // namespace bucketsim
