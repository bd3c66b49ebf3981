#include "report/report_reader.h"

#include <limits>

#include <fmt/format.h>

#include "io/json_document.h"

namespace bucketsim {
namespace {

using Json = JsonDocument::Json;
using Pointer = JsonDocument::Pointer;

constexpr std::string_view kKind = "report";

// A report that does not read as the format says; caught in FromDocument, which returns it.
struct BadReport {
  Status status;
};

template <typename T>
T Get(Result<T> result) {
  if (!result.ok()) throw BadReport{result.status()};
  return std::move(*result);
}

// One value of the report and the JSON pointer that leads to it; a typed read that fails
// throws the document's message ("FILE: POINTER: what").
class Node {
 public:
  Node(const JsonDocument& doc, Pointer at) : doc_(doc), at_(std::move(at)) {}

  [[noreturn]] void Fail(std::string_view what) const { throw BadReport{doc_.Error(at_, what)}; }
  // Present and not null.
  bool Has(std::string_view key) const {
    const Pointer at = at_ / std::string(key);
    return doc_.Has(at) && !doc_.root().at(at).is_null();
  }
  Node operator[](std::string_view key) const {
    Get(doc_.Object(at_));
    return Node(doc_, at_ / std::string(key));
  }
  std::vector<Node> Items() const {
    const std::size_t size = Get(doc_.Array(at_))->size();
    std::vector<Node> items;
    for (std::size_t i = 0; i < size; ++i) items.emplace_back(doc_, at_ / i);
    return items;
  }
  std::uint64_t Uint() const { return Get(doc_.Unsigned(at_)); }
  int Int() const {
    std::uint64_t value = Uint();
    if (value > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) Fail("too large");
    return static_cast<int>(value);
  }
  double Number() const { return Get(doc_.Number(at_)); }
  bool Bool() const { return Get(doc_.Bool(at_)); }
  std::string String() const { return Get(doc_.String(at_)); }
  // null: unset.
  std::optional<std::uint64_t> OptionalUint() const {
    if (doc_.Has(at_) && doc_.root().at(at_).is_null()) return std::nullopt;
    return Uint();
  }

