// Which runs of a report a page shows up front. A sweep replays each policy at many caps: a page
// of fifty near-identical table rows, per-run sections and chart lines reads as none. So runs
// that differ only in the cap (the same policy as named) make one group, shown by one of its
// runs, and a line chart draws a handful of runs; the page keeps the rest folded beside them,
// so every figure stays on it. The runs shown follow the advice (sweep_summary.h): the
// recommended run stands for its policy, and each other policy is shown at its own knee.
// html_report.h, markdown_report.h and report_charts.h all select with SelectRuns, so a table,
// its chart and its section show the same runs.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "engine/sweep_summary.h"
#include "report/console_table.h"
#include "report/report_document.h"

namespace bucketsim {

// At most this many runs are lines of a chart by default (SelectRuns' `series`).
inline constexpr std::size_t kDefaultSeries = 6;

// The runs of one policy as named (RunResult::policy), at their caps.
struct RunGroup {
  std::vector<std::size_t> runs;  // indexes into ReportDocument::runs, in page order
  std::size_t shown = 0;          // the run that stands for the group (one of `runs`)
};

struct RunSelection {
  // What the page recommends from: the sweep's own section, or a comparison's (ChoicesOf).
  SweepSection choices;
  // One group per policy, in the order of their first runs.
  std::vector<RunGroup> groups;
  // Each group's shown run, in page order: the rows, bars and sections shown up front.
  std::vector<std::size_t> shown;
  // The runs a line chart draws by default, in page order: every shown run when there are at
  // most kDefaultSeries, else the recommended run, the first run (the first policy given), the
  // Pareto-optimal ones and then the others in page order, up to kDefaultSeries.
  std::vector<std::size_t> series;

  // Whether some run is not shown up front (a group of several runs).
  bool Folds() const;
  bool IsShown(std::size_t run) const;
};

// The page's choices: a sweep's section as it was decided, or for a comparison its runs as the
// points of a sweep with no budget (the Pareto set marked, the knee at the default tolerance),
// each run's step time the one the report states (ReportDocument::step_time_us).
SweepSection ChoicesOf(const ReportDocument& doc);

RunSelection SelectRuns(const ReportDocument& doc);

// The caps of a group, for a table cell: the shown run's, and the others' range: "25" for one
// run, "25 (of 17 caps, 1 to 778)" for several.
std::string GroupCaps(const ReportDocument& doc, const RunGroup& group);

// A table of one row per run (rows[i] is doc.runs[i]) cut to one row per group, its shown run's,
// in page order, with column `cap_column` ("cap (MiB)") saying what each row stands for
// (GroupCaps); a table without a cap column (`has_cap_column` false) gets one inserted there.
Table ShownRows(const Table& per_run, const ReportDocument& doc, const RunSelection& selection,
                std::size_t cap_column, bool has_cap_column);

}  // namespace bucketsim
