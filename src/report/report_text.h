// The sentences and lists the Markdown and HTML reports share, as plain text (each renderer
// escapes for its format), so the two documents never disagree about a figure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "report/byte_unit.h"
#include "report/report_document.h"
#include "report/run_selection.h"

namespace bucketsim {

// Under a sweep table: what its "pareto" column means.
inline constexpr std::string_view kSweepParetoNote =
    "* Pareto-optimal: no other configuration has both less peak reserved memory and a shorter "
    "step.";
// In place of the memory-over-time chart of a report without a timeline.
inline constexpr std::string_view kNoTimelineNote =
    "This report has no memory timeline (written by an older bucketsim): no memory-over-time "
    "chart.";

// Under the recommendation of a sim replay without --profile (as under `sweep`'s table).
inline constexpr std::string_view kNoProfileNote =
    "No --profile: copies and collectives cost nothing, so step times are compute alone.";

// The recommendation at the top of a page: the headline naming the run to use, then the
// paragraphs that make the case and give its setting (sweep_report.h SweepRecommendation), and
// for a sim replay without a time profile kNoProfileNote. Empty for a page of one run.
struct Recommendation {
  std::string headline;  // empty when nothing is recommended (nothing fits the budget)
  std::vector<std::string> paragraphs;
  bool empty() const { return headline.empty() && paragraphs.empty(); }
};
// `choices`: the page's (report/run_selection.h ChoicesOf).
Recommendation RecommendationOf(const ReportDocument& doc, const SweepSection& choices,
                                ByteUnit unit = kMiBUnit);

// Several sweeps on one page (`sweep TRACE...`) with a budget: what fits it on every trace
// (sweep_report.h DescribeBudgetAcrossTraces); "" for any other page.
std::string AcrossDocumentsText(const std::vector<ReportDocument>& docs, ByteUnit unit);

// Which run of each policy a page shows up front (RunSelection::shown): "the recommended run,
// and each other policy at its own knee (the least peak reserved within 1% of its fastest
// step)".
std::string ShownRunsText(const RunSelection& selection);

// "World size 8, rank 0, 26 FSDP instances, ... memory model caching, backend sim."
std::string TraceSummaryText(const ReportDocument& doc);
// "Peak 3.11 MiB allocated at event 27 (iteration 1, backward); peak reserved 4.00 MiB."
std::string PeakText(const RunResult& run, ByteUnit unit = kMiBUnit);
// Where reserved-but-unallocated memory sat at the peak; unset under the exact model.
std::optional<std::string> FragmentationText(const RunResult& run, ByteUnit unit = kMiBUnit);
// The context block as (label, value) pairs; values empty in the report are left out.
std::vector<std::pair<std::string, std::string>> ContextItems(const ReportDocument& doc);
// "backward-only @ 25 MiB": a policy at one bucket cap (a sweep replays a policy at several caps);
// without the cap when it is <= 0 (unbucketed).
std::string PolicyAtCap(std::string_view policy, double bucket_cap_mb);
// The name of runs[i] in a chart: its policy, and its cap when another run has the same policy.
std::string RunLabel(const std::vector<RunResult>& runs, std::size_t i);
// The heading of one document: the trace's name and the memory model.
std::string DocumentTitle(const ReportDocument& doc);
// What the measured-against-predicted table shows: the profile, and the step time's error range.
std::string PredictionText(const std::vector<PredictionRow>& rows);

}  // namespace bucketsim
