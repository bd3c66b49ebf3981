// Reading a baseline back from a report: the figures a gate compares, the same rules as for a
// run (a mark is its largest sample), and clear errors for a report it cannot use.
#include "io/report_figures.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(ReportFigures, ReadsTheGoldenReportOfTheTinyTrace) {
  Result<ReportFigures> report =
      ReadReportFigures(BUCKETSIM_SOURCE_DIR "/tests/golden/compare-tiny-ws2.json");
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->memory_model, "caching");
  EXPECT_EQ(report->trace_digest.rfind("fnv1a64:", 0), 0u);
  ASSERT_EQ(report->policies.size(), 4u);
  const PolicyFigures* backward = report->Find("backward-only");
  ASSERT_NE(backward, nullptr);
  // tests/cli/check_command_test.cc: peak 3261440 B, 6 MiB reserved; "after fwd" at most
  // 2106368 B, "after bwd" at most 1572864 B (tests/engine/tiny_trace_test.cc).
  EXPECT_EQ(backward->peak_allocated_bytes, 3261440u);
  EXPECT_EQ(backward->peak_reserved_bytes, 6291456u);
  EXPECT_EQ(backward->AtMark("after fwd"), 2106368u);
  EXPECT_EQ(backward->AtMark("after bwd"), 1572864u);
  EXPECT_EQ(backward->step_time_us, 350.0);
  EXPECT_FALSE(backward->out_of_memory);
  EXPECT_EQ(report->Find("backward_only"), nullptr);
}

TEST(ReportFigures, AnOomPolicyIsMarked) {
  Result<ReportFigures> report =
      ReadReportFigures(BUCKETSIM_SOURCE_DIR "/tests/golden/compare-tiny-ws2-4mib-device.json");
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const PolicyFigures* backward = report->Find("backward-only");
  ASSERT_NE(backward, nullptr);
  EXPECT_TRUE(backward->out_of_memory);
}

constexpr const char* kContext =
    R"("context": {"memory_model": "exact", "trace_digest": "fnv1a64:0000000000000000"})";

std::string ErrorOf(const std::string& text) {
  Result<ReportFigures> report = ParseReportFigures("base.json", text);
  EXPECT_FALSE(report.ok()) << text;
  return report.ok() ? std::string() : report.status().message();
}

TEST(ReportFigures, ErrorsNameTheFileAndTheField) {
  EXPECT_EQ(ErrorOf(R"({"schema_version": 7})"),
            "base.json: /schema_version: this bucketsim reads report schema_version 1, not 7");
  EXPECT_EQ(ErrorOf(R"({"schema_version": 1, "policies": []})"),
            "base.json: /context/memory_model: missing (the report needs a string here)");
  EXPECT_EQ(ErrorOf(std::string(R"({"schema_version": 1, )") + kContext + R"(, "policies": []})"),
            "base.json: /policies: the report has no policy");
  EXPECT_EQ(ErrorOf(std::string(R"({"schema_version": 1, )") + kContext +
                    R"(, "policies": [{"policy": "x", "peak_allocated_bytes": 1.5}]})"),
            "base.json: /policies/0/peak_allocated_bytes: expected an integer >= 0, got 1.5");
  EXPECT_EQ(ErrorOf(std::string(R"({"schema_version": 1, )") + kContext +
                    R"(, "policies": [{"policy": "x", "peak_allocated_bytes": 1,
                        "peak_reserved_bytes": 1, "marks": [{"name": "m"}]}]})"),
            "base.json: /policies/0/marks/0/allocated_bytes: missing (the report needs an "
            "integer >= 0 here)");
  std::string one = R"({"policy": "x", "peak_allocated_bytes": 1, "peak_reserved_bytes": 1,
                        "marks": []})";
  EXPECT_EQ(ErrorOf(std::string(R"({"schema_version": 1, )") + kContext + R"(, "policies": [)" +
                    one + "," + one + "]}"),
            "base.json: /policies/1/policy: policy 'x' appears twice");
  EXPECT_NE(ErrorOf("{\"schema_version\": 1").find("base.json: not a valid report: parse error"),
            std::string::npos);
}

TEST(ReportFigures, StepTimeOnlyWhenAnIterationWasTimed) {
  std::string head = std::string(R"({"schema_version": 1, )") + kContext +
                     R"(, "policies": [{"policy": "x", "peak_allocated_bytes": 1,
                         "peak_reserved_bytes": 2, "marks": [], "timing": )";
  Result<ReportFigures> timed = ParseReportFigures(
      "t.json", head + R"({"step_time_us": 12.5, "iterations": [{"iteration": 0}]}}]})");
  ASSERT_TRUE(timed.ok()) << timed.status().ToString();
  EXPECT_EQ(timed->policies[0].step_time_us, 12.5);
  Result<ReportFigures> untimed =
      ParseReportFigures("u.json", head + R"({"step_time_us": 0.0, "iterations": []}}]})");
  ASSERT_TRUE(untimed.ok()) << untimed.status().ToString();
  EXPECT_EQ(untimed->policies[0].step_time_us, std::nullopt);
  EXPECT_EQ(
      ParseReportFigures("b.json", head + R"({"step_time_us": "fast", "iterations": [{}]}}]})")
          .status()
          .message(),
      "b.json: /policies/0/timing/step_time_us: expected a number, got \"fast\"");
}

TEST(ReportFigures, AnOlderReportWithoutStepTimeReads) {
  Result<ReportFigures> report = ParseReportFigures(
      "old.json", std::string(R"({"schema_version": 1, )") + kContext +
                      R"(, "policies": [{"policy": "x", "peak_allocated_bytes": 1,
                          "peak_reserved_bytes": 2, "oom": null, "marks": [
                            {"name": "m", "allocated_bytes": 5},
                            {"name": "m", "allocated_bytes": 4}]}]})");
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->policies[0].step_time_us, std::nullopt);
  EXPECT_EQ(report->policies[0].AtMark("m"), 5u);
}

}  // namespace
}  // namespace bucketsim
