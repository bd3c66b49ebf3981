#include "io/budget_file.h"

#include <fmt/format.h>

#include "core/size_format.h"
#include "io/json_document.h"
#include "policy/policy_spec.h"

namespace bucketsim {
namespace {

using Json = JsonDocument::Json;
using Pointer = JsonDocument::Pointer;

constexpr std::string_view kKind = "budget file";

// Every key of the object at `at` must be one of `known`.
Status CheckKeys(const JsonDocument& doc, const Pointer& at,
                 std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : doc.root().at(at).items()) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || key == k;
    if (!ok) {
      std::string names;
      for (std::string_view k : known) names += fmt::format("{}{}", names.empty() ? "" : ", ", k);
      return doc.Error(at / key, fmt::format("unknown key (known here: {})", names));
    }
  }
  return Status::Ok();
}

// A size: "40GiB" (core/size_format.h) or an integer number of bytes.
Result<Bytes> SizeAt(const JsonDocument& doc, const Pointer& at) {
  const Json& value = doc.root().at(at);
  if (value.is_number_unsigned()) return value.get<Bytes>();
  if (value.is_string()) {
    Result<Bytes> size = ParseSize(value.get<std::string>());
    if (!size.ok()) return doc.Error(at, size.status().message());
    return size;
  }
  return doc.Error(at, fmt::format("expected a size: a string such as \"40GiB\" or an integer "
                                   "number of bytes, got {}",
                                   JsonExcerpt(value)));
}

Result<PolicyBudget> ReadPolicyBudget(const JsonDocument& doc, const Pointer& at) {
  Result<const Json*> entry = doc.Object(at);
  if (!entry.ok()) return entry.status();
  BUCKETSIM_RETURN_IF_ERROR(CheckKeys(
      doc, at, {"max_peak_allocated", "max_peak_reserved", "max_at_mark", "max_step_time_us"}));
  PolicyBudget budget;
  if (doc.Has(at / "max_peak_allocated")) {
    Result<Bytes> limit = SizeAt(doc, at / "max_peak_allocated");
    if (!limit.ok()) return limit.status();
    budget.max_peak_allocated_bytes = *limit;
  }
  if (doc.Has(at / "max_peak_reserved")) {
    Result<Bytes> limit = SizeAt(doc, at / "max_peak_reserved");
    if (!limit.ok()) return limit.status();
    budget.max_peak_reserved_bytes = *limit;
  }
  if (doc.Has(at / "max_at_mark")) {
    Result<const Json*> marks = doc.Object(at / "max_at_mark");
    if (!marks.ok()) return marks.status();
    for (const auto& [mark, value] : (*marks)->items()) {
      if (mark.empty()) return doc.Error(at / "max_at_mark", "a mark name is empty");
      Result<Bytes> limit = SizeAt(doc, at / "max_at_mark" / mark);
      if (!limit.ok()) return limit.status();
      budget.SetMark(mark, *limit);
    }
  }
  if (doc.Has(at / "max_step_time_us")) {
    Result<double> limit = doc.Number(at / "max_step_time_us");
    if (!limit.ok()) return limit.status();
    if (*limit < 0) return doc.Error(at / "max_step_time_us", "must be >= 0 (microseconds)");
    budget.max_step_time_us = *limit;
  }
  return budget;
}

Result<BudgetFile> FromDocument(const JsonDocument& doc) {
  Result<int> version = doc.SchemaVersion(kBudgetSchemaVersion, kBudgetSchemaVersion);
  if (!version.ok()) return version.status();
  BUCKETSIM_RETURN_IF_ERROR(
      CheckKeys(doc, Pointer(), {"schema_version", "description", "policies"}));
  BudgetFile file;
  file.path = doc.path();
  if (doc.Has(Pointer("/description"))) {
    Result<std::string> description = doc.String(Pointer("/description"));
    if (!description.ok()) return description.status();
    file.description = *description;
  }
  const Pointer policies("/policies");
  Result<const Json*> entries = doc.Object(policies);
  if (!entries.ok()) return entries.status();
  if ((*entries)->empty()) return doc.Error(policies, "names no policy (and no \"*\")");
  for (const auto& [name, value] : (*entries)->items()) {
    Result<PolicyBudget> budget = ReadPolicyBudget(doc, policies / name);
    if (!budget.ok()) return budget.status();
    if (name == kAnyPolicy) {
      file.any_policy = *budget;
      continue;
    }
    // Only names that `--policy` accepts: a typo here would otherwise be replayed as nothing.
    Result<PolicySpec> spec = ParsePolicySpec(name);
    if (!spec.ok()) return doc.Error(policies / name, spec.status().message());
    file.policies.emplace_back(name, *budget);
  }
  return file;
}

}  // namespace

PolicyBudget BudgetFile::For(std::string_view policy) const {
  PolicyBudget budget = any_policy.value_or(PolicyBudget{});
  for (const auto& [name, own] : policies) {
    if (name == policy) budget.OverrideWith(own);
  }
  return budget;
}

Result<BudgetFile> ReadBudgetFile(const std::string& path) {
  Result<JsonDocument> doc = JsonDocument::Read(path, kKind);
  if (!doc.ok()) return doc.status();
  return FromDocument(*doc);
}

Result<BudgetFile> ParseBudgetFile(const std::string& path, std::string_view text) {
  Result<JsonDocument> doc = JsonDocument::Parse(path, kKind, text);
  if (!doc.ok()) return doc.status();
  return FromDocument(*doc);
}

}  // namespace bucketsim
