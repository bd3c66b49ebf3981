// `bucketsim check`: exit 0 when every budget holds, 1 with one line per broken budget, 2 for
// anything that keeps the check from being decided.
#include <gtest/gtest.h>

#include "testing/run_binary.h"

namespace bucketsim {
namespace {

using testing::RunBucketsim;

// backward-only on the tiny trace: peak 3261440 B; "after bwd" at most 1572864 B (iteration 1);
// "after fwd" at most 2106368 B (tests/engine/tiny_trace_test.cc).
std::vector<std::string> Check(std::vector<std::string> budgets) {
  std::vector<std::string> args = {"check", "traces/tiny-ws2.json", "--policy", "backward-only"};
  args.insert(args.end(), budgets.begin(), budgets.end());
  return args;
}

TEST(Check, PassesAtExactlyThePeak) {
  testing::BinaryResult run = RunBucketsim(Check({"--max-peak-allocated", "3261440"}));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "PASS backward-only: peak allocated 3.11 MiB (3261440 B) within budget 3.11 MiB "
            "(3261440 B)\n"
            "verdict: PASS (1 check: 1 passed, 0 failed, 0 skipped)\n");
}

TEST(Check, FailsOneByteBelowThePeak) {
  testing::BinaryResult run = RunBucketsim(Check({"--max-peak-allocated", "3261439B"}));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("FAIL backward-only: peak allocated 3.11 MiB (3261440 B) exceeds"),
            std::string::npos)
      << run.out;
}

TEST(Check, EveryPolicyGivenIsCheckedAgainstTheFlags) {
  testing::BinaryResult run =
      RunBucketsim(Check({"--policy", "unbucketed", "--max-peak-allocated", "3MiB"}));
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_EQ(run.out,
            "FAIL backward-only: peak allocated 3.11 MiB (3261440 B) exceeds budget 3.00 MiB "
            "(3145728 B)\n"
            "PASS unbucketed: peak allocated 2.59 MiB (2720768 B) within budget 3.00 MiB "
            "(3145728 B)\n"
            "verdict: FAIL (2 checks: 1 passed, 1 failed, 0 skipped)\n");
}

TEST(Check, UnitsAreBinaryAndDecimal) {
  EXPECT_EQ(RunBucketsim(Check({"--max-peak-allocated", "3.2MB"})).exit_code, 1);    // 3200000
  EXPECT_EQ(RunBucketsim(Check({"--max-peak-allocated", "3.3MB"})).exit_code, 0);    // 3300000
  EXPECT_EQ(RunBucketsim(Check({"--max-peak-allocated", "3MiB"})).exit_code, 1);     // 3145728
  EXPECT_EQ(RunBucketsim(Check({"--max-peak-allocated", "3185KiB"})).exit_code, 0);  // 3261440
  EXPECT_EQ(RunBucketsim(Check({"--max-peak-allocated", "1GiB"})).exit_code, 0);
  EXPECT_EQ(RunBucketsim(Check({"--max-peak-allocated", "1GB"})).exit_code, 0);
}

TEST(Check, OneLinePerBudgetAndExit1WhenAnyIsBroken) {
  testing::BinaryResult run =
      RunBucketsim(Check({"--max-peak-allocated", "4MiB", "--max-at-mark", "after bwd=1572864",
                          "--max-at-mark", "after fwd=2MiB"}));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("PASS backward-only: peak allocated"), std::string::npos);
  EXPECT_NE(run.out.find("PASS backward-only: allocated at mark 'after bwd' 1.50 MiB (1572864 B)"),
            std::string::npos);
  EXPECT_NE(run.out.find("FAIL backward-only: allocated at mark 'after fwd' 2.01 MiB (2106368 B)"),
            std::string::npos)
      << run.out;
}

// Under the default caching model every request of the tiny trace is at most 1 MiB: small pool,
// 2 MiB segments. Stream 0 holds params (368640) and the activation (1000448) in one segment
// and Adam's state (737280, which no longer fits: 2106368 > 2097152) in a second; the
// post_backward stream's buffers (at most 2*262144 + 2*131072 + 204800 + 163840 = 1155072 live)
// fit one more. Peak reserved: 3 * 2 MiB = 6291456 B.
TEST(Check, PeakReservedBudgetUsesTheCachingModel) {
  EXPECT_EQ(RunBucketsim(Check({"--max-peak-reserved", "6MiB"})).exit_code, 0);
  testing::BinaryResult over = RunBucketsim(Check({"--max-peak-reserved", "6291455"}));
  EXPECT_EQ(over.exit_code, 1);
  EXPECT_NE(over.out.find("FAIL backward-only: peak reserved 6.00 MiB (6291456 B) exceeds"),
            std::string::npos)
      << over.out;
  // The exact model reserves what it allocates.
  testing::BinaryResult exact = RunBucketsim(Check({"--allocator", "exact", "--max-peak-reserved",
                                                    "3261440", "--max-peak-allocated", "3261440"}));
  EXPECT_EQ(exact.exit_code, 0) << exact.out << exact.err;
}

// With a 4 MiB device the tiny trace's three 2 MiB segments do not fit: in iteration 1 the
// post_backward stream needs a second segment for c's bypass output while stream 0's two
// segments hold the rest. A policy that does not fit breaks every budget.
TEST(Check, AnOutOfMemoryBreaksTheBudget) {
  testing::BinaryResult run =
      RunBucketsim(Check({"--device-memory", "4MiB", "--max-peak-allocated", "1GiB"}));
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_EQ(run.out.rfind("FAIL backward-only: does not fit 4.00 MiB of device memory: out of "
                          "memory at event 27 (a 200.00 KiB bypass_output request on stream 1): "
                          "tried to allocate 2.00 MiB; 0 B of 4.00 MiB free",
                          0),
            0u)
      << run.out;
  EXPECT_EQ(run.out.find("PASS"), std::string::npos) << run.out;
  EXPECT_EQ(
      RunBucketsim(Check({"--device-memory", "8MiB", "--max-peak-allocated", "1GiB"})).exit_code,
      0);
}