 private:
  const JsonDocument& doc_;
  Pointer at_;
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

// What tells whether a run is comparable with the report: read first, in every case.
void ReadComparability(const Node& node, ReportContext& context) {
  context.memory_model = node["memory_model"].String();
  context.trace_digest = node["trace_digest"].String();
}

void ReadContext(const Node& node, ReportContext& context) {
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
  context.time_profile = node.Has("time_profile") ? node["time_profile"].String() : "none";
  context.trace_name = node["trace_name"].String();
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

// What a baseline must share with the check's trace beside its digest (cmd_check.cc).
ReportTraceInfo ReadComparableTrace(const Node& node) {
  ReportTraceInfo t;
  t.world_size = node["world_size"].Int();
  t.rank = node["rank"].Int();
  t.bucket_cap_mb = node["bucket_cap_mb"].Number();
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

void ReadPeakDetails(const Node& node, PeakInfo& peak) {
  peak.event_index = node["event_index"].Uint();
  peak.iteration = node["iteration"].Uint();
  peak.phase = ReadPhase(node["phase"]);
  peak.by_category = ReadCategories(node["by_category"]);
  for (const Node& a : node["largest"].Items()) {
    peak.largest.push_back({ReadCategory(a["category"]), a["bytes"].Uint(), a["what"].String(),
                            a["since_event"].Uint()});
  }
  peak.fragmentation = ReadFragmentation(node);
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

// timing.step_time_us when the report has timing (older ones do not) and it timed an iteration
// (a trace without iteration events has none).
std::optional<Micros> ReadStepTime(const Node& run) {
  if (!run.Has("timing")) return std::nullopt;
  Node timing = run["timing"];
  if (timing["iterations"].Items().empty()) return std::nullopt;
  return timing["step_time_us"].Number();
}

// timing.prediction beside timing (run --profile on a real backend), when the report has one.
std::optional<PredictionRow> ReadPrediction(const Node& run) {
  if (!run.Has("timing") || !run["timing"].Has("prediction")) return std::nullopt;
  Node timing = run["timing"];
  Node predicted = timing["prediction"];
  // Per iteration; reports written before those fields carry only the sums.
  auto per_iteration = [](const Node& node, const char* figure) {
    std::string key = fmt::format("{}_per_iteration_us", figure);
    return node.Has(key) ? node[key].Number() : node[fmt::format("{}_us", figure)].Number();
  };
  return PredictionRow{run["policy"].String(),
                       predicted["profile"].String(),
                       timing["step_time_us"].Number(),
                       predicted["step_time_us"].Number(),
                       per_iteration(timing, "exposed_communication"),
                       per_iteration(predicted, "exposed_communication"),
                       per_iteration(timing, "communication"),
                       per_iteration(predicted, "communication")};
}

void ReadPhases(const Node& node, const ReportTraceInfo& trace, RunResult& run) {
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
}

// Whether the run has a timeline: reports written before it existed have none.
bool ReadTimeline(const Node& node, RunResult& run) {
  if (!node.Has("timeline")) return false;
  Node timeline = node["timeline"];
  run.timeline.span_events = timeline["span_events"].Uint();
  if (run.timeline.span_events == 0) timeline["span_events"].Fail("expected an integer >= 1");
  for (const Node& p : timeline["points"].Items()) {
    run.timeline.points.push_back(
        {p["first_event"].Uint(), p["allocated_bytes"].Uint(), p["reserved_bytes"].Uint()});
  }
  return true;
}

void ReadBucketLifetimes(const Node& node, RunResult& run) {
  if (!node.Has("bucket_lifetimes")) return;
  for (const Node& b : node["bucket_lifetimes"].Items()) {
    run.bucket_lifetimes.push_back({ReadCategory(b["category"]), ReadDType(b["dtype"]),
                                    b["group"].Uint(), b["bytes"].Uint(),
                                    b["allocated_event"].Uint(), b["retired_event"].OptionalUint(),
                                    b["freed_event"].OptionalUint()});
  }
  run.bucket_lifetimes_dropped = node["bucket_lifetimes_dropped"].Uint();
}

// The figures of one policy every reader needs: its name, peaks, mark samples and OOM.
RunResult ReadRunFigures(const Node& node, ReportContent content) {
  RunResult run;
  run.policy = node["policy"].String();
  run.peak.allocated_bytes = node["peak_allocated_bytes"].Uint();
  run.peak.reserved_bytes = node["peak_reserved_bytes"].Uint();
  run.oom = ReadOom(node);
  for (const Node& m : node["marks"].Items()) {
    MarkSample sample;
    sample.name = m["name"].String();
    sample.allocated_bytes = m["allocated_bytes"].Uint();
    if (content == ReportContent::kPage) {
      sample.iteration = m["iteration"].Uint();
      sample.event_index = m["event_index"].Uint();
      sample.reserved_bytes = m["reserved_bytes"].Uint();
      sample.by_category = ReadCategories(m["by_category"]);
    }
    run.marks.push_back(std::move(sample));
  }
  run.bucket_cap_mb = node["bucket_cap_mb"].Number();  // a baseline's comparability
  return run;
}

// The rest of what a page draws of one policy.
// timing.iterations, so that tables of a report read back show the step time and exposed
// communication per iteration exactly as the replay's own tables do.
void ReadIterationTimings(const Node& node, RunResult& run) {
  if (!node.Has("timing")) return;
  run.backend = node["timing"]["backend"].String();
  for (const Node& it : node["timing"]["iterations"].Items()) {
    run.iterations.push_back({it["iteration"].Uint(), it["iteration_us"].Number(),
                              it["compute_us"].Number(), it["communication_us"].Number(),
                              it["copy_us"].Number(), it["exposed_communication_us"].Number()});
  }
}

// collective_summary, so that a page read back shows the collectives as the replay's own page
// does (the framework table). Reports written before the summary have none.
void ReadCollectiveSummary(const Node& node, RunResult& run) {
  if (!node.Has("collective_summary")) return;
  const Node summary = node["collective_summary"];
  std::vector<PhaseCollectives> phases;
  for (const Node& p : summary["phases"].Items()) {
    PhaseCollectives phase;
    phase.iteration = p["iteration"].Uint();
    phase.phase = ReadPhase(p["phase"]);
    phase.total = {p["count"].Uint(), p["bytes"].Uint()};
    for (int k = 0; k < kNumCollectiveKinds; ++k) {
      const std::string_view kind = CollectiveKindName(static_cast<CollectiveKind>(k));
      if (!p.Has(kind)) continue;  // a report from before the kind existed
      const Node count = p[kind];
      phase.by_kind[static_cast<std::size_t>(k)] = {count["count"].Uint(), count["bytes"].Uint()};
    }
    phases.push_back(phase);
  }
  std::vector<GroupCollectives> groups;
  for (const Node& g : summary["groups"].Items()) {
    groups.push_back({g["group"].Uint(),
                      static_cast<int>(g["group_size"].Uint()),
                      {g["count"].Uint(), g["bytes"].Uint()}});
  }
  run.collective_summary = CollectiveSummary::Restored(std::move(phases), std::move(groups));
}

void ReadRunDetails(const Node& node, const ReportTraceInfo& trace, RunResult& run,
                    bool& has_timeline) {
  run.canonical = node["canonical"].String();
  run.memory_model = node["memory_model"].String();
  // Reports written before the setting was (the framework table then says the policy's own).
  if (node.Has("setting")) run.setting = node["setting"].String();
  ReadPeakDetails(node["peak"], run.peak);
  run.peak_bucket_bytes = node["peak_bucket_bytes"].Uint();
  run.final_allocated_bytes = node["final_allocated_bytes"].Uint();
  run.counters.buckets = node["buckets"].Uint();
  run.counters.flushes = node["flushes"].Uint();
  run.counters.bypasses = node["bypassed_requests"].Uint();
  run.counters.bucketed = node["bucketed_requests"].Uint();
  run.compute_us = node["compute_us"].Number();
  ReadPhases(node, trace, run);
  if (!ReadTimeline(node, run)) has_timeline = false;
  ReadBucketLifetimes(node, run);
  ReadIterationTimings(node, run);
  ReadCollectiveSummary(node, run);
}

std::optional<std::size_t> ReadIndex(const Node& node, std::size_t points) {
  std::optional<std::uint64_t> index = node.OptionalUint();
  if (index && *index >= points) {
    node.Fail(fmt::format("expected the index of a point (0..{}) or null", points - 1));
  }
  return index;
}

// The `sweep` section of `bucketsim sweep`: one point per policy entry, in the same order.
SweepSection ReadSweep(const Node& node, const std::vector<RunResult>& runs) {
  SweepSection sweep;
  std::vector<Node> points = node["points"].Items();
  if (points.size() != runs.size()) {
    node["points"].Fail(fmt::format("{} point(s) for {} policy entries: expected one per entry",
                                    points.size(), runs.size()));
  }
  for (std::size_t i = 0; i < points.size(); ++i) {
    const Node& p = points[i];
    SweepPoint point;
    point.policy = p["policy"].String();
    if (point.policy != runs[i].policy) {
      p["policy"].Fail(
          fmt::format("'{}' but policies[{}] is '{}'", point.policy, i, runs[i].policy));
    }
    point.canonical = p["canonical"].String();
    point.bucket_cap_mb = p["bucket_cap_mb"].Number();
    point.peak_allocated_bytes = p["peak_allocated_bytes"].Uint();
    point.peak_reserved_bytes = p["peak_reserved_bytes"].Uint();
    point.step_time_us = p["step_time_us"].Number();
    point.exposed_communication_us = p["exposed_communication_us"].Number();
    point.out_of_memory = p["out_of_memory"].Bool();
    point.pareto = p["pareto"].Bool();
    // Reports before the advice (bucketsim 0.1) have the counts only in policies[].
    point.bucketed_requests =
        p.Has("bucketed_requests") ? p["bucketed_requests"].Uint() : runs[i].counters.bucketed;
    point.bypassed_requests =
        p.Has("bypassed_requests") ? p["bypassed_requests"].Uint() : runs[i].counters.bypasses;
    sweep.points.push_back(std::move(point));
  }
  // The choices are derived from the points as `sweep` derived them, so a page made from the
  // file says what the command said; the file's indices are for other readers.
  double tolerance = kDefaultTimeTolerance;
  if (node.Has("knee")) {
    tolerance = node["knee"]["time_tolerance"].Number();
    if (!(tolerance >= 0)) node["knee"]["time_tolerance"].Fail("expected a fraction >= 0");
  }
  sweep.knee = FindKnee(sweep.points, tolerance);
  if (node.Has("budget")) {
    Node budget = node["budget"];
    sweep.budget = ChooseUnderBudget(sweep.points, budget["budget_bytes"].Uint());
    for (const char* key : {"best", "runner_up", "smallest"}) ReadIndex(budget[key], points.size());
  }
  if (node.Has("search")) {
    Node search = node["search"];
    sweep.search = CapSearch{search["from_mb"].Number(),
                             search["to_mb"].Number(),
                             search["passes"].Int(),
                             search["caps"].Uint(),
                             {}};
    for (const Node& cap : search["listed_mb"].Items()) {
      sweep.search->listed_mb.push_back(cap.Number());
    }
  }
  if (node.Has("smallest_bucketing_cap_mb")) {
    sweep.smallest_bucketing_cap_mb = node["smallest_bucketing_cap_mb"].Number();
  }
  return sweep;
}

// The report at `at`: the file's top level, or one trace's report inside a report of several.
ReportDocument ReadDocumentAt(const JsonDocument& json, const Pointer& at, ReportContent content) {
  const Node top(json, at);
  ReportDocument doc;
  doc.source = json.path();
  ReadComparability(top["context"], doc.context);
  if (content == ReportContent::kPage) {
    ReadContext(top["context"], doc.context);
    doc.trace = ReadTraceInfo(top["trace"]);
  } else {
    doc.trace = ReadComparableTrace(top["trace"]);
  }
  std::vector<Node> runs = top["policies"].Items();
  if (runs.empty()) top["policies"].Fail("the report has no policy");
  for (const Node& node : runs) {
    RunResult run = ReadRunFigures(node, content);
    if (content == ReportContent::kFigures) {
      for (const RunResult& earlier : doc.runs) {
        if (earlier.policy == run.policy) {
          node["policy"].Fail(fmt::format("policy '{}' appears twice", run.policy));
        }
      }
    } else {
      ReadRunDetails(node, doc.trace, run, doc.has_timeline);
      if (std::optional<PredictionRow> row = ReadPrediction(node)) doc.predictions.push_back(*row);
    }
    doc.step_time_us.push_back(ReadStepTime(node));
    doc.runs.push_back(std::move(run));
  }
  if (content == ReportContent::kPage && top.Has("sweep")) {
    doc.sweep = ReadSweep(top["sweep"], doc.runs);
  }
  return doc;
}

// The top level's schema_version, checked; whether the file holds the reports of several traces.
bool ReadTopLevel(const JsonDocument& json) {
  const Json& root = json.root();
  const Node top(json, Pointer());
  if (root.is_object() && !root.contains("schema_version")) {
    top.Fail("no schema_version: not a bucketsim report (reports/README.md)");
  }
  Get(json.SchemaVersion(kOldestReadableReportSchema, kNewestReadableReportSchema));
  return root.contains("sweeps");
}

ReportDocument ReadDocument(const JsonDocument& json, ReportContent content) {
  if (ReadTopLevel(json)) {
    const Node sweeps(json, Pointer("/sweeps"));
    sweeps.Fail(fmt::format(
        "the sweeps of {} traces, where one report is read (a baseline is the report of one "
        "trace: sweep it alone)",
        sweeps.Items().size()));
  }
  return ReadDocumentAt(json, Pointer(), content);
}

// `sweep TRACE...`'s file: each element of `sweeps` is the sweep report of one trace.
std::vector<ReportDocument> ReadDocuments(const JsonDocument& json) {
  if (!ReadTopLevel(json)) return {ReadDocumentAt(json, Pointer(), ReportContent::kPage)};
  const Node top(json, Pointer());
  const std::vector<Node> sweeps = top["sweeps"].Items();
  if (sweeps.empty()) top["sweeps"].Fail("expected the report of every trace swept, got none");
  const std::uint64_t version = top["schema_version"].Uint();
  std::vector<ReportDocument> docs;
  for (std::size_t i = 0; i < sweeps.size(); ++i) {
    if (sweeps[i]["schema_version"].Uint() != version) {
      sweeps[i]["schema_version"].Fail(fmt::format("expected the file's, {}", version));
    }
    if (!sweeps[i].Has("sweep")) sweeps[i].Fail("expected a sweep report, with its `sweep`");
    docs.push_back(ReadDocumentAt(json, Pointer("/sweeps") / i, ReportContent::kPage));
  }
  return docs;
}

template <typename T, typename Read>
Result<T> FromDocument(Result<JsonDocument> json, const Read& read) {
  if (!json.ok()) return json.status();
  try {
    return read(*json);
  } catch (const BadReport& bad) {
    return bad.status;
  }
}

// The full collective log (--full-log, and every report before the summary) is the one part
// of a report that grows with the trace, and no page or baseline reads it: it is skipped as
// it is parsed, so any report reads in memory bounded by its other parts.
Result<JsonDocument> ReadWithoutLog(const std::string& path) {
  return JsonDocument::Read(path, kKind, {"collectives"});
}

}  // namespace

Result<ReportDocument> ParseReport(const std::string& text, const std::string& source,
                                   ReportContent content) {
  return FromDocument<ReportDocument>(
      JsonDocument::Parse(source, kKind, text),
      [content](const JsonDocument& json) { return ReadDocument(json, content); });
}

Result<ReportDocument> ReadReportFile(const std::string& path, ReportContent content) {
  return FromDocument<ReportDocument>(ReadWithoutLog(path), [content](const JsonDocument& json) {
    return ReadDocument(json, content);
  });
}

Result<std::vector<ReportDocument>> ParseReportDocuments(const std::string& text,
                                                         const std::string& source) {
  return FromDocument<std::vector<ReportDocument>>(JsonDocument::Parse(source, kKind, text),
                                                   ReadDocuments);
}

Result<std::vector<ReportDocument>> ReadReportDocuments(const std::string& path) {
  return FromDocument<std::vector<ReportDocument>>(ReadWithoutLog(path), ReadDocuments);
}

}  // namespace bucketsim
