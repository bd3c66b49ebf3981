// `tune`: a model program emitted and replayed in every combination of the values of the flags
// it varies (`--vary batch-size=2,4,8 --vary checkpoint=none,Block`), one point per
// configuration, and the answer to the question people tune for: the largest batch size that
// fits (when the batch size is varied), else the fastest configuration that fits; where nothing
// fits, the one that comes closest. Plain values; `bucketsim tune` runs the grid and the
// reporters (report/tune_report.h) format it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "engine/sweep_summary.h"
#include "memory/device_overhead.h"

namespace bucketsim {

// One varied flag (without its dashes) and its values, as given.
struct TuneAxis {
  std::string flag;
  std::vector<std::string> values;
};

// "FLAG=V1,V2,...": the flag and its values (none empty, none twice). A flag's dashes are
// optional ("--batch-size=2,4" reads as "batch-size=2,4").
Result<TuneAxis> ParseTuneAxis(std::string_view spec);

// The flags whose values are sizes of the batch (positive integers), in the order the advice
// asks for the largest that fits: the batch size, then the sequence length.
inline constexpr std::string_view kBatchSizeFlag = "batch-size";
inline constexpr std::string_view kSeqLenFlag = "seq-len";
inline constexpr std::array<std::string_view, 2> kSizeFlags = {kBatchSizeFlag, kSeqLenFlag};
inline bool IsSizeFlag(std::string_view flag) {
  return flag == kBatchSizeFlag || flag == kSeqLenFlag;
}
// A batch size as --vary and --batch-size give it: an integer of at least 1; unset otherwise.
std::optional<std::uint64_t> ParseBatchSize(std::string_view text);

// One configuration: each axis's value, in the axes' order.
using TuneSettings = std::vector<std::pair<std::string, std::string>>;

// Every combination of the axes' values, the first axis slowest (no axes: one configuration,
// with no settings).
std::vector<TuneSettings> TuneGrid(const std::vector<TuneAxis>& axes);

struct TunePoint {
  TuneSettings settings;
  SweepPoint figures;  // its replay (engine/sweep_summary.h); `pareto` marked over the grid
  // --device-memory: the device and what of it was outside the allocator (the estimate depends
  // on the communicators: a varied world size changes it); none without a device.
  std::optional<DeviceBudget> device;
};

// Whether a point fits: it did not run out of --device-memory, and its peak reserved is within
// the budget, if there is one.
bool TuneFits(const TunePoint& point, std::optional<Bytes> budget_bytes);

struct TuneAdvice {
  // The size flag the answer is the largest fitting value of: batch-size where it is varied,
  // else seq-len where that is; empty: neither is varied.
  std::string by;
  // What to run: of the configurations that fit (at the largest value of `by` that fits, when
  // there is one), the fastest, then the one with the least peak reserved, then the first in
  // grid order. Unset: nothing fits.
  std::optional<std::size_t> chosen;
  // By a size: the next larger value of it tried, at which nothing fits; unset when the chosen
  // one is at the largest value tried.
  std::optional<std::uint64_t> next;
  // Nothing fits: the configuration with the least peak reserved (one that did not run out of
  // memory first).
  std::optional<std::size_t> closest;
};

// Marks the Pareto set of the grid: no other point has both less (or the same) peak reserved
// and less (or the same) time per unit of work, and one of them less. Time per unit of work is
// the step time divided by the batch size and the sequence length where they are varied (a
// larger batch takes longer for more work), the step time otherwise. A point that ran out of
// memory is in no Pareto set.
void MarkTunePareto(std::vector<TunePoint>& points);

// The advice over `points` (one per configuration of the grid).
TuneAdvice AdviseTune(const std::vector<TunePoint>& points, std::optional<Bytes> budget_bytes);

}  // namespace bucketsim
