// The verdicts of a CI gate: one CheckOutcome per (policy, figure, what it is held to). A budget
// holds a figure to a limit (value <= limit passes); a baseline holds it to the baseline's
// value plus the tolerated growth (shrinkage always passes). Memory figures are compared in
// exact bytes, the step time in microseconds. The outcomes are plain records: the console
// lines and the JUnit XML are written from them by src/report.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/budget.h"
#include "engine/run_result.h"

namespace bucketsim {

enum class Figure { kPeakAllocated, kPeakReserved, kAtMark, kStepTime };

enum class CheckKind {
  kFitsDevice,  // the replay did not run out of --device-memory
  kBudget,      // the figure is within its limit
  kBaseline,    // the figure did not grow beyond the tolerance over the baseline
};

enum class Verdict { kPass, kFail, kSkipped };

// A figure's value: `bytes` for the memory figures, `us` for the step time.
struct Amount {
  Bytes bytes = 0;
  Micros us = 0;
};

struct CheckOutcome {
  std::string policy;
  CheckKind kind = CheckKind::kBudget;
  Figure figure = Figure::kPeakAllocated;
  std::string mark;  // for Figure::kAtMark
  Verdict verdict = Verdict::kPass;
  Amount value;           // the run's figure
  Amount limit;           // kBudget: the budget; kBaseline: the baseline's figure
  Amount allowed_growth;  // kBaseline: what the tolerance allows over the baseline
  std::string tolerance;  // kBaseline: the tolerance as the user wrote it
  std::string skipped_because;
  std::optional<OomEvent> oom;         // kFitsDevice, when it failed
  std::optional<DeviceBudget> device;  // kFitsDevice: the device and what is outside the allocator

  bool is_time() const { return figure == Figure::kStepTime; }
};

// "peak allocated", "peak reserved", "allocated at mark 'after fwd'", "step time".
std::string FigureName(Figure figure, const std::string& mark);

// The device check of a replay on its device (RunResult::device, which must be set:
// --device-memory): fails with the OOM when the policy did not fit; `limit` is the device's
// capacity and `value` the peak reserved plus the memory outside the caching allocator (the
// CUDA context and NCCL's buffers), never above the limit when it fit, since the allocator's
// capacity is the rest.
CheckOutcome CheckFitsDevice(const RunResult& run);

// One outcome per budget of `budget`, in the order peak allocated, peak reserved, marks (in
// the budget's order), step time. A mark that never occurs in the run, or a step time budget
// for a run without one (no iterations), cannot be checked: that is an error, not a pass.
Result<std::vector<CheckOutcome>> CheckBudget(const PolicyFigures& run, const PolicyBudget& budget);

// One outcome per figure present in both the run and the baseline: peaks, each mark, the step
// time. No baseline for the policy (null), or a baseline whose figures stop at an OOM: one
// skipped outcome that says so.
std::vector<CheckOutcome> CheckBaseline(const PolicyFigures& run, const PolicyFigures* baseline,
                                        const Tolerance& tolerance);

}  // namespace bucketsim
