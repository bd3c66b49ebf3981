// The sweep as the terminal and the report pages show it: one row per (policy, cap) with peak
// memory, predicted step time and exposed communication, the Pareto-optimal rows marked, and the
// budget answer in words.
#pragma once

#include <string>
#include <vector>

#include "engine/sweep_summary.h"
#include "report/console_table.h"

namespace bucketsim {

// Columns: policy, cap, peak allocated, peak reserved, step time, exposed communication, Pareto,
// and with a budget whether the point fits it. The terminal, Markdown and HTML show this table.
Table BuildSweepTable(const SweepSection& sweep);

// "fastest within 40.00 MiB: backward-only cap 25 MiB (...); against the runner-up ... it uses
// X MiB more/less and is Y ms faster", or what is the least that would fit.
std::string DescribeBudget(const std::vector<SweepPoint>& points, const BudgetAnswer& answer);

}  // namespace bucketsim
