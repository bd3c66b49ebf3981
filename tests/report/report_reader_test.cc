#include "report/report_reader.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/replay_policies.h"
#include "io/trace_reader.h"
#include "memory/make_memory_model.h"
#include "report/json_report.h"
#include "testing/run_binary.h"

namespace bucketsim {
namespace {

ReplayOutcome ReplayTiny() {
  std::string path = std::string(BUCKETSIM_SOURCE_DIR) + "/traces/tiny-ws2.json";
  ReplayRequest request;
  request.policies = DefaultPolicies();
  request.make_memory_model = *MakeMemoryModelFactory({"caching", "", std::nullopt, std::nullopt});
  Result<ReplayOutcome> outcome = ReplayPolicies(
      [&](TraceHeader& header, EventSink& sink) { return ReadTrace(path, header, sink); }, request);
  EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
  return std::move(*outcome);
}

std::string TinyReportText() {
  ReportContext context;
  context.memory_model = "caching";
  context.trace_name = "tiny-ws2.json";
  context.trace_digest = "fnv1a64:0000000000000000";
  context.argv = {"bucketsim", "compare"};
  return ReportJsonText(ReplayTiny(), context);
}

TEST(ReportReader, ReadsBackEveryFigureTheReplayWrote) {
  ReplayOutcome outcome = ReplayTiny();
  Result<ReportDocument> doc = ParseReport(TinyReportText(), "tiny.json");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ(doc->source, "tiny.json");
  EXPECT_EQ(doc->context.trace_name, "tiny-ws2.json");
  EXPECT_EQ(doc->context.argv, (std::vector<std::string>{"bucketsim", "compare"}));
  EXPECT_EQ(doc->trace.world_size, 2);
  EXPECT_EQ(doc->trace.events, 38u);
  ASSERT_EQ(doc->runs.size(), outcome.runs.size());
  for (std::size_t i = 0; i < outcome.runs.size(); ++i) {
    const RunResult& want = outcome.runs[i];
    const RunResult& got = doc->runs[i];
    SCOPED_TRACE(want.policy);
    EXPECT_EQ(got.policy, want.policy);
    EXPECT_EQ(got.peak.allocated_bytes, want.peak.allocated_bytes);
    EXPECT_EQ(got.peak.reserved_bytes, want.peak.reserved_bytes);
    EXPECT_EQ(got.peak.by_category, want.peak.by_category);
    EXPECT_EQ(got.peak.phase, want.peak.phase);
    ASSERT_TRUE(got.peak.fragmentation.has_value());
    EXPECT_EQ(got.peak.fragmentation->inactive_split_bytes,
              want.peak.fragmentation->inactive_split_bytes);
    ASSERT_EQ(got.phases.size(), want.phases.size());
    EXPECT_EQ(got.phases.back().end_event, 38u);
    ASSERT_EQ(got.timeline.points.size(), want.timeline.points.size());
    EXPECT_EQ(got.timeline.points[27].allocated_bytes, want.timeline.points[27].allocated_bytes);
    ASSERT_EQ(got.bucket_lifetimes.size(), want.bucket_lifetimes.size());
    for (std::size_t b = 0; b < want.bucket_lifetimes.size(); ++b) {
      EXPECT_EQ(got.bucket_lifetimes[b].freed_event, want.bucket_lifetimes[b].freed_event);
      EXPECT_EQ(got.bucket_lifetimes[b].retired_event, want.bucket_lifetimes[b].retired_event);
      EXPECT_EQ(got.bucket_lifetimes[b].bytes, want.bucket_lifetimes[b].bytes);
    }
    EXPECT_EQ(got.marks.size(), want.marks.size());
  }
}

Status ParseEdited(void (*edit)(nlohmann::ordered_json&)) {
  nlohmann::ordered_json report = nlohmann::ordered_json::parse(TinyReportText());
  edit(report);
  return ParseReport(report.dump(), "r.json").status();
}

TEST(ReportReader, RejectsAnotherSchemaVersion) {
  Status status = ParseEdited([](nlohmann::ordered_json& r) { r["schema_version"] = 2; });
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "r.json: /schema_version: this bucketsim reads report schema_version 1, not 2");
}

TEST(ReportReader, NamesTheJsonPathOfAMissingOrMistypedFigure) {
  Status missing =
      ParseEdited([](nlohmann::ordered_json& r) { r["policies"][2]["peak"].erase("by_category"); });
  EXPECT_EQ(missing.message(),
            "r.json: /policies/2/peak/by_category: missing (the report needs an object here)");
  Status mistyped = ParseEdited(
      [](nlohmann::ordered_json& r) { r["policies"][0]["peak_allocated_bytes"] = "12 GiB"; });
  EXPECT_EQ(mistyped.message(),
            "r.json: /policies/0/peak_allocated_bytes: expected an integer >= 0, got \"12 GiB\"");
  Status category = ParseEdited([](nlohmann::ordered_json& r) {
    r["policies"][1]["bucket_lifetimes"][0]["category"] = "bucket";
  });
  EXPECT_EQ(category.message(),
            "r.json: /policies/1/bucket_lifetimes/0/category: unknown category 'bucket'");
}

TEST(ReportReader, AcceptsAReportWithoutTheTimeline) {
  // Reports written before the timeline existed: the page says it has none.
  nlohmann::ordered_json report = nlohmann::ordered_json::parse(TinyReportText());
  for (auto& policy : report["policies"]) {
    policy.erase("timeline");
    policy.erase("bucket_lifetimes");
    policy.erase("bucket_lifetimes_dropped");
    for (auto& phase : policy["phases"]) phase.erase("end_event");
  }
  Result<ReportDocument> doc = ParseReport(report.dump(), "old.json");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_FALSE(doc->has_timeline);
  EXPECT_EQ(doc->runs[0].phases[1].end_event, doc->runs[0].phases[2].first_event);
  EXPECT_EQ(doc->runs[0].phases.back().end_event, 38u);
}

TEST(ReportReader, RejectsWhatIsNotAReport) {
  EXPECT_EQ(ParseReport("{\"schema_version\": 1,", "t.json").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_NE(ParseReport("{\"a\": 1,", "t.json")
                .status()
                .message()
                .find("t.json: not a valid report: parse error"),
            std::string::npos);
  EXPECT_EQ(ParseReport("[1, 2]", "t.json").status().message(),
            "t.json: (top level): expected an object (a report), got [1,2]");
  EXPECT_EQ(ParseReport(R"({"policy": []})", "x.json").status().message(),
            "x.json: (top level): no schema_version: not a bucketsim report "
            "(reports/README.md)");
  EXPECT_EQ(ParseReport(R"({"schema_version": 2, "events": []})", "trace.json").status().message(),
            "trace.json: this is a trace, not a report (a report comes from compare, check or "
            "sweep --json)");
  Result<ReportDocument> missing = ReadReportFile("/nonexistent/report.json");
  EXPECT_EQ(missing.status().code(), StatusCode::kIoError);
  EXPECT_EQ(missing.status().message(),
            "cannot read report '/nonexistent/report.json': No such file or directory");
}

// --- what `check --baseline` reads (ReportContent::kFigures) --------------------------------

TEST(ReportReaderFigures, ReadsTheGoldenReportOfTheTinyTrace) {
  Result<ReportDocument> report = ReadReportFile(
      BUCKETSIM_SOURCE_DIR "/tests/golden/compare-tiny-ws2.json", ReportContent::kFigures);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->context.memory_model, "caching");
  EXPECT_EQ(report->context.trace_digest.rfind("fnv1a64:", 0), 0u);
  ASSERT_EQ(report->runs.size(), 4u);
  ASSERT_EQ(report->runs[1].policy, "backward-only");
  // tests/cli/check_command_test.cc: peak 3261440 B, 6 MiB reserved; "after fwd" at most
  // 2106368 B, "after bwd" at most 1572864 B (tests/engine/tiny_trace_test.cc).
  PolicyFigures backward = FiguresOf(*report, 1);
  EXPECT_EQ(backward.peak_allocated_bytes, 3261440u);
  EXPECT_EQ(backward.peak_reserved_bytes, 6291456u);
  EXPECT_EQ(backward.AtMark("after fwd"), 2106368u);
  EXPECT_EQ(backward.AtMark("after bwd"), 1572864u);
  EXPECT_EQ(backward.step_time_us, 350.0);
  EXPECT_FALSE(backward.out_of_memory);
}

TEST(ReportReaderFigures, ThePageReadsTheSameFigures) {
  const std::string golden = BUCKETSIM_SOURCE_DIR "/tests/golden/compare-tiny-ws2.json";
  Result<ReportDocument> figures = ReadReportFile(golden, ReportContent::kFigures);
  Result<ReportDocument> page = ReadReportFile(golden);
  ASSERT_TRUE(figures.ok() && page.ok());
  for (std::size_t i = 0; i < page->runs.size(); ++i) {
    PolicyFigures a = FiguresOf(*figures, i);
    PolicyFigures b = FiguresOf(*page, i);
    EXPECT_EQ(a.policy, b.policy);
    EXPECT_EQ(a.peak_allocated_bytes, b.peak_allocated_bytes);
    EXPECT_EQ(a.mark_bytes, b.mark_bytes);
    EXPECT_EQ(a.step_time_us, b.step_time_us);
  }
}

TEST(ReportReaderFigures, AnOomPolicyIsMarked) {
  Result<ReportDocument> report =
      ReadReportFile(BUCKETSIM_SOURCE_DIR "/tests/golden/compare-tiny-ws2-4mib-device.json",
                     ReportContent::kFigures);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->runs[1].policy, "backward-only");
  EXPECT_TRUE(FiguresOf(*report, 1).out_of_memory);
}

