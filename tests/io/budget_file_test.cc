// The budget file reader: sizes as strings or bytes, "*" under each policy's own entry, and a
// clear error (file, JSON pointer, what is wrong) for everything else.
#include "io/budget_file.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

constexpr const char* kBudget = R"({
  "schema_version": 1,
  "description": "CI budget",
  "policies": {
    "*": {"max_peak_reserved": "6MiB", "max_at_mark": {"after fwd": 3000000}},
    "backward-only": {
      "max_peak_allocated": "3.11MB",
      "max_at_mark": {"after bwd": "1.5MiB", "after fwd": "2MiB"},
      "max_step_time_us": 400
    },
    "lifetime=always,key=members,cap=50": {}
  }
})";

TEST(BudgetFile, ReadsPoliciesInFileOrderAndTheDefault) {
  Result<BudgetFile> file = ParseBudgetFile("budget.json", kBudget);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->description, "CI budget");
  ASSERT_EQ(file->policies.size(), 2u);
  EXPECT_EQ(file->policies[0].first, "backward-only");
  EXPECT_EQ(file->policies[1].first, "lifetime=always,key=members,cap=50");
  ASSERT_TRUE(file->any_policy);
  EXPECT_EQ(file->any_policy->max_peak_reserved_bytes, 6291456u);
}

TEST(BudgetFile, APolicysOwnEntryGoesOverTheDefault) {
  Result<BudgetFile> file = ParseBudgetFile("budget.json", kBudget);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  PolicyBudget own = file->For("backward-only");
  EXPECT_EQ(own.max_peak_allocated_bytes, 3110000u);
  EXPECT_EQ(own.max_peak_reserved_bytes, 6291456u);  // from "*"
  ASSERT_EQ(own.max_at_mark_bytes.size(), 2u);
  EXPECT_EQ(own.max_at_mark_bytes[0], (std::pair<std::string, Bytes>{"after fwd", 2097152}));
  EXPECT_EQ(own.max_at_mark_bytes[1], (std::pair<std::string, Bytes>{"after bwd", 1572864}));
  EXPECT_EQ(own.max_step_time_us, 400.0);
  PolicyBudget other = file->For("unbucketed");  // not in the file: "*" alone
  EXPECT_EQ(other.max_peak_reserved_bytes, 6291456u);
  EXPECT_FALSE(other.max_peak_allocated_bytes);
  ASSERT_EQ(other.max_at_mark_bytes.size(), 1u);
  EXPECT_EQ(other.max_at_mark_bytes[0].second, 3000000u);
}

std::string ErrorOf(const std::string& text) {
  Result<BudgetFile> file = ParseBudgetFile("b.json", text);
  EXPECT_FALSE(file.ok()) << text;
  return file.ok() ? std::string() : file.status().message();
}

TEST(BudgetFile, ErrorsNameTheFileAndTheField) {
  EXPECT_EQ(ErrorOf(R"({"policies": {}})"),
            "b.json: /schema_version: missing (the budget file needs an integer >= 0 here)");
  EXPECT_EQ(ErrorOf(R"({"schema_version": 2, "policies": {}})"),
            "b.json: /schema_version: this bucketsim reads budget file schema_version 1, not 2");
  EXPECT_EQ(ErrorOf(R"([1])"), "b.json: (top level): expected an object (a budget file), got [1]");
  EXPECT_EQ(ErrorOf(R"({"schema_version": 1, "policies": {}})"),
            "b.json: /policies: names no policy (and no \"*\")");
  EXPECT_EQ(ErrorOf(R"({"schema_version": 1, "policy": {}})"),
            "b.json: /policy: unknown key (known here: schema_version, description, policies)");
  EXPECT_EQ(
      ErrorOf(R"({"schema_version": 1, "policies": {"backward-only": {"max_peak_alocated": 1}}})"),
      "b.json: /policies/backward-only/max_peak_alocated: unknown key (known here: "
      "max_peak_allocated, max_peak_reserved, max_at_mark, max_step_time_us)");
  EXPECT_EQ(
      ErrorOf(R"({"schema_version": 1, "policies": {"backward-only": {"max_peak_reserved": -1}}})"),
      "b.json: /policies/backward-only/max_peak_reserved: expected a size: a string such as "
      "\"40GiB\" or an integer number of bytes, got -1");
  EXPECT_EQ(
      ErrorOf(
          R"({"schema_version": 1, "policies": {"*": {"max_at_mark": {"a/b": "12 parsecs"}}}})"),
      "b.json: /policies/*/max_at_mark/a~1b: size '12 parsecs' has an unknown unit 'parsecs' (use "
      "B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)");
  EXPECT_EQ(ErrorOf(R"({"schema_version": 1, "policies": {"*": {"max_step_time_us": "1ms"}}})"),
            "b.json: /policies/*/max_step_time_us: expected a number, got \"1ms\"");
  EXPECT_EQ(ErrorOf(R"({"schema_version": 1, "policies": {"*": {"max_step_time_us": -5}}})"),
            "b.json: /policies/*/max_step_time_us: must be >= 0 (microseconds)");
  EXPECT_NE(ErrorOf(R"({"schema_version": 1, "policies": {"backward-onyl": {}}})")
                .find("b.json: /policies/backward-onyl: "),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(R"({"schema_version": 1,)").find("b.json: not a valid budget file: parse error"),
      std::string::npos);
}

TEST(BudgetFile, AMissingFileIsAnIoError) {
  Result<BudgetFile> file = ReadBudgetFile("/nonexistent/budget.json");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kIoError);
  EXPECT_EQ(file.status().message(),
            "cannot read budget file '/nonexistent/budget.json': No such file or directory");
}

TEST(BudgetFile, TheShippedExampleReads) {
  Result<BudgetFile> file = ReadBudgetFile(BUCKETSIM_SOURCE_DIR "/reports/budget-example.json");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_FALSE(file->policies.empty());
}

}  // namespace
}  // namespace bucketsim
