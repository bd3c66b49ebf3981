// The check's decisions in the library (report/check_gate.h): budgets layered file "*", the
// policy's entry, the flags; a baseline's differences refused or noted; every run decided.
#include "report/check_gate.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(CheckGate, BudgetsLayerTheFilesAnyThenThePolicysEntryThenTheFlags) {
  BudgetFile file;
  PolicyBudget any;
  any.max_peak_allocated_bytes = 100;
  any.max_peak_reserved_bytes = 200;
  file.any_policy = any;
  PolicyBudget own;
  own.max_peak_reserved_bytes = 150;
  file.policies.emplace_back("fsdp2", own);
  PolicyBudget flags;
  flags.max_peak_allocated_bytes = 90;
  Result<std::vector<PolicyBudget>> budgets =
      LayerBudgets({"fsdp2", "backward-only"}, &file, flags, /*other_checks=*/false);
  ASSERT_TRUE(budgets.ok()) << budgets.status().message();
  EXPECT_EQ((*budgets)[0].max_peak_allocated_bytes, 90u);
  EXPECT_EQ((*budgets)[0].max_peak_reserved_bytes, 150u);
  EXPECT_EQ((*budgets)[1].max_peak_allocated_bytes, 90u);
  EXPECT_EQ((*budgets)[1].max_peak_reserved_bytes, 200u);
}

TEST(CheckGate, APolicyHeldToNothingIsAnErrorUnlessABaselineOrDeviceChecksIt) {
  Result<std::vector<PolicyBudget>> none = LayerBudgets({"fsdp1"}, nullptr, {}, false);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("nothing to check for policy 'fsdp1'"), std::string::npos);
  EXPECT_TRUE(LayerBudgets({"fsdp1"}, nullptr, {}, /*other_checks=*/true).ok());
}

TEST(CheckGate, ABaselinesDifferencesAreRefusedOrNotedAsAllowed) {
  ReportDocument baseline;
  baseline.source = "base.json";
  baseline.trace.world_size = 8;
  baseline.trace.rank = 0;
  baseline.trace.bucket_cap_mb = 25;
  baseline.context.trace_digest = "abc";
  TraceHeader header;
  header.world_size = 4;
  header.rank = 0;
  header.bucket_cap_mb = 25;
  const std::vector<std::string> differences = TraceDifferences(baseline, &header, "abd");
  EXPECT_EQ(differences, (std::vector<std::string>{"world size 8 (this trace 4)",
                                                   "trace digest abc (this trace abd)"}));
  // A trace from stdin: the digest alone.
  EXPECT_EQ(TraceDifferences(baseline, nullptr, "abc"), std::vector<std::string>{});
  std::vector<std::string> notes;
  const Status refused = RefuseDifferences(baseline, differences, /*allowed=*/false, notes);
  EXPECT_EQ(refused.message(),
            "base.json: the baseline is not comparable with this check: it has world size 8 "
            "(this trace 4); trace digest abc (this trace abd); regenerate it, or give "
            "--allow-different-trace to compare anyway");
  EXPECT_TRUE(notes.empty());
  EXPECT_TRUE(RefuseDifferences(baseline, differences, /*allowed=*/true, notes).ok());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].rfind("NOTE: the baseline base.json differs", 0), 0u) << notes[0];
  baseline.context.memory_model = "caching";
  EXPECT_FALSE(SameMemoryModel(baseline, "exact").ok());
  EXPECT_TRUE(SameMemoryModel(baseline, "caching").ok());
}

TEST(CheckGate, EveryRunIsDecidedOrTheCheckIsAnError) {
  RunResult run;
  run.policy = "fsdp2";
  run.peak.allocated_bytes = 80;
  CheckGate gate;
  gate.policies = {"fsdp2"};
  PolicyBudget budget;
  budget.max_peak_allocated_bytes = 100;
  gate.budgets = {budget};
  Result<std::vector<CheckOutcome>> outcomes = DecideChecks(gate, {run});
  ASSERT_TRUE(outcomes.ok()) << outcomes.status().message();
  ASSERT_EQ(outcomes->size(), 1u);
  EXPECT_EQ((*outcomes)[0].verdict, Verdict::kPass);
  EXPECT_EQ((*outcomes)[0].value.bytes, 80u);
  // A baseline without figures for the policy, and no budget: nothing decided.
  gate.budgets = {PolicyBudget{}};
  gate.baseline = ReportDocument{};
  Result<std::vector<CheckOutcome>> undecided = DecideChecks(gate, {run});
  ASSERT_FALSE(undecided.ok());
  EXPECT_NE(undecided.status().message().find("nothing was checked for policy 'fsdp2'"),
            std::string::npos);
}

}  // namespace
}  // namespace bucketsim
