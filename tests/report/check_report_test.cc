// The console lines of `bucketsim check`: one per check, the delta against a baseline in bytes
// and percent, and the verdict line.
#include "report/check_report.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

CheckOutcome Baseline(Bytes value, Bytes baseline, Bytes allowed, Verdict verdict) {
  CheckOutcome outcome;
  outcome.policy = "backward-only";
  outcome.kind = CheckKind::kBaseline;
  outcome.figure = Figure::kPeakReserved;
  outcome.value.bytes = value;
  outcome.limit.bytes = baseline;
  outcome.allowed_growth.bytes = allowed;
  outcome.tolerance = "2%";
  outcome.verdict = verdict;
  return outcome;
}

TEST(CheckLine, Budget) {
  CheckOutcome outcome;
  outcome.policy = "backward-only";
  outcome.figure = Figure::kAtMark;
  outcome.mark = "after fwd";
  outcome.value.bytes = 2106368;
  outcome.limit.bytes = 2097152;
  outcome.verdict = Verdict::kFail;
  EXPECT_EQ(CheckLine(outcome),
            "FAIL backward-only: allocated at mark 'after fwd' 2.01 MiB (2106368 B) exceeds "
            "budget 2.00 MiB (2097152 B)");
  outcome.figure = Figure::kStepTime;
  outcome.value.us = 350;
  outcome.limit.us = 400;
  outcome.verdict = Verdict::kPass;
  EXPECT_EQ(CheckLine(outcome), "PASS backward-only: step time 350.0 us within budget 400.0 us");
}

TEST(CheckLine, BaselineGrowthShrinkageAndNoChange) {
  EXPECT_EQ(CheckLine(Baseline(6291456, 4194304, 83886, Verdict::kFail)),
            "FAIL backward-only: peak reserved 6.00 MiB (6291456 B) vs baseline 4.00 MiB "
            "(4194304 B): +2.00 MiB (+2097152 B, +50.00%) exceeds tolerance 2% (+83886 B)");
  EXPECT_EQ(CheckLine(Baseline(4194305, 4194304, 83886, Verdict::kPass)),
            "PASS backward-only: peak reserved 4.00 MiB (4194305 B) vs baseline 4.00 MiB "
            "(4194304 B): +1 B (+1 B, +0.00%) within tolerance 2% (+83886 B)");
  EXPECT_EQ(CheckLine(Baseline(3145728, 4194304, 83886, Verdict::kPass)),
            "PASS backward-only: peak reserved 3.00 MiB (3145728 B) vs baseline 4.00 MiB "
            "(4194304 B): -1.00 MiB (-1048576 B, -25.00%), an improvement");
  EXPECT_EQ(CheckLine(Baseline(512, 512, 10, Verdict::kPass)),
            "PASS backward-only: peak reserved 512 B (512 B) vs baseline 512 B (512 B): unchanged");
  CheckOutcome from_zero = Baseline(512, 0, 0, Verdict::kFail);
  from_zero.tolerance.clear();
  EXPECT_EQ(CheckLine(from_zero),
            "FAIL backward-only: peak reserved 512 B (512 B) vs baseline 0 B (0 B): +512 B (+512 "
            "B, from 0) exceeds tolerance 0 (+0 B)");
}

TEST(CheckLine, SkippedBaseline) {
  CheckOutcome outcome;
  outcome.policy = "unbucketed";
  outcome.kind = CheckKind::kBaseline;
  outcome.verdict = Verdict::kSkipped;
  outcome.skipped_because = "the baseline report has no policy of this name";
  EXPECT_EQ(CheckLine(outcome),
            "SKIP unbucketed: baseline comparison skipped: the baseline report has no policy of "
            "this name");
}

TEST(VerdictLine, FailsWhenAnyCheckFailed) {
  std::vector<CheckOutcome> outcomes = {Baseline(1, 1, 0, Verdict::kPass),
                                        Baseline(1, 1, 0, Verdict::kSkipped)};
  EXPECT_EQ(VerdictLine(outcomes), "verdict: PASS (2 checks: 1 passed, 0 failed, 1 skipped)");
  outcomes.push_back(Baseline(2, 1, 0, Verdict::kFail));
  EXPECT_EQ(VerdictLine(outcomes), "verdict: FAIL (3 checks: 1 passed, 1 failed, 1 skipped)");
}

TEST(VerdictLine, OneCheckIsSingular) {
  EXPECT_EQ(VerdictLine({Baseline(1, 1, 0, Verdict::kPass)}),
            "verdict: PASS (1 check: 1 passed, 0 failed, 0 skipped)");
}

}  // namespace
}  // namespace bucketsim
