#include "report/json_report.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

namespace bucketsim {
namespace {

using Json = nlohmann::ordered_json;

Json CategoriesToJson(const CategoryBytes& bytes) {
  Json out = Json::object();
  for (int c = 0; c < kNumCategories; ++c) {
    out[std::string(CategoryName(static_cast<Category>(c)))] = bytes[c];
  }
  return out;
}

Bytes SumIf(const CategoryBytes& bytes, bool (*predicate)(Category)) {
  Bytes total = 0;
  for (int c = 0; c < kNumCategories; ++c) {
    if (predicate(static_cast<Category>(c))) total += bytes[c];
  }
  return total;
}

Json ContextToJson(const ReportContext& context) {
  return {{"tool", "bucketsim"},
          {"tool_version", context.tool_version},
          {"git_sha", context.git_sha},
          {"backend", context.backend},
          {"memory_model", context.memory_model},
          {"argv", context.argv},
          {"host", context.host},
          {"trace_path", context.trace_path},
          {"trace_name", context.trace_name},
          {"trace_digest", context.trace_digest}};
}

Json TraceToJson(const ReplayOutcome& outcome) {
  const TraceHeader& h = outcome.header;
  std::size_t params = 0;
  for (const FsdpInstance& instance : h.fsdp) params += instance.params.size();
  return {{"schema_version", h.schema_version},
          {"description", h.description},
          {"world_size", h.world_size},
          {"rank", h.rank},
          {"bucket_cap_mb", h.bucket_cap_mb},
          {"events", outcome.summary.events},
          {"iterations", outcome.summary.iterations},
          {"fsdp_instances", h.fsdp.size()},
          {"params", params},
          {"process_groups", h.groups.size()},
          {"compute_us", outcome.summary.compute_us}};
}

}  // namespace

Json RunResultToJson(const RunResult& run) {
  Json largest = Json::array();
  for (const LiveAllocation& a : run.peak.largest) {
    largest.push_back({{"category", CategoryName(a.category)},
                       {"bytes", a.bytes},
                       {"what", a.what},
                       {"since_event", a.since}});
  }
  Json marks = Json::array();
  for (const MarkSample& m : run.marks) {
    marks.push_back({{"name", m.name},
                     {"iteration", m.iteration},
                     {"event_index", m.event_index},
                     {"allocated_bytes", m.allocated_bytes},
                     {"reserved_bytes", m.reserved_bytes},
                     {"by_category", CategoriesToJson(m.by_category)}});
  }
  Json phases = Json::array();
  for (const PhaseStats& p : run.phases) {
    phases.push_back({{"iteration", p.iteration},
                      {"phase", PhaseName(p.phase)},
                      {"first_event", p.first_event},
                      {"start_bytes", p.start_bytes},
                      {"peak_bytes", p.peak_bytes},
                      {"end_bytes", p.end_bytes},
                      {"compute_us", p.compute_us}});
  }
  Json collectives = Json::array();
  for (const CollectiveRecord& c : run.collectives) {
    collectives.push_back({{"kind", CollectiveKindName(c.kind)},
                           {"group", c.group},
                           {"group_size", c.group_size},
                           {"dtype", DTypeName(c.dtype)},
                           {"input_numel", c.input_numel},
                           {"output_numel", c.output_numel},
                           {"requests", c.requests},
                           {"event_index", c.event_index}});
  }
  return {{"policy", run.policy},
          {"canonical", run.canonical},
          {"bucket_cap_mb", run.bucket_cap_mb},
          {"memory_model", run.memory_model},
          {"peak_allocated_bytes", run.peak.allocated_bytes},
          {"peak_reserved_bytes", run.peak.reserved_bytes},
          {"bucket_bytes_at_peak", SumIf(run.peak.by_category, &IsBucketCategory)},
          {"policy_bytes_at_peak", SumIf(run.peak.by_category, &IsPolicyCategory)},
          {"peak_bucket_bytes", run.peak_bucket_bytes},
          {"final_allocated_bytes", run.final_allocated_bytes},
          {"peak",
           {{"event_index", run.peak.event_index},
            {"iteration", run.peak.iteration},
            {"phase", PhaseName(run.peak.phase)},
            {"by_category", CategoriesToJson(run.peak.by_category)},
            {"largest", largest}}},
          {"buckets", run.counters.buckets},
          {"flushes", run.counters.flushes},
          {"bypassed_requests", run.counters.bypasses},
          {"bucketed_requests", run.counters.bucketed},
          {"compute_us", run.compute_us},
          {"marks", marks},
          {"phases", phases},
          {"collectives", collectives}};
}

Json ReportToJson(const ReplayOutcome& outcome, const ReportContext& context) {
  Json policies = Json::array();
  for (const RunResult& run : outcome.runs) policies.push_back(RunResultToJson(run));
  return {{"schema_version", kReportSchemaVersion},
          {"context", ContextToJson(context)},
          {"trace", TraceToJson(outcome)},
          {"policies", policies}};
}

Status WriteJsonFile(const std::string& path, const Json& report) {
  std::filesystem::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return IoError(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
  out << report.dump(2) << '\n';
  out.close();
  if (!out) return IoError(fmt::format("cannot write '{}'", path));
  return Status::Ok();
}

}  // namespace bucketsim