constexpr const char* kContext =
    R"("context": {"memory_model": "exact", "trace_digest": "fnv1a64:0000000000000000"},
       "trace": {"world_size": 2, "rank": 0, "bucket_cap_mb": 25})";

Result<ReportDocument> ParseFigures(const std::string& source, const std::string& text) {
  return ParseReport(text, source, ReportContent::kFigures);
}

std::string FiguresErrorOf(const std::string& text) {
  Result<ReportDocument> report = ParseFigures("base.json", text);
  EXPECT_FALSE(report.ok()) << text;
  return report.ok() ? std::string() : report.status().message();
}

TEST(ReportReaderFigures, ErrorsNameTheFileAndTheField) {
  EXPECT_EQ(FiguresErrorOf(R"({"schema_version": 7})"),
            "base.json: /schema_version: this bucketsim reads report schema_version 1, not 7");
  EXPECT_EQ(FiguresErrorOf(R"({"schema_version": 1, "policies": []})"),
            "base.json: /context: missing (the report needs an object here)");
  EXPECT_EQ(FiguresErrorOf(R"({"schema_version": 1, "context": {}, "policies": []})"),
            "base.json: /context/memory_model: missing (the report needs a string here)");
  EXPECT_EQ(
      FiguresErrorOf(std::string(R"({"schema_version": 1, )") + kContext + R"(, "policies": []})"),
      "base.json: /policies: the report has no policy");
  EXPECT_EQ(FiguresErrorOf(std::string(R"({"schema_version": 1, )") + kContext +
                           R"(, "policies": [{"policy": "x", "peak_allocated_bytes": 1.5}]})"),
            "base.json: /policies/0/peak_allocated_bytes: expected an integer >= 0, got 1.5");
  EXPECT_EQ(FiguresErrorOf(std::string(R"({"schema_version": 1, )") + kContext +
                           R"(, "policies": [{"policy": "x", "peak_allocated_bytes": 1,
                        "peak_reserved_bytes": 1, "marks": [{"name": "m"}]}]})"),
            "base.json: /policies/0/marks/0/allocated_bytes: missing (the report needs an "
            "integer >= 0 here)");
  std::string one = R"({"policy": "x", "peak_allocated_bytes": 1, "peak_reserved_bytes": 1,
                        "marks": [], "bucket_cap_mb": 25})";
  EXPECT_EQ(FiguresErrorOf(std::string(R"({"schema_version": 1, )") + kContext +
                           R"(, "policies": [)" + one + "," + one + "]}"),
            "base.json: /policies/1/policy: policy 'x' appears twice");
  EXPECT_NE(FiguresErrorOf("{\"schema_version\": 1")
                .find("base.json: not a valid report: parse "
                      "error"),
            std::string::npos);
}

