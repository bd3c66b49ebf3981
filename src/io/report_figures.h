// Reads back what a CI gate compares against from a JSON report that bucketsim wrote
// (`compare --json`, `check --json`; reports/README.md): per policy its peaks, its mark samples,
// its step time (`timing.step_time_us`; reports before it was added lack it) and whether it ran out
// of memory; and from the context block the memory model and the trace digest, which tell whether a
// run is comparable with it. Only those fields are read, each checked; every message names the file
// and the JSON pointer of the bad field. `schema_version` must be one this bucketsim writes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/budget.h"

namespace bucketsim {

struct ReportFigures {
  std::string path;
  std::string memory_model;  // context.memory_model
  std::string trace_digest;  // context.trace_digest
  std::vector<PolicyFigures> policies;

  // The policy named `policy` (as the user named it when the report was written), or null.
  const PolicyFigures* Find(std::string_view policy) const;
};

Result<ReportFigures> ReadReportFigures(const std::string& path);
// The same from text; `path` names it in messages.
Result<ReportFigures> ParseReportFigures(const std::string& path, std::string_view text);

}  // namespace bucketsim
