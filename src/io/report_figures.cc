#include "io/report_figures.h"

#include <fmt/format.h>

#include "io/json_document.h"
#include "report/report_context.h"

namespace bucketsim {
namespace {

using Json = JsonDocument::Json;
using Pointer = JsonDocument::Pointer;

constexpr std::string_view kKind = "report";

Result<PolicyFigures> ReadPolicy(const JsonDocument& doc, const Pointer& at) {
  Result<const Json*> entry = doc.Object(at);
  if (!entry.ok()) return entry.status();
  PolicyFigures figures;
  Result<std::string> name = doc.String(at / "policy");
  if (!name.ok()) return name.status();
  figures.policy = *name;
  Result<std::uint64_t> allocated = doc.Unsigned(at / "peak_allocated_bytes");
  if (!allocated.ok()) return allocated.status();
  figures.peak_allocated_bytes = *allocated;
  Result<std::uint64_t> reserved = doc.Unsigned(at / "peak_reserved_bytes");
  if (!reserved.ok()) return reserved.status();
  figures.peak_reserved_bytes = *reserved;
  // timing.step_time_us, when the report has timing (older ones do not) and it timed an
  // iteration (a trace without iteration events has none).
  if (const Pointer timing = at / "timing"; doc.Has(timing)) {
    Result<const Json*> iterations = doc.Array(timing / "iterations");
    if (!iterations.ok()) return iterations.status();
    if (!(*iterations)->empty()) {
      Result<double> step = doc.Number(timing / "step_time_us");
      if (!step.ok()) return step.status();
      figures.step_time_us = *step;
    }
  }
  if (doc.Has(at / "oom")) figures.out_of_memory = !doc.root().at(at / "oom").is_null();
  Result<const Json*> marks = doc.Array(at / "marks");
  if (!marks.ok()) return marks.status();
  for (std::size_t i = 0; i < (*marks)->size(); ++i) {
    Pointer mark = at / "marks" / i;
    Result<std::string> mark_name = doc.String(mark / "name");
    if (!mark_name.ok()) return mark_name.status();
    Result<std::uint64_t> bytes = doc.Unsigned(mark / "allocated_bytes");
    if (!bytes.ok()) return bytes.status();
    figures.AddMarkSample(*mark_name, *bytes);
  }
  return figures;
}

Result<ReportFigures> FromDocument(const JsonDocument& doc) {
  Result<int> version = doc.SchemaVersion(kReportSchemaVersion, kReportSchemaVersion);
  if (!version.ok()) return version.status();
  ReportFigures report;
  report.path = doc.path();
  Result<std::string> model = doc.String(Pointer("/context/memory_model"));
  if (!model.ok()) return model.status();
  report.memory_model = *model;
  Result<std::string> digest = doc.String(Pointer("/context/trace_digest"));
  if (!digest.ok()) return digest.status();
  report.trace_digest = *digest;
  const Pointer policies("/policies");
  Result<const Json*> entries = doc.Array(policies);
  if (!entries.ok()) return entries.status();
  if ((*entries)->empty()) return doc.Error(policies, "the report has no policy");
  for (std::size_t i = 0; i < (*entries)->size(); ++i) {
    Result<PolicyFigures> figures = ReadPolicy(doc, policies / i);
    if (!figures.ok()) return figures.status();
    if (report.Find(figures->policy)) {
      return doc.Error(policies / i / "policy",
                       fmt::format("policy '{}' appears twice", figures->policy));
    }
    report.policies.push_back(std::move(*figures));
  }
  return report;
}

}  // namespace

const PolicyFigures* ReportFigures::Find(std::string_view policy) const {
  for (const PolicyFigures& figures : policies) {
    if (figures.policy == policy) return &figures;
  }
  return nullptr;
}

Result<ReportFigures> ReadReportFigures(const std::string& path) {
  Result<JsonDocument> doc = JsonDocument::Read(path, kKind);
  if (!doc.ok()) return doc.status();
  return FromDocument(*doc);
}

Result<ReportFigures> ParseReportFigures(const std::string& path, std::string_view text) {
  Result<JsonDocument> doc = JsonDocument::Parse(path, kKind, text);
  if (!doc.ok()) return doc.status();
  return FromDocument(*doc);
}

}  // namespace bucketsim