TEST(ReportReaderFigures, StepTimeOnlyWhenAnIterationWasTimed) {
  std::string head = std::string(R"({"schema_version": 1, )") + kContext +
                     R"(, "policies": [{"policy": "x", "peak_allocated_bytes": 1,
                         "peak_reserved_bytes": 2, "marks": [], "bucket_cap_mb": 25, "timing": )";
  Result<ReportDocument> timed = ParseFigures(
      "t.json", head + R"({"step_time_us": 12.5, "iterations": [{"iteration": 0}]}}]})");
  ASSERT_TRUE(timed.ok()) << timed.status().ToString();
  EXPECT_EQ(FiguresOf(*timed, 0).step_time_us, 12.5);
  Result<ReportDocument> untimed =
      ParseFigures("u.json", head + R"({"step_time_us": 0.0, "iterations": []}}]})");
  ASSERT_TRUE(untimed.ok()) << untimed.status().ToString();
  EXPECT_EQ(FiguresOf(*untimed, 0).step_time_us, std::nullopt);
  EXPECT_EQ(ParseFigures("b.json", head + R"({"step_time_us": "fast", "iterations": [{}]}}]})")
                .status()
                .message(),
            "b.json: /policies/0/timing/step_time_us: expected a number, got \"fast\"");
}

