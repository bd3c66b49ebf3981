#include "report/run_selection.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/status.h"

namespace bucketsim {
namespace {

bool Contains(const std::vector<std::size_t>& v, std::size_t i) {
  return std::find(v.begin(), v.end(), i) != v.end();
}

std::vector<RunGroup> GroupByPolicy(const std::vector<RunResult>& runs) {
  std::vector<RunGroup> groups;
  std::map<std::string, std::size_t> group_of;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    auto [at, added] = group_of.emplace(runs[i].policy, groups.size());
    if (added) groups.emplace_back();
    groups[at->second].runs.push_back(i);
  }
  return groups;
}

// The recommended run where the group has it, else the group's own knee (the least peak
// reserved within the sweep's tolerance of the group's fastest step), else its first run.
std::size_t ShownRun(const RunGroup& group, const SweepSection& choices) {
  const std::optional<std::size_t> recommended = Recommended(choices);
  if (recommended && Contains(group.runs, *recommended)) return *recommended;
  std::vector<SweepPoint> points;
  for (std::size_t i : group.runs) points.push_back(choices.points[i]);
  const KneeAnswer knee = FindKnee(points, choices.knee.time_tolerance);
  return group.runs[knee.knee.value_or(0)];
}

std::vector<std::size_t> Series(const RunSelection& selection) {
  if (selection.shown.size() <= kDefaultSeries) return selection.shown;
  std::vector<std::size_t> wanted;
  if (std::optional<std::size_t> recommended = Recommended(selection.choices)) {
    wanted.push_back(*recommended);
  }
  wanted.push_back(selection.shown.front());
  for (std::size_t i : selection.shown) {
    if (selection.choices.points[i].pareto) wanted.push_back(i);
  }
  wanted.insert(wanted.end(), selection.shown.begin(), selection.shown.end());
  std::vector<std::size_t> series;
  for (std::size_t i : wanted) {
    if (series.size() < kDefaultSeries && !Contains(series, i)) series.push_back(i);
  }
  std::sort(series.begin(), series.end());
  return series;
}

}  // namespace

bool RunSelection::Folds() const {
  return std::any_of(groups.begin(), groups.end(),
                     [](const RunGroup& group) { return group.runs.size() > 1; });
}

bool RunSelection::IsShown(std::size_t run) const { return Contains(shown, run); }

SweepSection ChoicesOf(const ReportDocument& doc) {
  if (doc.sweep) return *doc.sweep;
  SweepSection section;
  for (std::size_t i = 0; i < doc.runs.size(); ++i) {
    SweepPoint point = SweepPointOf(doc.runs[i]);
    if (i < doc.step_time_us.size()) point.step_time_us = doc.step_time_us[i].value_or(0);
    section.points.push_back(std::move(point));
  }
  MarkPareto(section.points);
  section.knee = FindKnee(section.points, kDefaultTimeTolerance);
  return section;
}

RunSelection SelectRuns(const ReportDocument& doc) {
  RunSelection selection;
  selection.choices = ChoicesOf(doc);
  BUCKETSIM_CHECK(selection.choices.points.size() == doc.runs.size());
  selection.groups = GroupByPolicy(doc.runs);
  for (RunGroup& group : selection.groups) {
    group.shown = ShownRun(group, selection.choices);
    selection.shown.push_back(group.shown);
  }
  std::sort(selection.shown.begin(), selection.shown.end());
  selection.series = Series(selection);
  return selection;
}

Table ShownRows(const Table& per_run, const ReportDocument& doc, const RunSelection& selection,
                std::size_t cap_column, bool has_cap_column) {
  BUCKETSIM_CHECK(per_run.rows.size() == doc.runs.size());
  Table table = per_run;
  if (!has_cap_column) {
    auto at = [cap_column](auto& v) { return v.begin() + static_cast<std::ptrdiff_t>(cap_column); };
    table.headers.insert(at(table.headers), "cap (MiB)");
    table.right_aligned.insert(at(table.right_aligned), false);
    // "25 (of 17 caps, 1 to 778)" breaks at its spaces.
    table.wrapped.resize(per_run.headers.size());
    table.wrapped.insert(at(table.wrapped), true);
  }
  table.rows.clear();
  for (std::size_t shown : selection.shown) {
    const RunGroup& group = *std::find_if(selection.groups.begin(), selection.groups.end(),
                                          [shown](const RunGroup& g) { return g.shown == shown; });
    std::vector<std::string> row = per_run.rows[shown];
    const std::string caps = GroupCaps(doc, group);
    if (has_cap_column) {
      row[cap_column] = caps;
    } else {
      row.insert(row.begin() + static_cast<std::ptrdiff_t>(cap_column), caps);
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

std::string GroupCaps(const ReportDocument& doc, const RunGroup& group) {
  std::set<double> caps;
  for (std::size_t i : group.runs) caps.insert(doc.runs[i].bucket_cap_mb);
  const std::string shown = fmt::format("{:g}", doc.runs[group.shown].bucket_cap_mb);
  if (caps.size() == 1) return shown;
  return fmt::format("{} (of {} caps, {:g} to {:g})", shown, caps.size(), *caps.begin(),
                     *caps.rbegin());
}

}  // namespace bucketsim
