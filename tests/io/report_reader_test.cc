#include "io/report_reader.h"

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
  request.make_memory_model = *MakeMemoryModelFactory({"caching", "", std::nullopt});
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
            "r.json: schema_version: report schema_version 2 is not supported; this bucketsim "
            "reads versions 1..1");
}

TEST(ReportReader, NamesTheJsonPathOfAMissingOrMistypedFigure) {
  Status missing =
      ParseEdited([](nlohmann::ordered_json& r) { r["policies"][2]["peak"].erase("by_category"); });
  EXPECT_EQ(missing.message(), "r.json: policies[2].peak.by_category: missing");
  Status mistyped = ParseEdited(
      [](nlohmann::ordered_json& r) { r["policies"][0]["peak_allocated_bytes"] = "12 GiB"; });
  EXPECT_EQ(mistyped.message(),
            "r.json: policies[0].peak_allocated_bytes: expected an integer >= 0");
  Status category = ParseEdited([](nlohmann::ordered_json& r) {
    r["policies"][1]["bucket_lifetimes"][0]["category"] = "bucket";
  });
  EXPECT_EQ(category.message(),
            "r.json: policies[1].bucket_lifetimes[0].category: unknown category 'bucket'");
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
  EXPECT_NE(ParseReport("{\"a\": 1,", "t.json").status().message().find("t.json: not valid JSON"),
            std::string::npos);
  EXPECT_EQ(ParseReport("[1, 2]", "t.json").status().message(),
            "t.json: (top level): expected a JSON object (a bucketsim report)");
  EXPECT_EQ(ParseReport(R"({"policy": []})", "x.json").status().message(),
            "x.json: (top level): no schema_version: not a bucketsim report "
            "(reports/README.md)");
  EXPECT_EQ(ParseReport(R"({"schema_version": 2, "events": []})", "trace.json").status().message(),
            "trace.json: (top level): a trace, not a report; make the report with 'bucketsim "
            "compare TRACE --json REPORT.json'");
  Result<ReportDocument> missing = ReadReportFile("/nonexistent/report.json");
  EXPECT_EQ(missing.status().code(), StatusCode::kIoError);
  EXPECT_EQ(missing.status().message(),
            "cannot open report '/nonexistent/report.json': No such file or directory");
}

}  // namespace
}  // namespace bucketsim
