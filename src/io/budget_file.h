// The budget file of `bucketsim check --budget FILE`: per policy (keyed by the policy as the
// user names it on the command line, plus "*", the default for every policy), limits on the
// peak of allocated and of reserved memory, on the memory at named marks, and on the step time.
// Format (schema_version 1): docs/ci-gates.md "Budget file" and reports/budget-v1.schema.json. The
// reader is strict: an unknown key is an error (a misspelt budget must not silently check
// nothing), and every message names the file and the JSON pointer of the bad field.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "engine/budget.h"

namespace bucketsim {

inline constexpr int kBudgetSchemaVersion = 1;
inline constexpr std::string_view kAnyPolicy = "*";

struct BudgetFile {
  std::string path;
  std::string description;
  // The policies the file names, in file order ("*" is not one of them).
  std::vector<std::pair<std::string, PolicyBudget>> policies;
  std::optional<PolicyBudget> any_policy;  // "*"

  // `policy`'s budget: "*" with the policy's own entry over it (OverrideWith).
  PolicyBudget For(std::string_view policy) const;
};

Result<BudgetFile> ReadBudgetFile(const std::string& path);
// The same from text; `path` names it in messages.
Result<BudgetFile> ParseBudgetFile(const std::string& path, std::string_view text);

}  // namespace bucketsim
