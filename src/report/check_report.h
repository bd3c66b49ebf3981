// The console form of a CI gate's verdicts (`bucketsim check`): one line per CheckOutcome,
// "PASS|FAIL|SKIP <policy>: <figure> <value> ...", and a final verdict line. The JUnit XML
// (report/junit_writer.h) uses the same lines as its failure messages, so a CI page and the
// job log say the same thing.
#pragma once

#include <string>
#include <vector>

#include "engine/budget_check.h"

namespace bucketsim {

// "PASS backward-only: peak allocated 3.11 MiB (3261440 B) within budget 3.11 MiB (3261440 B)"
// "FAIL backward-only: peak reserved 6.00 MiB (6291456 B) vs baseline 4.00 MiB (4194304 B):
//  +2.00 MiB (+2097152 B, +50.00%) exceeds tolerance 2% (+83886 B)"
std::string CheckLine(const CheckOutcome& outcome);

struct CheckTally {
  int passed = 0;
  int failed = 0;
  int skipped = 0;
  int total() const { return passed + failed + skipped; }
};
CheckTally Tally(const std::vector<CheckOutcome>& outcomes);

// "verdict: PASS (3 checks: 3 passed, 0 failed, 0 skipped)"; FAIL when any check failed.
std::string VerdictLine(const std::vector<CheckOutcome>& outcomes);

}  // namespace bucketsim
