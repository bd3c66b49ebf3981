#include "io/report_reader.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace bucketsim {
namespace {

using nlohmann::json;

// A report that does not read as the format says; caught in ParseReport, which adds the file.
struct BadReport {
  std::string message;
};

// One JSON value and the path that leads to it, for the error messages.
class Node {
 public:
  Node(const json& value, std::string path) : value_(value), path_(std::move(path)) {}

  [[noreturn]] void Fail(std::string_view what) const {
    throw BadReport{fmt::format("{}: {}", path_.empty() ? "(top level)" : path_, what)};
  }
  bool Has(std::string_view key) const {
    return value_.is_object() && value_.contains(key) && !value_.at(std::string(key)).is_null();
  }
  Node operator[](std::string_view key) const {
    if (!value_.is_object()) Fail("expected an object");
    auto it = value_.find(key);
    std::string path = path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
    if (it == value_.end()) throw BadReport{fmt::format("{}: missing", path)};
    return Node(*it, std::move(path));
  }
  std::vector<Node> Items() const {
    if (!value_.is_array()) Fail("expected an array");
    std::vector<Node> items;
    for (std::size_t i = 0; i < value_.size(); ++i) {
      items.emplace_back(value_[i], fmt::format("{}[{}]", path_, i));
    }
    return items;
  }
  std::uint64_t Uint() const {
    if (!value_.is_number_unsigned()) Fail("expected an integer >= 0");
    return value_.get<std::uint64_t>();
  }
  int Int() const {
    if (!value_.is_number_integer()) Fail("expected an integer");
    return value_.get<int>();
  }
  double Number() const {
    if (!value_.is_number()) Fail("expected a number");
    return value_.get<double>();
  }
  std::string String() const {
    if (!value_.is_string()) Fail("expected a string");
    return value_.get<std::string>();
  }
  std::optional<std::uint64_t> OptionalUint() const {
    if (value_.is_null()) return std::nullopt;
    return Uint();
  }