TEST(ReportReaderFigures, AnOlderReportWithoutStepTimeReads) {
  Result<ReportDocument> report =
      ParseFigures("old.json", std::string(R"({"schema_version": 1, )") + kContext +
                                   R"(, "policies": [{"policy": "x", "peak_allocated_bytes": 1,
                          "peak_reserved_bytes": 2, "oom": null, "bucket_cap_mb": 25, "marks": [
                            {"name": "m", "allocated_bytes": 5},
                            {"name": "m", "allocated_bytes": 4}]}]})");
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(FiguresOf(*report, 0).step_time_us, std::nullopt);
  EXPECT_EQ(FiguresOf(*report, 0).AtMark("m"), 5u);
}

TEST(ReportReaderFigures, ThePageNeedsMoreThanABaseline) {
  // A baseline cut to its figures is not a page.
  std::string cut = std::string(R"({"schema_version": 1, )") + kContext +
                    R"(, "policies": [{"policy": "x", "peak_allocated_bytes": 1,
                         "peak_reserved_bytes": 2, "marks": [], "bucket_cap_mb": 25}]})";
  ASSERT_TRUE(ParseFigures("cut.json", cut).ok());
  EXPECT_EQ(ParseReport(cut, "cut.json").status().message(),
            "cut.json: /context/backend: missing (the report needs a string here)");
}

// --- the sweep section ----------------------------------------------------------------------

