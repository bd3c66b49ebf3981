#include "policy/policy_spec.h"

#include <array>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "core/closest_name.h"

namespace bucketsim {
namespace {

struct Preset {
  std::string_view name;
  Lifetime lifetime;
  KeyMode key;
  std::optional<double> cap_mb;
};

constexpr std::array<Preset, 4> kPresets = {{
    {"always-allocated", Lifetime::kAlways, KeyMode::kIdentity, std::nullopt},
    {"backward-only", Lifetime::kBackward, KeyMode::kIdentity, std::nullopt},
    {"per-group-dedup", Lifetime::kBackward, KeyMode::kMembers, std::nullopt},
    {"unbucketed", Lifetime::kBackward, KeyMode::kIdentity, 0.0},
}};

Status SetPart(PolicySpec& spec, std::string_view key, std::string_view value) {
  if (key == "lifetime") {
    if (value == "always")
      spec.lifetime = Lifetime::kAlways;
    else if (value == "backward")
      spec.lifetime = Lifetime::kBackward;
    else
      return InvalidArgument(fmt::format("policy: lifetime '{}' is not always|backward{}", value,
                                         DidYouMean(value, {"always", "backward"})));
    return Status::Ok();
  }
  if (key == "key") {
    if (value == "identity")
      spec.key = KeyMode::kIdentity;
    else if (value == "members")
      spec.key = KeyMode::kMembers;
    else
      return InvalidArgument(fmt::format("policy: key '{}' is not identity|members{}", value,
                                         DidYouMean(value, {"identity", "members"})));
    return Status::Ok();
  }
  if (key == "cap") {
    double cap = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), cap);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size() ||
        !std::isfinite(cap)) {
      return InvalidArgument(fmt::format(
          "policy: cap '{}' is not a number: cap= takes MiB as a plain number (e.g. cap=25)",
          value));
    }
    spec.cap_mb = cap;
    return Status::Ok();
  }
  return InvalidArgument(
      fmt::format("policy: unknown part '{}'{} (expected lifetime=, key= or cap=)", key,
                  DidYouMean(key, {"lifetime", "key", "cap"})));
}

}  // namespace

std::string PolicySpec::Canonical(double resolved_cap_mb) const {
  return fmt::format("lifetime={},key={},cap={}",
                     lifetime == Lifetime::kAlways ? "always" : "backward",
                     key == KeyMode::kIdentity ? "identity" : "members", resolved_cap_mb);
}

Result<PolicySpec> ParsePolicySpec(std::string_view text) {
  for (const Preset& preset : kPresets) {
    if (text == preset.name) {
      return PolicySpec{std::string(text), preset.lifetime, preset.key, preset.cap_mb};
    }
  }
  if (text.find('=') == std::string_view::npos) {
    std::vector<std::string> names;
    for (const Preset& preset : kPresets) names.emplace_back(preset.name);
    return InvalidArgument(fmt::format("unknown policy '{}'{} (known: {})", text,
                                       DidYouMean(text, names), PolicyNamesHelp()));
  }
  PolicySpec spec;
  spec.name = std::string(text);
  std::string_view rest = text;
  while (!rest.empty()) {
    std::size_t comma = rest.find(',');
    std::string_view part = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    std::size_t eq = part.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument(fmt::format("policy '{}': part '{}' is not key=value", text, part));
    }
    BUCKETSIM_RETURN_IF_ERROR(SetPart(spec, part.substr(0, eq), part.substr(eq + 1)));
  }
  return spec;
}

std::vector<PolicySpec> DefaultPolicies() {
  std::vector<PolicySpec> specs;
  for (const Preset& preset : kPresets) {
    specs.push_back({std::string(preset.name), preset.lifetime, preset.key, preset.cap_mb});
  }
  return specs;
}

std::string PolicyNamesHelp() {
  std::string names;
  for (const Preset& preset : kPresets) names += fmt::format("{}, ", preset.name);
  return names + "or lifetime=always|backward,key=identity|members,cap=MiB";
}

}  // namespace bucketsim
