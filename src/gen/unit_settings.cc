#include "gen/unit_settings.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/closest_name.h"
#include "core/comma_list.h"
#include "gen/fsdp_impl_options.h"

namespace bucketsim {
namespace {

// Instances named in a message about a wrong name: enough to recognise the pattern.
constexpr std::size_t kNamesListed = 8;

// The units in the order the forward gathers them (each once), the root first.
std::vector<std::size_t> GatherOrder(const ModelProgram& program) {
  std::vector<std::size_t> order;
  for (const ForwardOp& op : program.forward) {
    if (op.kind == OpKind::kGather &&
        std::find(order.begin(), order.end(), op.instance) == order.end()) {
      order.push_back(op.instance);
    }
  }
  return order;
}

std::vector<std::string> InstanceNames(const ModelProgram& program) {
  std::vector<std::string> names;
  for (const FsdpUnit& instance : program.units) names.push_back(instance.name);
  return names;
}

// "root (embedding), blocks.0, ..., last (head)": what a selector may be.
std::string DescribeUnits(const ModelProgram& program, std::optional<std::size_t> last) {
  std::vector<std::string> names = InstanceNames(program);
  std::vector<std::string> listed;
  for (std::size_t f = 0; f < names.size() && listed.size() < kNamesListed; ++f) {
    listed.push_back(names[f]);
  }
  if (listed.size() < names.size()) listed.push_back("...");
  std::string text = fmt::format("{}", fmt::join(listed, ", "));
  text += fmt::format("; root ({})", names.front());
  if (last) text += fmt::format(", last ({})", names[*last]);
  return text;
}

// The instance `selector` names.
Result<std::size_t> ResolveUnit(std::string_view selector, const ModelProgram& program) {
  const std::vector<std::size_t> order = GatherOrder(program);
  std::optional<std::size_t> last;
  for (std::size_t f : order) {
    if (f != 0) last = f;
  }
  if (selector == "root") return std::size_t{0};
  if (selector == "last") {
    if (!last) return InvalidArgument("the program has no unit but the root");
    return *last;
  }
  const std::vector<std::string> names = InstanceNames(program);
  const auto found = std::find(names.begin(), names.end(), selector);
  if (found != names.end()) return static_cast<std::size_t>(found - names.begin());
  return InvalidArgument(fmt::format("no unit '{}'{}; the units are {}", selector,
                                     DidYouMean(selector, names), DescribeUnits(program, last)));
}

// What `--flag value` sets in a scratch GenOptions: the all-units flag's own parsing.
Result<GenOptions> FlagValue(std::string_view flag, std::string_view value) {
  GenOptions scratch;
  BUCKETSIM_RETURN_IF_ERROR(SetGenOption(scratch, flag, value));
  return scratch;
}

Result<std::vector<std::string>> UnitList(std::string_view value, const ModelProgram& program) {
  std::vector<std::string> units;
  if (value.empty()) return units;
  for (std::string_view name : SplitCommaList(value)) {
    Result<std::size_t> f = ResolveUnit(name, program);
    if (!f.ok()) return f.status();
    units.push_back(program.units[*f].name);
  }
  return units;
}

// KEY=VALUE into `out`.
Status ParseKeyValue(std::string_view key, std::string_view value, const ModelProgram& program,
                     FsdpImpl impl, UnitSettings& out) {
  // A key another implementation takes names it; one no implementation takes, the keys this one
  // does (each implementation's entry lists its keys, gen/fsdp_impl_options.h).
  if (!TakesUnitSetting(impl, key)) {
    const std::string keys = UnitSettingKeys(impl);
    for (const FsdpImplOptions& owner : FsdpImplOptionsTable()) {
      if (!TakesUnitSetting(owner.impl, key)) continue;
      return InvalidArgument(fmt::format(
          "{} is a unit setting of --fsdp-impl {} (this is {}{})", key, FsdpImplName(owner.impl),
          FsdpImplName(impl), keys.empty() ? ", which has none" : fmt::format(": {}", keys)));
    }
    return InvalidArgument(fmt::format("no unit setting '{}' ({} takes {})", key,
                                       FsdpImplName(impl), keys.empty() ? "none" : keys));
  }
  if (key == "reshard_after_forward") {
    Result<GenOptions> parsed = FlagValue("reshard-after-forward", value);
    if (!parsed.ok()) return parsed.status();
    out.reshard_after_forward =
        UnitSettings::Reshard{parsed->reshard_after_forward, parsed->reshard_after_forward_ranks};
  } else if (key == "backward_prefetch") {
    Result<GenOptions> parsed = FlagValue("backward-prefetch", value);
    if (!parsed.ok()) return parsed.status();
    out.backward_prefetch = parsed->fsdp1.backward_prefetch;
  } else if (key == "modules_to_forward_prefetch" || key == "modules_to_backward_prefetch") {
    Result<std::vector<std::string>> units = UnitList(value, program);
    if (!units.ok()) return units.status();
    (key == "modules_to_forward_prefetch" ? out.modules_to_forward_prefetch
                                          : out.modules_to_backward_prefetch) = *units;
  } else {
    // A key an entry lists that is parsed nowhere here: the table and this function disagree.
    BUCKETSIM_CHECK(false);
  }
  return Status::Ok();
}

}  // namespace

void OverlayUnitSettings(const std::vector<UnitSettingsFor>& units, ModelProgram& program) {
  for (const UnitSettingsFor& entry : units) {
    const std::string& name = entry.first;
    const UnitSettings& unit = entry.second;
    const auto instance =
        std::find_if(program.units.begin(), program.units.end(),
                     [&](const FsdpUnit& candidate) { return candidate.name == name; });
    BUCKETSIM_CHECK(instance != program.units.end());
    UnitSettings& s = instance->settings;
    if (unit.backward_prefetch) s.backward_prefetch = unit.backward_prefetch;
    if (unit.reshard_after_forward) s.reshard_after_forward = unit.reshard_after_forward;
    if (unit.modules_to_forward_prefetch) {
      s.modules_to_forward_prefetch = unit.modules_to_forward_prefetch;
    }
    if (unit.modules_to_backward_prefetch) {
      s.modules_to_backward_prefetch = unit.modules_to_backward_prefetch;
    }
  }
}

bool TakesUnitSetting(FsdpImpl impl, std::string_view key) {
  const std::vector<std::string_view>& keys = OptionsOf(impl).unit_keys;
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::string UnitSettingKeys(FsdpImpl impl) {
  return fmt::format("{}", fmt::join(OptionsOf(impl).unit_keys, ", "));
}

Result<UnitSettingsFor> ParseUnitSetting(std::string_view spec, const ModelProgram& program,
                                         FsdpImpl impl) {
  const auto failed = [&](const Status& why) {
    return InvalidArgument(fmt::format("--unit-setting {}: {}", spec, why.message()));
  };
  const std::size_t colon = spec.find(':');
  const std::size_t equals = spec.find('=', colon == std::string_view::npos ? 0 : colon);
  if (colon == std::string_view::npos || equals == std::string_view::npos || colon == 0) {
    return failed(
        InvalidArgument("expected SELECTOR:KEY=VALUE (SELECTOR a unit's name, root or last; e.g. "
                        "last:reshard_after_forward=false)"));
  }
  Result<std::size_t> unit = ResolveUnit(spec.substr(0, colon), program);
  if (!unit.ok()) return failed(unit.status());
  UnitSettingsFor parsed{program.units[*unit].name, {}};
  const Status set = ParseKeyValue(spec.substr(colon + 1, equals - colon - 1),
                                   spec.substr(equals + 1), program, impl, parsed.second);
  if (!set.ok()) return failed(set);
  return parsed;
}

std::vector<std::string> UnappliedInstanceKeys(const ModelProgram& program,
                                               const GenOptions& options) {
  std::vector<std::string> kept, own;  // instances with reshard_after_forward false, own_group
  for (std::size_t f = 1; f < program.units.size(); ++f) {
    if (!program.units[f].reshard_after_forward) kept.push_back(program.units[f].name);
  }
  for (const FsdpUnit& instance : program.units) {
    if (instance.own_group) own.push_back(instance.name);
  }
  std::vector<std::string> notes;
  const std::string_view impl = FsdpImplName(options.fsdp_impl);
  const FsdpImplOptions& entry = OptionsOf(options.fsdp_impl);
  if (!kept.empty() && entry.instance_reshard_instead) {
    const std::string instead = entry.instance_reshard_instead(kept.front());
    notes.push_back(fmt::format(
        "instance(s) {}: reshard_after_forward false is fairscale's wrapper setting, not "
        "applied under {} ({})",
        fmt::join(kept, ", "), impl, instead));
  }
  if (!own.empty() && (!entry.own_groups || options.group_layout == GroupLayout::kShared ||
                       options.group_layout == GroupLayout::kHsdp)) {
    notes.push_back(fmt::format(
        "instance(s) {}: own_group true is not applied under {} --groups {} (a group of its own "
        "is fairscale's --groups shared-bn-own)",
        fmt::join(own, ", "), impl, GroupLayoutName(options.group_layout)));
  }
  return notes;
}

}  // namespace bucketsim
