#include "report/byte_unit.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(PageUnit, IsTheLargestUnitOfWhichTheSmallestFigureIsAtLeastOne) {
  EXPECT_EQ(UnitFor(0).name, "B");
  EXPECT_EQ(UnitFor(kKiB - 1).name, "B");
  EXPECT_EQ(UnitFor(kKiB).name, "KiB");
  EXPECT_EQ(UnitFor(kMiB - 1).name, "KiB");
  EXPECT_EQ(UnitFor(6 * kMiB).name, "MiB");  // tiny-ws2's peak reserved
  EXPECT_EQ(UnitFor(kGiB - 1).name, "MiB");
  EXPECT_EQ(UnitFor(2592 * kMiB).name, "GiB");  // gpt-24l-h1024-ws8's least peak reserved
  EXPECT_EQ(UnitFor(1024 * kGiB).name, "TiB");
}

RunResult PeakRun(Bytes allocated, Bytes reserved, bool oom = false) {
  RunResult run;
  run.peak.allocated_bytes = allocated;
  run.peak.reserved_bytes = reserved;
  if (oom) run.oom = OomEvent{};
  return run;
}

TEST(PageUnit, EveryPeakOfThePageReadsAtLeastOne) {
  ReportDocument gpt;
  gpt.runs = {PeakRun(1968 * kMiB, 3192 * kMiB), PeakRun(1968 * kMiB, 2592 * kMiB)};
  EXPECT_EQ(PageUnit({gpt}).name, "GiB");
  ReportDocument tiny;
  tiny.runs = {PeakRun(3 * kMiB, 6 * kMiB)};
  EXPECT_EQ(PageUnit({gpt, tiny}).name, "MiB");  // one unit for the whole page
  // A policy that ran out of memory stopped early: its peak does not decide...
  tiny.runs.push_back(PeakRun(0, 0, /*oom=*/true));
  EXPECT_EQ(PageUnit({tiny}).name, "MiB");
  // ...unless every one did.
  tiny.runs = {PeakRun(0, 0, true), PeakRun(512, 512, true)};
  EXPECT_EQ(PageUnit({tiny}).name, "B");
}

TEST(PageUnit, ASweepDecidesByItsConfigurationsAndItsBudget) {
  SweepPoint p;
  p.peak_allocated_bytes = 2 * kGiB;
  p.peak_reserved_bytes = 3 * kGiB;
  SweepSection sweep{{p, p}, {}, std::nullopt, std::nullopt, std::nullopt};
  sweep.points[1].peak_reserved_bytes = 1062 * kMiB;
  ReportDocument doc;
  doc.sweep = sweep;
  EXPECT_EQ(PageUnit({doc}).name, "GiB");
  sweep.budget = BudgetAnswer{};
  sweep.budget->budget_bytes = 256 * kMiB;  // the budget line is on the page too
  doc.sweep = sweep;
  EXPECT_EQ(PageUnit({doc}).name, "MiB");
}

TEST(PageUnit, FiguresHaveTwoDecimalsThreeFromGiB) {
  EXPECT_EQ(WithUnit(3261440, kMiBUnit), "3.11 MiB");
  // 2063982592 B = 1968.37 MiB = 1.922 GiB: about 1 MiB still shows on a GiB page.
  EXPECT_EQ(WithUnit(2063982592, kGiBUnit), "1.922 GiB");
  EXPECT_EQ(InUnit(512, kKiBUnit), "0.50");
  EXPECT_EQ(WithUnit(80, kBUnit), "80 B");
}

}  // namespace
}  // namespace bucketsim
