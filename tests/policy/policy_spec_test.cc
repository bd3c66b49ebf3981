#include "policy/policy_spec.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(ParsePolicySpec, NamedPresets) {
  auto always = ParsePolicySpec("always-allocated");
  ASSERT_TRUE(always.ok());
  EXPECT_EQ(always->lifetime, Lifetime::kAlways);
  EXPECT_EQ(always->key, KeyMode::kIdentity);
  EXPECT_FALSE(always->cap_mb.has_value());

  auto dedup = ParsePolicySpec("per-group-dedup");
  ASSERT_TRUE(dedup.ok());
  EXPECT_EQ(dedup->lifetime, Lifetime::kBackward);
  EXPECT_EQ(dedup->key, KeyMode::kMembers);

  auto unbucketed = ParsePolicySpec("unbucketed");
  ASSERT_TRUE(unbucketed.ok());
  EXPECT_EQ(unbucketed->cap_mb, 0.0);
}

TEST(ParsePolicySpec, GeneralFormWithDefaultsForMissingParts) {
  auto spec = ParsePolicySpec("lifetime=always,key=members,cap=50");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->lifetime, Lifetime::kAlways);
  EXPECT_EQ(spec->key, KeyMode::kMembers);
  EXPECT_EQ(spec->cap_mb, 50.0);
  EXPECT_EQ(spec->Canonical(50), "lifetime=always,key=members,cap=50");

  auto partial = ParsePolicySpec("key=members");
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->lifetime, Lifetime::kBackward);
  EXPECT_EQ(partial->Canonical(0.25), "lifetime=backward,key=members,cap=0.25");
}

TEST(ParsePolicySpec, RejectsUnknownNamesAndParts) {
  auto unknown = ParsePolicySpec("always");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("unknown policy 'always'"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("backward-only"), std::string::npos);

  EXPECT_FALSE(ParsePolicySpec("lifetime=forever").ok());
  EXPECT_FALSE(ParsePolicySpec("key=group").ok());
  EXPECT_FALSE(ParsePolicySpec("cap=lots").ok());
  EXPECT_FALSE(ParsePolicySpec("cap=").ok());
  EXPECT_FALSE(ParsePolicySpec("colour=blue").ok());
  EXPECT_FALSE(ParsePolicySpec("lifetime=always,members").ok());
}

TEST(DefaultPolicies, AreTheThreeSeedPoliciesAndUnbucketed) {
  std::vector<std::string> names;
  for (const PolicySpec& spec : DefaultPolicies()) names.push_back(spec.name);
  EXPECT_EQ(names, (std::vector<std::string>{"always-allocated", "backward-only", "per-group-dedup",
                                             "unbucketed"}));
}

}  // namespace
}  // namespace bucketsim
