// The sweep as the terminal and the report pages show it: one row per (policy, cap) with how
// many reduce requests the cap buckets, peak memory, predicted step time and exposed
// communication, the Pareto-optimal rows marked and the chosen ones named; then the advice in
// sentences a reviewer can check against the table: what each cap buckets, the knee, the budget
// answer, the ties and the exact setting to use.
#pragma once

#include <string>
#include <vector>

#include "engine/sweep_summary.h"
#include "report/console_table.h"

namespace bucketsim {

// The points the table lists: all of them, or after a cap search (which replays many) the
// Pareto-optimal ones, the chosen ones, their ties and runners-up, and the unbucketed ones.
std::vector<std::size_t> SweepTableRows(const SweepSection& sweep);

// A page shows a sweep of more configurations than this by its Pareto-optimal rows
// (BuildParetoSweepTable), the full table folded below them.
inline constexpr std::size_t kFoldSweepTableAbove = 8;

// Columns: policy, cap, requests bucketed, peak allocated, peak reserved, step time, exposed
// communication, Pareto, with a budget whether the point fits it, and what was chosen. Memory in
// `unit`, caps in MiB.
Table BuildSweepTable(const SweepSection& sweep, ByteUnit unit = kMiBUnit);
// The rows of BuildSweepTable whose points are Pareto-optimal.
Table BuildParetoSweepTable(const SweepSection& sweep, ByteUnit unit = kMiBUnit);

// The paragraphs under the table, in order: the search, the caps that bucket nothing or only
// some requests, the knee, the budget answer, and the setting to use for the recommendation.
// SweepFindings, then SweepRecommendation: a page shows the recommendation at its top.
std::vector<std::string> SweepAdvice(const SweepSection& sweep, ByteUnit unit = kMiBUnit);
// What the sweep found: the search, the caps that bucket nothing or only some requests and,
// with a budget (whose answer is the recommendation), the knee.
std::vector<std::string> SweepFindings(const SweepSection& sweep, ByteUnit unit = kMiBUnit);
// The recommendation: the budget's answer (what is the least that would fit when nothing does),
// else the knee; then the setting to use for it. Also a comparison's, made from its runs as the
// points of a sweep (report/run_selection.h ChoicesOf).
std::vector<std::string> SweepRecommendation(const SweepSection& sweep, ByteUnit unit = kMiBUnit);
// "Recommended: backward-only at cap 25 MiB, the fastest configuration that fits the budget of
// 256.00 MiB." (or "..., the least peak reserved memory within 1% of the fastest step."); ""
// when nothing is recommended.
std::string RecommendationHeadline(const SweepSection& sweep, ByteUnit unit = kMiBUnit);

// "budget 40.00 MiB: fastest that fits is backward-only at cap 25 MiB (...); against the
// runner-up ... it uses X MiB more/less and is Y ms faster", or what is the least that would fit.
std::string DescribeBudget(const std::vector<SweepPoint>& points, const BudgetAnswer& answer,
                           ByteUnit unit = kMiBUnit);

// Several traces swept with one --budget (`sweep TRACE...`): the configurations (a policy at a
// cap) that fit it on every trace, in the first trace's order, and whether the fastest that fits
// is the same one on all of them. "" without a budget or with fewer than two sweeps. `traces[i]`
// names sweeps[i].
std::string DescribeBudgetAcrossTraces(const std::vector<std::string>& traces,
                                       const std::vector<const SweepSection*>& sweeps,
                                       ByteUnit unit = kMiBUnit);

}  // namespace bucketsim