// --device-memory with no budget is the "does it fit" gate (issue 22): a check of its own, which
// names the capacity and, when the policy does not fit, where it ran out; exit 1 as any broken
// budget.
TEST(Check, DeviceMemoryAloneIsACheck) {
  testing::BinaryResult fits = RunBucketsim(Check({"--device-memory", "8MiB"}));
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_EQ(fits.out.rfind("PASS backward-only: fits 8.00 MiB of device memory (peak reserved "
                           "6.00 MiB (6291456 B))\nverdict: PASS (1 ",
                           0),
            0u)
      << fits.out;
  testing::BinaryResult oom = RunBucketsim(Check({"--device-memory", "4MiB"}));
  EXPECT_EQ(oom.exit_code, 1) << oom.err;
  EXPECT_EQ(oom.out.rfind("FAIL backward-only: does not fit 4.00 MiB of device memory: out of "
                          "memory at event 27 (",
                          0),
            0u)
      << oom.out;
  EXPECT_NE(oom.out.find("\nverdict: FAIL (1 "), std::string::npos) << oom.out;
  // A capacity that is not a SIZE keeps the check from being decided.
  EXPECT_EQ(RunBucketsim(Check({"--device-memory", "lots"})).exit_code, 2);
}

// A trace emitted for PyTorch's FSDP1 or FSDP2 has its run's own policy: `check TRACE
// --device-memory SIZE` checks it without --policy (a fairscale trace still needs one).
TEST(Check, ATraceOfPyTorchsFsdpIsCheckedUnderItsOwnPolicy) {
  const std::string trace = testing::WriteTempFile("fsdp1-trace.json", "");
  testing::BinaryResult gen = RunBucketsim(
      {"gen",         "transformer", "--layers", "2",   "--hidden",     "64", "--heads",      "2",
       "--seq",       "32",          "--vocab",  "128", "--world-size", "2",  "--iterations", "1",
       "--fsdp-impl", "fsdp1",       "-o",       trace});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  testing::BinaryResult fits = RunBucketsim({"check", trace, "--device-memory", "1GiB"});
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_EQ(fits.out.rfind("PASS fsdp1: fits 1.00 GiB of device memory", 0), 0u) << fits.out;
  testing::BinaryResult oom = RunBucketsim({"check", trace, "--device-memory", "1MiB"});
  EXPECT_EQ(oom.exit_code, 1) << oom.err;
  EXPECT_EQ(oom.out.rfind("FAIL fsdp1: does not fit 1.00 MiB of device memory", 0), 0u) << oom.out;
  testing::BinaryResult fairscale =
      RunBucketsim({"check", "traces/tiny-ws2.json", "--device-memory", "1GiB"});
  EXPECT_EQ(fairscale.exit_code, 2);
  EXPECT_NE(fairscale.err.find("no policy: give --policy P"), std::string::npos) << fairscale.err;
}

// A budget below 1 MiB given as a plain number is bytes, as any SIZE without a unit, but almost
// surely a forgotten unit: it is checked as given, with a warning on stderr (issue 22).
TEST(Check, ASmallBudgetWithoutAUnitIsWarnedAbout) {
  testing::BinaryResult bytes = RunBucketsim(Check({"--max-peak-reserved", "40"}));
  EXPECT_EQ(bytes.exit_code, 1);
  EXPECT_EQ(bytes.err,
            "bucketsim: warning: --max-peak-reserved 40 is 40 bytes (a SIZE without a unit is "
            "bytes); did you mean 40GiB?\n");
  testing::BinaryResult mark = RunBucketsim(Check({"--max-at-mark", "after fwd=2"}));
  EXPECT_NE(mark.err.find("warning: --max-at-mark 2 is 2 bytes"), std::string::npos) << mark.err;
  for (const char* size : {"40B", "40GiB", "3261440"}) {
    EXPECT_EQ(RunBucketsim(Check({"--max-peak-reserved", size})).err, "") << size;
  }
}

TEST(Check, ErrorsNeverPass) {
  // A mark that never occurs, a bad size, no budget, no policy, a bad trace.
  EXPECT_EQ(RunBucketsim(Check({"--max-at-mark", "after lunch=1GiB"})).exit_code, 2);
  EXPECT_EQ(RunBucketsim(Check({"--max-peak-allocated", "-1GiB"})).exit_code, 2);
  EXPECT_EQ(RunBucketsim(Check({"--max-peak-allocated", "12 parsecs"})).exit_code, 2);
  EXPECT_EQ(RunBucketsim(Check({"--max-peak-allocated", "99999999999999999999999GiB"})).exit_code,
            2);
  EXPECT_EQ(RunBucketsim(Check({})).exit_code, 2);
  EXPECT_EQ(
      RunBucketsim({"check", "traces/tiny-ws2.json", "--max-peak-allocated", "1GiB"}).exit_code, 2);
  std::string bad = testing::WriteTempFile("bad.json", "{");
  EXPECT_EQ(
      RunBucketsim({"check", bad, "--policy", "backward-only", "--max-peak-allocated", "1GiB"})
          .exit_code,
      2);
  testing::BinaryResult missing_mark = RunBucketsim(Check({"--max-at-mark", "after lunch=1GiB"}));
  EXPECT_NE(missing_mark.err.find("mark 'after lunch' never occurs in the trace"),
            std::string::npos)
      << missing_mark.err;
}

}  // namespace
}  // namespace bucketsim
