// What `bucketsim tune` prints and writes: one row per configuration of the grid (the varied
// flags' values, peak allocated and reserved, whether it fits, step time, Pareto), the advice
// (engine/tune_grid.h) as a paragraph with the exact `gen program` command of the chosen
// configuration, as text for the terminal, JSON (reports/tune-v1.schema.json) and a
// self-contained HTML page.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "engine/tune_grid.h"
#include "memory/device_overhead.h"
#include "report/console_table.h"
#include "report/report_context.h"

namespace bucketsim {

struct TuneReport {
  std::string program;  // the model program's path, as given
  std::vector<std::string>
      fixed;  // the flags every configuration has, as given ("--world-size 64")
  std::vector<TuneAxis> axes;
  std::string policy;        // the bucket policy every configuration replays under
  std::string time_profile;  // the sim's time profile, by its name ("none": compute alone)
  // Where times are an estimate from a GPU's published rates (--gpu), what they rest on
  // (EstimateText); empty otherwise.
  std::string time_estimate;
  std::optional<Bytes> budget_bytes;  // --budget: peak reserved
  std::vector<TunePoint> points;      // one per configuration, in grid order
  TuneAdvice advice;
};

// The grid as a table: one column per axis, then peak allocated and reserved (in the unit of
// the smallest peak), fits (with a budget or a device), step time and Pareto.
Table BuildTuneTable(const TuneReport& report);
// The `gen program` command of one configuration: the program, the fixed flags, its settings.
std::string TuneCommand(const TuneReport& report, std::size_t point);
// The advice: "The largest batch size that fits 80.00 GiB of device memory is 12: ... To emit
// it: bucketsim gen program ...", or the fastest that fits, or what comes closest.
std::string TuneAdviceText(const TuneReport& report);
// The header line, the table (split to `width`, 0: whole) and the advice.
std::string TuneText(const TuneReport& report, std::size_t width);
// {"schema_version": 1, "kind": "tune", "context", "program", "fixed", "axes", "policy",
// "budget_bytes"?, "device"?, "configurations": [...], "advice": {...}}, with a final newline.
std::string TuneJson(const TuneReport& report, const ReportContext& context);
// A self-contained page: the advice first, then the table.
std::string TuneHtml(const TuneReport& report, const ReportContext& context);

}  // namespace bucketsim
