// The implementations' table (gen/fsdp_impl_options.h): one entry per implementation, each one's
// flags its own (refused under every other implementation, whatever a later implementation
// adds), its defaults applied whatever the flags' order, its unit settings its own.
#include "gen/fsdp_impl_options.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include <fmt/format.h>

#include "gen/unit_settings.h"

namespace bucketsim {
namespace {

// A value of `param` other than its default, as a user would type it.
std::string AnotherValue(const PresetParam& param) {
  const std::string now = param.get();
  switch (param.kind) {
    case ParamKind::kInt:
    case ParamKind::kNumber:
      return now == "1" ? "2" : "1";
    case ParamKind::kBool:
      return now == "true" ? "false" : "true";
    case ParamKind::kChoice:
      for (const std::string& choice : param.choices) {
        if (choice != now && choice != "N") return choice;
      }
  }
  return now;
}

TEST(FsdpImplOptions, OneEntryPerImplementationInTheEnumsOrder) {
  ASSERT_EQ(FsdpImplOptionsTable().size(), FsdpImpls().size());
  for (const FsdpImplInfo& info : FsdpImpls()) {
    EXPECT_EQ(OptionsOf(info.impl).impl, info.impl) << info.name;
  }
}

TEST(FsdpImplOptions, EachImplementationsFlagsAreRefusedUnderEveryOther) {
  std::set<std::string> seen;
  for (const FsdpImplOptions& owner : FsdpImplOptionsTable()) {
    GenOptions scratch;
    for (const PresetParam& param : owner.params(scratch)) {
      EXPECT_TRUE(seen.insert(param.name).second) << "--" << param.name << " listed twice";
      for (const FsdpImplOptions& other : FsdpImplOptionsTable()) {
        if (other.impl == owner.impl) continue;  // its own rules may take or refuse the value
        GenOptions options;
        ASSERT_TRUE(SetGenOption(options, "fsdp-impl", FsdpImplName(other.impl)).ok());
        const std::string value = AnotherValue(param);
        ASSERT_TRUE(SetGenOption(options, param.name, value).ok()) << param.name << " " << value;
        const Status status = ValidateGenOptions(options);
        ASSERT_FALSE(status.ok()) << "--" << param.name << " " << value << " under "
                                  << FsdpImplName(other.impl);
        EXPECT_NE(status.message().find(std::string("--") + param.name), std::string::npos)
            << status.message();
        EXPECT_NE(status.message().find(FsdpImplName(owner.impl)), std::string::npos)
            << status.message();
      }
    }
  }
  // Every --list entry is a shared option or exactly one implementation's.
  GenOptions options;
  std::set<std::string> all;
  for (const PresetParam& param : GenOptionParams(options)) {
    EXPECT_TRUE(all.insert(param.name).second) << "--" << param.name << " twice";
  }
  for (const std::string& name : seen) EXPECT_EQ(all.count(name), 1u) << name;
}

TEST(FsdpImplOptions, AnImplementationsDefaultsApplyWhateverTheFlagsOrder) {
  for (const FsdpImplOptions& entry : FsdpImplOptionsTable()) {
    GenOptions options;
    ASSERT_TRUE(SetGenOption(options, "fsdp-impl", FsdpImplName(entry.impl)).ok());
    EXPECT_EQ(options.compute_dtype, entry.compute_dtype);
    EXPECT_EQ(options.group_layout, entry.group_layout);
    EXPECT_EQ(options.optimizer_impl, entry.optimizer_impl);
    // A flag given before --fsdp-impl stays.
    GenOptions given;
    ASSERT_TRUE(SetGenOption(given, "param-dtype", "fp16").ok());
    ASSERT_TRUE(SetGenOption(given, "optimizer-impl", "fused").ok());
    ASSERT_TRUE(SetGenOption(given, "fsdp-impl", FsdpImplName(entry.impl)).ok());
    EXPECT_EQ(given.compute_dtype, DType::kFloat16);
    EXPECT_EQ(given.optimizer_impl, OptimizerImpl::kFused);
  }
}

TEST(FsdpImplOptions, AUnitSettingOfAnotherImplementationNamesItsOwner) {
  for (const FsdpImplOptions& owner : FsdpImplOptionsTable()) {
    for (std::string_view key : owner.unit_keys) {
      for (const FsdpImplOptions& other : FsdpImplOptionsTable()) {
        if (other.impl == owner.impl) continue;
        ModelProgram program;
        program.units.resize(1);
        program.units[0].name = "root";
        const std::string spec = fmt::format("root:{}=x", key);
        Result<UnitSettingsFor> parsed = ParseUnitSetting(spec, program, other.impl);
        ASSERT_FALSE(parsed.ok()) << spec;
        EXPECT_NE(parsed.status().message().find(fmt::format(
                      "{} is a unit setting of --fsdp-impl {}", key, FsdpImplName(owner.impl))),
                  std::string::npos)
            << parsed.status().message();
      }
    }
  }
}

}  // namespace
}  // namespace bucketsim
