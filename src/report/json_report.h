// The JSON report: schema_version, the context block, a summary of the trace, and per policy
// every figure the replay produced (reports/README.md documents each field, reports/
// report-v1.schema.json validates it). Field names carry units (`_bytes`, `_us`, `_numel`).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "engine/replay_policies.h"
#include "report/report_context.h"

namespace bucketsim {

nlohmann::ordered_json RunResultToJson(const RunResult& run);
nlohmann::ordered_json ReportToJson(const ReplayOutcome& outcome, const ReportContext& context);
// Writes `report` indented, with a final newline; creates missing parent directories.
Status WriteJsonFile(const std::string& path, const nlohmann::ordered_json& report);

}  // namespace bucketsim
