// A ten-million-event trace streams through `compare` (three policies, the caching model, on every
// core) in bounded memory: the trace is generated into a pipe and never stored, and the largest
// resident set of `compare` is read with getrusage(RUSAGE_CHILDREN) (this test binary runs
// nothing else; the generator runs detached, `(gen &) |`, so it is not one of the children
// waited for, and only the replay is measured).
//
// DISABLED until the checker forgets freed ids (helper perfcore's TraceChecker commit): without
// it the checker's map of every id ever seen alone holds about 23 MB per million events.
#include <sys/resource.h>

#include <string>

#include <gtest/gtest.h>

#include "testing/run_binary.h"

namespace bucketsim {
namespace {

constexpr long kMaxRssKiB = 64 * 1024;  // issue 14: 10M events within 64 MiB

TEST(BoundedMemory, DISABLED_TenMillionEventCompareStaysWithin64MiB) {
  // 2000 layers at 240 iterations: 10.1M events (1.01M at 24: README, "Performance").
  const std::string gen =
      "(" + std::string(BUCKETSIM_BINARY) + " gen transformer --layers 2000 --iterations 240 &)";
  testing::BinaryResult run =
      testing::RunBucketsim({"compare", "-", "--policy", "backward-only", "--policy",
                             "always-allocated", "--policy", "per-group-dedup", "--format", "json"},
                            gen + " | ");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("\"events\": 10"), std::string::npos) << run.out.substr(0, 2000);
  // The report is small too: the collective log is summarised.
  EXPECT_LT(run.out.size(), 10u << 20);
  rusage usage{};
  ASSERT_EQ(getrusage(RUSAGE_CHILDREN, &usage), 0);
  EXPECT_LE(usage.ru_maxrss, kMaxRssKiB) << "largest resident set: " << usage.ru_maxrss << " KiB";
}

}  // namespace
}  // namespace bucketsim