// `bucketsim sweep` of the tiny trace with the H100 profile and a budget, as JSON
// (tests/cli/time_commands_test.cc: cap 1 MiB reserves 8 MiB and is the fastest that fits).
std::string TinySweepJson() {
  testing::BinaryResult run = testing::RunBucketsim(
      {"sweep", "traces/tiny-ws2.json", "--bucket-cap-mb", "0.0625,0.25,1", "--policy",
       "backward-only", "--policy", "unbucketed", "--profile",
       "traces/profiles/h100-8gpu-nvlink.json", "--budget", "8MiB", "--format", "json"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return run.out;
}

TEST(ReportReaderSweep, ReadsTheSweepOfTheRealBinary) {
  const std::string text = TinySweepJson();
  const nlohmann::json json = nlohmann::json::parse(text);
  Result<ReportDocument> doc = ParseReport(text, "sweep.json");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  ASSERT_TRUE(doc->sweep.has_value());
  const std::vector<SweepPoint>& points = doc->sweep->points;
  ASSERT_EQ(points.size(), 4u);
  ASSERT_EQ(doc->runs.size(), 4u);
  const char* caps[] = {"0.0625", "0.25", "1", "0"};
  for (std::size_t i = 0; i < points.size(); ++i) {
    SCOPED_TRACE(i);
    const nlohmann::json& want = json["sweep"]["points"][i];
    EXPECT_EQ(points[i].policy, i < 3 ? "backward-only" : "unbucketed");
    EXPECT_EQ(fmt::format("{:g}", points[i].bucket_cap_mb), caps[i]);
    EXPECT_EQ(points[i].canonical, want["canonical"]);
    EXPECT_EQ(points[i].peak_allocated_bytes, doc->runs[i].peak.allocated_bytes);
    EXPECT_EQ(points[i].peak_reserved_bytes, doc->runs[i].peak.reserved_bytes);
    EXPECT_EQ(points[i].step_time_us, want["step_time_us"].get<double>());
    EXPECT_EQ(doc->step_time_us[i], points[i].step_time_us);
    EXPECT_EQ(points[i].exposed_communication_us, want["exposed_communication_us"].get<double>());
    EXPECT_EQ(points[i].pareto, want["pareto"].get<bool>());
    EXPECT_FALSE(points[i].out_of_memory);
  }
  // Cap 1 MiB: 8 MiB reserved, the fastest; the others 6 MiB, cap 0.25 MiB no faster than 0.0625
  // with more allocated: all but it are optimal.
  EXPECT_EQ(points[2].peak_reserved_bytes, 8u * kMiB);
  EXPECT_EQ(points[0].peak_reserved_bytes, 6u * kMiB);
  EXPECT_LT(points[2].step_time_us, points[0].step_time_us);
  EXPECT_EQ(
      (std::vector<bool>{points[0].pareto, points[1].pareto, points[2].pareto, points[3].pareto}),
      (std::vector<bool>{true, false, true, true}));
  ASSERT_TRUE(doc->sweep->budget.has_value());
  EXPECT_EQ(doc->sweep->budget->budget_bytes, 8u * kMiB);
  EXPECT_EQ(doc->sweep->budget->best, std::optional<std::size_t>(2));
}

TEST(ReportReaderSweep, ABadSweepSectionNamesItsField) {
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(TinySweepJson());
  nlohmann::ordered_json fewer = json;
  fewer["sweep"]["points"].erase(fewer["sweep"]["points"].begin());
  EXPECT_EQ(ParseReport(fewer.dump(), "s.json").status().message(),
            "s.json: /sweep/points: 3 point(s) for 4 policy entries: expected one per entry");
  nlohmann::ordered_json index = json;
  index["sweep"]["budget"]["best"] = 4;
  EXPECT_EQ(ParseReport(index.dump(), "s.json").status().message(),
            "s.json: /sweep/budget/best: expected the index of a point (0..3) or null");
  nlohmann::ordered_json pareto = json;
  pareto["sweep"]["points"][1]["pareto"] = "yes";
  EXPECT_EQ(ParseReport(pareto.dump(), "s.json").status().message(),
            "s.json: /sweep/points/1/pareto: expected true or false, got \"yes\"");
  nlohmann::ordered_json other = json;
  other["sweep"]["points"][3]["policy"] = "backward-only";
  EXPECT_EQ(ParseReport(other.dump(), "s.json").status().message(),
            "s.json: /sweep/points/3/policy: 'backward-only' but policies[3] is 'unbucketed'");
}

TEST(ReportReaderSweep, ACompareReportHasNoSweep) {
  Result<ReportDocument> doc = ParseReport(TinyReportText(), "tiny.json");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_FALSE(doc->sweep.has_value());
}

// `sweep TRACE...`: the sweeps of the tiny trace and the convnet in one file, read as one
// document per trace, each what the trace's own report reads as.
TEST(ReportReaderSweeps, ReadsOneDocumentPerTraceOfTheRealBinary) {
  auto sweep = [](std::vector<std::string> traces) {
    std::vector<std::string> args = {"sweep"};
    args.insert(args.end(), traces.begin(), traces.end());
    for (const char* arg : {"--bucket-cap-mb", "0.25,1", "--policy", "backward-only", "--budget",
                            "8MiB", "--format", "json"}) {
      args.push_back(arg);
    }
    testing::BinaryResult run = testing::RunBucketsim(args);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return run.out;
  };
  const std::string both = sweep({"traces/tiny-ws2.json", "traces/convnet-ws2.json"});
  Result<std::vector<ReportDocument>> docs = ParseReportDocuments(both, "both.json");
  ASSERT_TRUE(docs.ok()) << docs.status().ToString();
  ASSERT_EQ(docs->size(), 2u);
  const char* names[] = {"tiny-ws2.json", "convnet-ws2.json"};
  for (std::size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(names[i]);
    Result<ReportDocument> alone =
        ParseReport(sweep({std::string("traces/") + names[i]}), "alone.json");
    ASSERT_TRUE(alone.ok()) << alone.status().ToString();
    const ReportDocument& doc = (*docs)[i];
    EXPECT_EQ(doc.source, "both.json");
    EXPECT_EQ(doc.context.trace_name, names[i]);
    EXPECT_EQ(doc.context.trace_digest, alone->context.trace_digest);
    EXPECT_EQ(doc.trace.events, alone->trace.events);
    ASSERT_TRUE(doc.sweep.has_value());
    ASSERT_EQ(doc.sweep->points.size(), 2u);
    ASSERT_EQ(doc.runs.size(), alone->runs.size());
    for (std::size_t r = 0; r < doc.runs.size(); ++r) {
      EXPECT_EQ(doc.runs[r].peak.reserved_bytes, alone->runs[r].peak.reserved_bytes);
      EXPECT_EQ(doc.sweep->points[r].pareto, alone->sweep->points[r].pareto);
    }
    EXPECT_EQ(doc.sweep->budget->best, alone->sweep->budget->best);
  }
  // A single report reads as one document.
  Result<std::vector<ReportDocument>> one = ParseReportDocuments(TinyReportText(), "tiny.json");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->size(), 1u);
}

TEST(ReportReaderSweeps, ErrorsNameThePointerWithinTheFile) {
  nlohmann::ordered_json element = nlohmann::ordered_json::parse(TinySweepJson());
  nlohmann::ordered_json file = {{"schema_version", 1}, {"sweeps", {element, element}}};
  ASSERT_TRUE(ParseReportDocuments(file.dump(), "m.json").ok());
  nlohmann::ordered_json bad = file;
  bad["sweeps"][1]["policies"][0]["peak_allocated_bytes"] = -1;
  EXPECT_EQ(ParseReportDocuments(bad.dump(), "m.json").status().message(),
            "m.json: /sweeps/1/policies/0/peak_allocated_bytes: expected an integer >= 0, got -1");
  nlohmann::ordered_json version = file;
  version["sweeps"][0]["schema_version"] = 2;
  EXPECT_EQ(ParseReportDocuments(version.dump(), "m.json").status().message(),
            "m.json: /sweeps/0/schema_version: expected the file's, 1");
  nlohmann::ordered_json compare = file;
  compare["sweeps"][1].erase("sweep");
  EXPECT_EQ(ParseReportDocuments(compare.dump(), "m.json").status().message(),
            "m.json: /sweeps/1: expected a sweep report, with its `sweep`");
  nlohmann::ordered_json none = {{"schema_version", 1},
                                 {"sweeps", nlohmann::ordered_json::array()}};
  EXPECT_EQ(ParseReportDocuments(none.dump(), "m.json").status().message(),
            "m.json: /sweeps: expected the report of every trace swept, got none");
  // Where one report is read (check --baseline), a file of several says what it is.
  EXPECT_EQ(ParseReport(file.dump(), "m.json", ReportContent::kFigures).status().message(),
            "m.json: /sweeps: the sweeps of 2 traces, where one report is read (a baseline is "
            "the report of one trace: sweep it alone)");
}

}  // namespace
}  // namespace bucketsim
