// Which caps `sweep --bucket-cap-mb auto` (or a range A..B) replays, round by round. Figures
// change with the cap in steps: a request starts to be bucketed at its threshold
// (engine/cap_thresholds.h), and the flushes change where a bucket's shard size passes a sum of
// consecutive requests. The first round tries every threshold in the range, a geometric grid
// across it and its ends; each further round tries caps between a chosen configuration (the
// knee, the budget's choice) and its neighbours of the same policy where their figures differ,
// until no new cap is left. Caps are written with three significant digits, rounded up (a
// threshold rounded up still buckets its request), so that the setting printed is one a user
// types and the search ends.
#pragma once

#include <set>
#include <vector>

#include "engine/cap_thresholds.h"
#include "engine/sweep_summary.h"

namespace bucketsim {

inline constexpr int kCapSearchDigits = 3;
inline constexpr int kCapSearchGridPoints = 12;
inline constexpr std::size_t kCapSearchMaxThresholds = 24;
inline constexpr int kCapSearchRefinePoints = 3;  // per interval and round
inline constexpr int kCapSearchMaxRounds = 6;

struct CapRange {
  double from_mb = 0;
  double to_mb = 0;
};

// The least number >= cap_mb with `digits` significant decimal digits (cap_mb > 0).
double RoundCapUp(double cap_mb, int digits = kCapSearchDigits);

// `auto`: from the least cap that buckets anything to the cap whose bucket holds a whole
// backward; unset when the trace has no reduce requests.
std::optional<CapRange> AutoCapRange(const CapThresholds& thresholds);

// The first round: the thresholds inside the range (at most kCapSearchMaxThresholds, spread
// evenly over them), kCapSearchGridPoints geometric steps, and the ends; ascending, distinct.
std::vector<double> InitialSearchCaps(const CapThresholds& thresholds, CapRange range);

// The next round: between each of `chosen` (indices into `points`; a cap <= 0 is skipped) and
// the nearest tried cap of the same policy below and above it, when their figures differ,
// kCapSearchRefinePoints geometric steps; caps in `tried` or outside the range left out.
std::vector<double> RefineSearchCaps(const std::vector<SweepPoint>& points,
                                     const std::vector<std::size_t>& chosen,
                                     const std::set<double>& tried, CapRange range);

}  // namespace bucketsim