 private:
  const json& value_;
  std::string path_;
};

Category ReadCategory(const Node& node) {
  std::string name = node.String();
  for (int c = 0; c < kNumCategories; ++c) {
    if (CategoryName(static_cast<Category>(c)) == name) return static_cast<Category>(c);
  }
  node.Fail(fmt::format("unknown category '{}'", name));
}

Phase ReadPhase(const Node& node) {
  std::string name = node.String();
  for (Phase p :
       {Phase::kInit, Phase::kForward, Phase::kBackward, Phase::kStep, Phase::kZeroGrad}) {
    if (PhaseName(p) == name) return p;
  }
  node.Fail(fmt::format("unknown phase '{}'", name));
}

DType ReadDType(const Node& node) {
  std::string name = node.String();
  std::optional<DType> dtype = ParseDType(name);
  if (!dtype) node.Fail(fmt::format("unknown dtype '{}'", name));
  return *dtype;
}

CategoryBytes ReadCategories(const Node& node) {
  CategoryBytes bytes{};
  for (int c = 0; c < kNumCategories; ++c) {
    bytes[c] = node[CategoryName(static_cast<Category>(c))].Uint();
  }
  return bytes;
}

ReportContext ReadContext(const Node& node) {
  ReportContext context;
  // The volatile keys are optional (reports/README.md, `context`).
  auto optional = [&node](std::string_view key) {
    return node.Has(key) ? node[key].String() : std::string();
  };
  context.tool_version = optional("tool_version");
  context.git_sha = optional("git_sha");
  context.host = optional("host");
  context.trace_path = optional("trace_path");
  if (node.Has("argv")) {
    for (const Node& arg : node["argv"].Items()) context.argv.push_back(arg.String());
  }
  context.backend = node["backend"].String();
  context.memory_model = node["memory_model"].String();
  context.trace_name = node["trace_name"].String();
  context.trace_digest = node["trace_digest"].String();
  return context;
}

ReportTraceInfo ReadTraceInfo(const Node& node) {
  ReportTraceInfo t;
  t.schema_version = node["schema_version"].Int();
  t.description = node["description"].String();
  t.world_size = node["world_size"].Int();
  t.rank = node["rank"].Int();
  t.bucket_cap_mb = node["bucket_cap_mb"].Number();
  t.events = node["events"].Uint();
  t.iterations = node["iterations"].Uint();
  t.fsdp_instances = node["fsdp_instances"].Uint();
  t.params = node["params"].Uint();
  t.process_groups = node["process_groups"].Uint();
  t.compute_us = node["compute_us"].Number();
  return t;
}

std::optional<FragmentationInfo> ReadFragmentation(const Node& peak) {
  if (!peak.Has("fragmentation")) return std::nullopt;
  Node node = peak["fragmentation"];
  FragmentationInfo f;
  f.reserved_minus_allocated_bytes = node["reserved_minus_allocated_bytes"].Uint();
  f.inactive_split_bytes = node["inactive_split_bytes"].Uint();
  f.largest_free_block_bytes = node["largest_free_block_bytes"].Uint();
  for (const Node& s : node["segments"].Items()) {
    std::string pool = s["pool"].String();
    if (pool != "small" && pool != "large") s["pool"].Fail("expected 'small' or 'large'");
    f.segments.push_back({static_cast<StreamId>(s["stream"].Uint()), pool == "small",
                          s["count"].Uint(), s["bytes"].Uint()});
  }
  return f;
}

PeakInfo ReadPeak(const Node& run) {
  Node node = run["peak"];
  PeakInfo peak;
  peak.allocated_bytes = run["peak_allocated_bytes"].Uint();
  peak.reserved_bytes = run["peak_reserved_bytes"].Uint();
  peak.event_index = node["event_index"].Uint();
  peak.iteration = node["iteration"].Uint();
  peak.phase = ReadPhase(node["phase"]);
  peak.by_category = ReadCategories(node["by_category"]);
  for (const Node& a : node["largest"].Items()) {
    peak.largest.push_back({ReadCategory(a["category"]), a["bytes"].Uint(), a["what"].String(),
                            a["since_event"].Uint()});
  }
  peak.fragmentation = ReadFragmentation(node);
  return peak;
}

std::optional<OomEvent> ReadOom(const Node& run) {
  if (!run.Has("oom")) return std::nullopt;
  Node node = run["oom"];
  OomEvent oom;
  oom.event_index = node["event_index"].Uint();
  oom.requested_bytes = node["requested_bytes"].Uint();
  oom.stream = static_cast<StreamId>(node["stream"].Uint());
  oom.category = ReadCategory(node["category"]);
  oom.report.tried_to_allocate_bytes = node["tried_to_allocate_bytes"].Uint();
  oom.report.capacity_bytes = node["capacity_bytes"].Uint();
  oom.report.free_bytes = node["free_bytes"].Uint();
  oom.report.allocated_bytes = node["allocated_bytes"].Uint();
  oom.report.reserved_unallocated_bytes = node["reserved_unallocated_bytes"].Uint();
  oom.report.free_blocks = node["free_blocks"].Uint();
  return oom;
}

RunResult ReadRun(const Node& node, const ReportTraceInfo& trace, bool& has_timeline) {
  RunResult run;
  run.policy = node["policy"].String();
  run.canonical = node["canonical"].String();
  run.bucket_cap_mb = node["bucket_cap_mb"].Number();
  run.memory_model = node["memory_model"].String();
  run.peak = ReadPeak(node);
  run.peak_bucket_bytes = node["peak_bucket_bytes"].Uint();
  run.final_allocated_bytes = node["final_allocated_bytes"].Uint();
  run.counters.buckets = node["buckets"].Uint();
  run.counters.flushes = node["flushes"].Uint();
  run.counters.bypasses = node["bypassed_requests"].Uint();
  run.counters.bucketed = node["bucketed_requests"].Uint();
  run.compute_us = node["compute_us"].Number();
  run.oom = ReadOom(node);
  for (const Node& m : node["marks"].Items()) {
    run.marks.push_back({m["name"].String(), m["iteration"].Uint(), m["event_index"].Uint(),
                         m["allocated_bytes"].Uint(), m["reserved_bytes"].Uint(),
                         ReadCategories(m["by_category"])});
  }
  std::vector<Node> phases = node["phases"].Items();
  for (std::size_t i = 0; i < phases.size(); ++i) {
    const Node& p = phases[i];
    PhaseStats s;
    s.iteration = p["iteration"].Uint();
    s.phase = ReadPhase(p["phase"]);
    s.first_event = p["first_event"].Uint();
    s.start_bytes = p["start_bytes"].Uint();
    s.peak_bytes = p["peak_bytes"].Uint();
    s.end_bytes = p["end_bytes"].Uint();
    s.peak_reserved_bytes = p["peak_reserved_bytes"].Uint();
    s.compute_us = p["compute_us"].Number();
    // Older reports lack end_event: a stretch ends where the next begins.
    s.end_event = p.Has("end_event")      ? p["end_event"].Uint()
                  : i + 1 < phases.size() ? phases[i + 1]["first_event"].Uint()
                  : run.oom               ? run.oom->event_index + 1
                                          : trace.events;
    run.phases.push_back(s);
  }
  if (node.Has("timeline")) {
    Node timeline = node["timeline"];
    run.timeline.span_events = timeline["span_events"].Uint();
    if (run.timeline.span_events == 0) timeline["span_events"].Fail("expected an integer >= 1");
    for (const Node& p : timeline["points"].Items()) {
      run.timeline.points.push_back(
          {p["first_event"].Uint(), p["allocated_bytes"].Uint(), p["reserved_bytes"].Uint()});
    }
  } else {
    has_timeline = false;
  }
  if (node.Has("bucket_lifetimes")) {
    for (const Node& b : node["bucket_lifetimes"].Items()) {
      run.bucket_lifetimes.push_back(
          {ReadCategory(b["category"]), ReadDType(b["dtype"]), b["group"].Uint(), b["bytes"].Uint(),
           b["allocated_event"].Uint(), b["retired_event"].OptionalUint(),
           b["freed_event"].OptionalUint()});
    }
    run.bucket_lifetimes_dropped = node["bucket_lifetimes_dropped"].Uint();
  }
  return run;
}

ReportDocument ReadDocument(const json& root) {
  Node top(root, "");
  if (!root.is_object()) top.Fail("expected a JSON object (a bucketsim report)");
  if (root.contains("events") && !root.contains("policies")) {
    top.Fail(
        "a trace, not a report; make the report with 'bucketsim compare TRACE --json "
        "REPORT.json'");
  }
  if (!root.contains("schema_version")) {
    top.Fail("no schema_version: not a bucketsim report (reports/README.md)");
  }
  int version = top["schema_version"].Int();
  if (version < kOldestReadableReportSchema || version > kNewestReadableReportSchema) {
    top["schema_version"].Fail(
        fmt::format("report schema_version {} is not supported; this "
                    "bucketsim reads versions {}..{}",
                    version, kOldestReadableReportSchema, kNewestReadableReportSchema));
  }
  ReportDocument doc;
  doc.context = ReadContext(top["context"]);
  doc.trace = ReadTraceInfo(top["trace"]);
  std::vector<Node> runs = top["policies"].Items();
  if (runs.empty()) top["policies"].Fail("expected at least one policy");
  for (const Node& run : runs) doc.runs.push_back(ReadRun(run, doc.trace, doc.has_timeline));
  return doc;
}

}  // namespace

Result<ReportDocument> ParseReport(const std::string& text, const std::string& source) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    return InvalidArgument(
        fmt::format("{}: not valid JSON (byte {}): {}", source, e.byte, e.what()));
  }
  try {
    ReportDocument doc = ReadDocument(root);
    doc.source = source;
    return doc;
  } catch (const BadReport& e) {
    return InvalidArgument(fmt::format("{}: {}", source, e.message));
  } catch (const json::exception& e) {
    return InvalidArgument(fmt::format("{}: {}", source, e.what()));
  }
}

Result<ReportDocument> ReadReportFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(fmt::format("cannot open report '{}': {}", path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return IoError(fmt::format("cannot read report '{}'", path));
  return ParseReport(text.str(), path);
}

}  // namespace bucketsim
