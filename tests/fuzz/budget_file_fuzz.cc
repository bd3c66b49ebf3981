// The budget file of `check --budget`.
#include "fuzz_input.h"
#include "io/budget_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  bucketsim::Result<bucketsim::BudgetFile> budget =
      bucketsim::ParseBudgetFile("fuzz.json", bucketsim::fuzz::AsText(data, size));
  if (budget.ok()) {
    for (const auto& [policy, limits] : budget->policies) (void)budget->For(policy);
  }
  return 0;
}
