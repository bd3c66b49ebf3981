// What a CI gate (`bucketsim check`) holds a policy's replay to: a budget (limits on the peak
// of allocated and of reserved memory, on the memory at named marks and on the step time), and
// the figures of a baseline run with the growth it tolerates. The figures of a run and of a
// baseline report are the same struct, so that both are measured by the same rules: a mark's
// figure is its largest allocated value over all iterations. Plain values; reading them from
// files is io's business (io/budget_file.h, report/report_reader.h), judging them budget_check's.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "engine/run_result.h"

namespace bucketsim {

struct PolicyBudget {
  std::optional<Bytes> max_peak_allocated_bytes;
  std::optional<Bytes> max_peak_reserved_bytes;
  std::vector<std::pair<std::string, Bytes>> max_at_mark_bytes;  // (mark name, limit), in order
  std::optional<Micros> max_step_time_us;

  bool empty() const;
  // Budgets of `over` replace this one's of the same kind: a peak limit the peak limit, a mark's
  // limit that mark's limit, the step time limit the step time limit. The rest is kept.
  void OverrideWith(const PolicyBudget& over);
  // Sets (or replaces) the limit at one mark.
  void SetMark(std::string_view mark, Bytes limit);
};

// The figures a gate looks at, of a replay or of a baseline report's policy.
struct PolicyFigures {
  std::string policy;
  Bytes peak_allocated_bytes = 0;
  Bytes peak_reserved_bytes = 0;
  std::vector<std::pair<std::string, Bytes>> mark_bytes;  // largest allocated per mark name
  std::optional<Micros> step_time_us;  // timing.step_time_us; none without timed iterations
  bool out_of_memory = false;          // the figures stop at an OOM

  // One sample of a mark: the mark's figure is the largest of its samples.
  void AddMarkSample(std::string_view name, Bytes allocated_bytes);
  std::optional<Bytes> AtMark(std::string_view name) const;
};

PolicyFigures FiguresOf(const RunResult& run);

// How much a figure may grow over its baseline: the larger of a fraction of the baseline and
// an absolute amount of bytes (which does not apply to the step time). Zero: no growth.
struct Tolerance {
  double relative = 0;  // 0.02 for "2%"
  Bytes absolute_bytes = 0;

  Bytes AllowedGrowth(Bytes baseline) const;
  Micros AllowedGrowth(Micros baseline) const;
  // "2%", "+1MiB" or both combined as "2%,+1MiB" (the form the user gave, for messages).
  std::string text;
};

// Parses one --tolerance value: "N%" (a percentage, N >= 0) or "+SIZE" (bytes). A bare
// number is refused: "0.02" and "2" would both be read as something the user did not mean.
// Adds to `tolerance`, so that a percentage and an absolute amount can be given together.
Status ParseTolerance(std::string_view text, Tolerance& tolerance);

}  // namespace bucketsim
