#include "report/framework_table.h"

#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "policy/policy_spec.h"

namespace bucketsim {
namespace {

// The spec a run replayed: its canonical form parses back (PolicySpec::Canonical).
std::optional<PolicySpec> SpecOf(const RunResult& run) {
  Result<PolicySpec> spec = ParsePolicySpec(run.canonical);
  if (!spec.ok()) return std::nullopt;
  return *spec;
}

// The replay's own setting (a trace's fsdp_setting for its implementation's policy); a run read
// back from a report has none, so its canonical spec says it.
std::string SettingOf(const RunResult& run, const std::optional<PolicySpec>& spec) {
  if (!run.setting.empty()) return run.setting;
  return spec ? FrameworkSetting(*spec, run.bucket_cap_mb) : run.canonical;
}

Bytes At(const CategoryBytes& by_category, Category category) {
  return by_category[static_cast<std::size_t>(category)];
}

}  // namespace

bool SpansFrameworks(const std::vector<RunResult>& runs) {
  std::set<std::string_view> names;
  for (const RunResult& run : runs) {
    if (std::optional<PolicySpec> spec = SpecOf(run)) names.insert(FrameworkName(*spec));
  }
  return names.size() > 1;
}

Table BuildFrameworkTable(const std::vector<RunResult>& runs, ByteUnit unit) {
  Table table;
  const std::string_view u = unit.name;
  table.headers = {"policy",
                   "framework",
                   "setting",
                   fmt::format("peak alloc ({})", u),
                   fmt::format("peak reserved ({})", u),
                   fmt::format("reduce buffers@peak ({})", u),
                   "collectives",
                   fmt::format("sent ({})", u)};
  table.right_aligned = {false, false, false, true, true, true, false, true};
  table.wrapped = {true, false, true, false, false, false, true, false};
  for (const RunResult& run : runs) {
    std::optional<PolicySpec> spec = SpecOf(run);
    // From the summary, which every replay keeps (the full log only with --full-log).
    std::map<std::string_view, std::uint64_t> kinds;
    for (const PhaseCollectives& phase : run.collective_summary.phases()) {
      for (int k = 0; k < kNumCollectiveKinds; ++k) {
        const std::uint64_t count = phase.by_kind[static_cast<std::size_t>(k)].count;
        if (count > 0) kinds[CollectiveKindName(static_cast<CollectiveKind>(k))] += count;
      }
    }
    const Bytes sent = run.collective_summary.totals().bytes;
    std::string collectives;
    for (const auto& [kind, count] : kinds) {
      collectives += fmt::format("{}{} {}", collectives.empty() ? "" : ", ", count, kind);
    }
    const CategoryBytes& at_peak = run.peak.by_category;
    table.rows.push_back(
        {run.policy, spec ? std::string(FrameworkName(*spec)) : std::string("?"),
         SettingOf(run, spec), InUnit(run.peak.allocated_bytes, unit),
         InUnit(run.peak.reserved_bytes, unit),
         InUnit(At(at_peak, Category::kBucketData) + At(at_peak, Category::kBucketOutput) +
                    At(at_peak, Category::kGradShard),
                unit),
         collectives.empty() ? std::string("none") : collectives, InUnit(sent, unit)});
  }
  return table;
}

}  // namespace bucketsim
