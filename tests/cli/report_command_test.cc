// `bucketsim report` and `compare --html/--format markdown` end to end: the Markdown and HTML
// pages of the tiny trace compared exactly with reviewed copies in tests/golden/ (the context
// block made deterministic with BUCKETSIM_DETERMINISTIC_CONTEXT=1), and bad input.
// BUCKETSIM_UPDATE_GOLDENS=1 ctest --test-dir build -R Golden rewrites the goldens.
#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/run_binary.h"

namespace bucketsim {
namespace {

using testing::BinaryResult;
using testing::ReadFile;
using testing::RunBucketsim;

class ReportCommand : public ::testing::Test {
 protected:
  void SetUp() override { setenv("BUCKETSIM_DETERMINISTIC_CONTEXT", "1", 1); }
  void TearDown() override { unsetenv("BUCKETSIM_DETERMINISTIC_CONTEXT"); }

  // The JSON report of the tiny trace (caching model), at a path without directories in the
  // context: "tiny.json" in the test's temporary directory.
  std::string TinyReport() {
    BinaryResult run = RunBucketsim({"compare", "traces/tiny-ws2.json", "--format", "json"});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return testing::WriteTempFile("tiny.json", run.out);
  }
};

void ExpectGoldenText(const std::string& golden_name, const std::string& actual) {
  std::string golden_path = std::string(BUCKETSIM_SOURCE_DIR) + "/tests/golden/" + golden_name;
  if (const char* update = std::getenv("BUCKETSIM_UPDATE_GOLDENS"); update && *update == '1') {
    std::filesystem::create_directories(std::filesystem::path(golden_path).parent_path());
    FILE* f = std::fopen(golden_path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(actual.data(), 1, actual.size(), f);
    std::fclose(f);
    GTEST_SKIP() << "rewrote " << golden_path;
  }
  std::string expected = ReadFile(golden_path);
  ASSERT_FALSE(expected.empty()) << "missing golden file " << golden_path;
  EXPECT_EQ(actual, expected);
}

// The page names its input file; the golden's is "tiny.json" wherever the test ran.
std::string WithoutTempDir(std::string text, const std::string& dir) {
  for (auto at = text.find(dir); at != std::string::npos; at = text.find(dir)) {
    text.erase(at, dir.size());
  }
  return text;
}

TEST_F(ReportCommand, GoldenMarkdownAndHtmlOfTheTinyTrace) {
  std::string report = TinyReport();
  std::string dir = std::filesystem::path(report).parent_path().string() + "/";
  std::string out = dir + "page";
  BinaryResult run = RunBucketsim({"report", report, "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "report: " + out + "/report.html, " + out + "/report.md\n");
  ExpectGoldenText("report-tiny-ws2.md", WithoutTempDir(ReadFile(out + "/report.md"), dir));
  ExpectGoldenText("report-tiny-ws2.html", WithoutTempDir(ReadFile(out + "/report.html"), dir));
  // Every chart report.md links is there.
  for (const char* chart : {"memory-over-time", "peak-composition", "fragmentation",
                            "bucket-lifetimes-1", "bucket-lifetimes-2", "bucket-lifetimes-3"}) {
    std::string svg = ReadFile(out + "/charts/" + chart + ".svg");
    EXPECT_EQ(svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 0), 0u) << chart;
  }
}

TEST_F(ReportCommand, GoldenCompareMarkdownOnStdout) {
  BinaryResult run = RunBucketsim(
      {"compare", "traces/tiny-ws2.json", "--format", "markdown", "--allocator", "exact"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ExpectGoldenText("compare-tiny-ws2-exact.md", run.out);
}

TEST_F(ReportCommand, CompareHtmlIsThePageOfItsOwnReport) {
  std::string html = testing::WriteTempFile("compare.html", "");
  std::string json = testing::WriteTempFile("compare-html.json", "");
  BinaryResult run =
      RunBucketsim({"compare", "traces/tiny-ws2.json", "--html", html, "--json", json});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("html report: " + html), std::string::npos);
  std::string out = std::filesystem::path(json).parent_path().string() + "/from-json";
  ASSERT_EQ(RunBucketsim({"report", json, "-o", out}).exit_code, 0);
  // The same page, but for the report file the second one names in its context block.
  std::string from_json = ReadFile(out + "/report.html");
  std::string entry = "<dt>report file</dt><dd>" + json + "</dd>\n";
  ASSERT_NE(from_json.find(entry), std::string::npos);
  from_json.erase(from_json.find(entry), entry.size());
  EXPECT_EQ(ReadFile(html), from_json);
}

// The framework's own setting travels in the report: `report` on the JSON of an FSDP1 trace
// quotes the trace's fsdp_setting in its across-frameworks table, as `compare` did.
TEST_F(ReportCommand, TheFrameworkSettingSurvivesTheJsonReport) {
  std::string trace = testing::WriteTempFile("fsdp1-setting.json", "");
  ASSERT_EQ(RunBucketsim({"gen", "transformer", "--layers", "2", "--hidden", "64", "--heads", "2",
                          "--seq", "32", "--vocab", "128", "--world-size", "2", "--fsdp-impl",
                          "fsdp1", "-o", trace})
                .exit_code,
            0);
  std::string json = testing::WriteTempFile("fsdp1-setting-report.json", "");
  BinaryResult compare = RunBucketsim({"compare", trace, "--policy", "fsdp1", "--policy",
                                       "backward-only", "--json", json, "--format", "markdown"});
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  const std::string setting =
      "| fsdp1 | PyTorch FSDP1 | FullyShardedDataParallel(module, "
      "sharding_strategy=ShardingStrategy.FULL_SHARD, backward_prefetch=BackwardPrefetch."
      "BACKWARD_PRE, forward_prefetch=False, limit_all_gathers=True, use_orig_params=False) |";
  EXPECT_NE(compare.out.find(setting), std::string::npos) << compare.out;
  std::string out = std::filesystem::path(json).parent_path().string() + "/fsdp1-setting";
  BinaryResult report = RunBucketsim({"report", json, "-o", out});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(ReadFile(out + "/report.md").find(setting), std::string::npos)
      << ReadFile(out + "/report.md");
}

TEST_F(ReportCommand, SeveralReportsMakeOnePage) {
  std::string report = TinyReport();
  std::string out = std::filesystem::path(report).parent_path().string() + "/two";
  BinaryResult run = RunBucketsim({"report", report, report, "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::string md = ReadFile(out + "/report.md");
  EXPECT_EQ(md.rfind("# bucketsim report: 2 reports\n", 0), 0u);
  EXPECT_NE(md.find("## 2. tiny-ws2.json (caching memory model)"), std::string::npos);
  EXPECT_NE(md.find("![Memory over time](charts/r2-memory-over-time.svg)"), std::string::npos);
  EXPECT_FALSE(ReadFile(out + "/charts/r2-bucket-lifetimes-3.svg").empty());
}

TEST_F(ReportCommand, BadInputIsAnErrorWithExitCode2) {
  std::string out = testing::WriteTempFile("unused", "") + "-dir";
  BinaryResult missing = RunBucketsim({"report", "/nonexistent/r.json", "-o", out});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err,
            "bucketsim: error: cannot read report '/nonexistent/r.json': No such file or "
            "directory\n");

  BinaryResult trace = RunBucketsim({"report", "traces/tiny-ws2.json", "-o", out});
  EXPECT_EQ(trace.exit_code, 2);
  EXPECT_EQ(trace.err,
            "bucketsim: error: traces/tiny-ws2.json: this is a trace, not a report (a report "
            "comes from compare, check or sweep --json)\n");

  std::string truncated = testing::WriteTempFile("truncated.json", "{\"schema_version\": 1,");
  BinaryResult bad = RunBucketsim({"report", truncated, "-o", out});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find(truncated + ": not a valid report: parse error"), std::string::npos)
      << bad.err;

  EXPECT_EQ(RunBucketsim({"report", TinyReport()}).exit_code, 2);  // no -o
  EXPECT_FALSE(std::filesystem::exists(out));
}

// A sweep of the tiny trace (tests/cli/time_commands_test.cc): backward-only at three caps and
// unbucketed, the H100 profile, a budget of 8 MiB that cap 1 MiB (8 MiB reserved) just fits.
std::vector<std::string> TinySweep(std::vector<std::string> extra) {
  std::vector<std::string> args = {"sweep",           "traces/tiny-ws2.json",
                                   "--bucket-cap-mb", "0.0625,0.25,1",
                                   "--policy",        "backward-only",
                                   "--policy",        "unbucketed",
                                   "--profile",       "traces/profiles/h100-8gpu-nvlink.json",
                                   "--budget",        "8MiB"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST_F(ReportCommand, ASweepReportGetsItsTableAndParetoChart) {
  std::string json = testing::WriteTempFile("sweep.json", "");
  ASSERT_EQ(RunBucketsim(TinySweep({"--json", json})).exit_code, 0);
  std::string out = std::filesystem::path(json).parent_path().string() + "/sweep-page";
  BinaryResult run = RunBucketsim({"report", json, "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::string md = ReadFile(out + "/report.md");
  // One row per (policy, cap), the Pareto set marked, which fit the budget.
  const std::string heading = "# Sweep\n\n";
  std::size_t table = md.find(
      heading +
      "| policy | cap (MiB) | bucketed (requests) | peak alloc (MiB) | peak reserved (MiB) | step "
      "time (ms) | exposed comm (ms) | pareto | fits 8.00 MiB | chosen |\n");
  ASSERT_NE(table, std::string::npos) << md;
  table += heading.size();
  std::string rows = md.substr(table, md.find("\n\n", table) + 1 - table);
  EXPECT_EQ(std::count(rows.begin(), rows.end(), '\n'), 6) << rows;  // header, rule, 4 rows
  // cap 0.25 MiB: no faster than 0.0625 with the same reserved memory, so not optimal; it
  // buckets a and b (20,480 elements per rank <= S = 32,768) but not c (51,200), twice each.
  EXPECT_NE(
      rows.find("\n| backward-only | 0.25 | 4/6 | 3.11 | 6.00 | 0.615 | 0.264 |  | yes |  |\n"),
      std::string::npos)
      << rows;
  EXPECT_NE(
      rows.find(
          "\n| backward-only | 1 | 6/6 | 5.17 | 8.00 | 0.528 | 0.176 | * | yes | knee, budget |\n"),
      std::string::npos)
      << rows;
  // The advice under the table, as the terminal prints it.
  EXPECT_NE(md.find("Cap 0.0625 MiB buckets nothing: all 6 reduce requests"), std::string::npos)
      << md;
  EXPECT_NE(md.find("Setting for backward-only at cap 1 MiB (fairscale FSDP): "
                    "fairscale.nn.FullyShardedDataParallel(bucket_cap_mb=1)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("budget 8.00 MiB: fastest that fits is backward-only at cap 1 MiB"),
            std::string::npos)
      << md;
  // The Pareto chart first, then the others.
  std::size_t pareto = md.find(
      "# Memory versus step time (sweep)\n\n![Memory versus step time "
      "(sweep)](charts/pareto.svg)");
  ASSERT_NE(pareto, std::string::npos) << md;
  EXPECT_LT(pareto, md.find("# Memory over time"));
  std::string svg = ReadFile(out + "/charts/pareto.svg");
  EXPECT_NE(svg.find("<title>chosen within the budget: backward-only @ 1 MiB</title>"),
            std::string::npos);
  // unbucketed and backward-only at 0.0625 MiB (which buckets nothing) share a dot and a label.
  EXPECT_NE(svg.find(">unbucketed and 1 more</text>"), std::string::npos);
  EXPECT_NE(ReadFile(out + "/report.html").find("<h2>Sweep</h2>"), std::string::npos);
}

TEST_F(ReportCommand, SweepHtmlIsThePageOfItsOwnReport) {
  std::string html = testing::WriteTempFile("sweep.html", "");
  std::string json = testing::WriteTempFile("sweep-html.json", "");
  BinaryResult run = RunBucketsim(TinySweep({"--html", html, "--json", json}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("html report: " + html), std::string::npos);
  std::string out = std::filesystem::path(json).parent_path().string() + "/sweep-from-json";
  ASSERT_EQ(RunBucketsim({"report", json, "-o", out}).exit_code, 0);
  std::string from_json = ReadFile(out + "/report.html");
  std::string entry = "<dt>report file</dt><dd>" + json + "</dd>\n";
  ASSERT_NE(from_json.find(entry), std::string::npos);
  from_json.erase(from_json.find(entry), entry.size());
  EXPECT_EQ(ReadFile(html), from_json);
}

// `sweep TRACE...` of two traces: `report` of its JSON is the page `sweep --html` wrote, a
// section per trace, and the Markdown has each trace's sweep table and Pareto chart.
TEST_F(ReportCommand, ASweepOfSeveralTracesIsThePageSweepWrote) {
  std::vector<std::string> args = TinySweep({});
  args.insert(args.begin() + 2, "traces/convnet-ws2.json");
  const std::string html = testing::WriteTempFile("sweeps.html", "");
  const std::string json = testing::WriteTempFile("sweeps-html.json", "");
  args.insert(args.end(), {"--html", html, "--json", json});
  BinaryResult run = RunBucketsim(args);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string out = std::filesystem::path(json).parent_path().string() + "/sweeps-page";
  BinaryResult page = RunBucketsim({"report", json, "-o", out});
  ASSERT_EQ(page.exit_code, 0) << page.err;
  std::string from_json = ReadFile(out + "/report.html");
  // The page read back names its report file, once per trace.
  const std::string entry = "<dt>report file</dt><dd>" + json + "</dd>\n";
  for (int i = 0; i < 2; ++i) {
    ASSERT_NE(from_json.find(entry), std::string::npos) << i;
    from_json.erase(from_json.find(entry), entry.size());
  }
  EXPECT_EQ(from_json.find(entry), std::string::npos);
  EXPECT_EQ(ReadFile(html), from_json);
  const std::string md = ReadFile(out + "/report.md");
  EXPECT_EQ(md.rfind("# bucketsim report: 2 reports\n", 0), 0u);
  const std::size_t first = md.find("## 1. tiny-ws2.json (caching memory model)");
  const std::size_t second = md.find("## 2. convnet-ws2.json (caching memory model)");
  ASSERT_NE(first, std::string::npos) << md;
  ASSERT_NE(second, std::string::npos) << md;
  EXPECT_NE(md.find("### Sweep\n", first), std::string::npos);
  EXPECT_NE(md.find("### Sweep\n", second), std::string::npos);
  EXPECT_FALSE(ReadFile(out + "/charts/r1-pareto.svg").empty());
  EXPECT_FALSE(ReadFile(out + "/charts/r2-pareto.svg").empty());
}

// The rows of the first table body at or after `from` in an HTML page.
std::size_t TableRowsAfter(const std::string& page, std::size_t from) {
  const std::size_t body = page.find("<tbody>\n", from);
  const std::size_t end = page.find("</tbody>", body);
  if (body == std::string::npos || end == std::string::npos) return 0;
  std::size_t rows = 0;
  for (std::size_t at = page.find("<tr>", body); at < end; at = page.find("<tr>", at + 1)) ++rows;
  return rows;
}

std::size_t Count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::size_t ParetoPoints(const nlohmann::json& report) {
  std::size_t pareto = 0;
  for (const auto& point : report["sweep"]["points"]) pareto += point["pareto"].get<bool>();
  return pareto;
}

// A cap search replays tens of configurations, so the page collapses them: the table above the
// details is the Pareto-optimal configurations, on `sweep --html` and on `report` of its JSON
// alike (issue 22: its body was empty, the rows picked by point index from a table that lists
// only some of the points).
TEST_F(ReportCommand, ACollapsedSweepTableListsTheParetoConfigurations) {
  for (const char* caps : {"auto", "1,5,25,auto"}) {
    const std::string html = testing::WriteTempFile("searched.html", "");
    const std::string json = testing::WriteTempFile("searched.json", "");
    BinaryResult run =
        RunBucketsim({"sweep", "traces/tiny-ws2.json", "--bucket-cap-mb", caps, "--profile",
                      "traces/profiles/h100-8gpu-nvlink.json", "--html", html, "--json", json});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const std::size_t pareto = ParetoPoints(nlohmann::json::parse(ReadFile(json)));
    ASSERT_GT(pareto, 0u) << caps;
    const std::string out = std::filesystem::path(json).parent_path().string() + "/searched";
    ASSERT_EQ(RunBucketsim({"report", json, "-o", out}).exit_code, 0) << caps;
    for (const std::string& page : {ReadFile(html), ReadFile(out + "/report.html")}) {
      const std::size_t sweep = page.find("<h2>Sweep</h2>\n<p>The Pareto-optimal configurations");
      ASSERT_NE(sweep, std::string::npos) << caps;
      EXPECT_EQ(TableRowsAfter(page, sweep), pareto) << caps;
    }
  }
}

// The same for each trace of `sweep TRACE...`: each section's table has its own Pareto set.
TEST_F(ReportCommand, ACollapsedSweepOfTwoTracesListsEachOnesParetoConfigurations) {
  const std::string html = testing::WriteTempFile("searched-two.html", "");
  const std::string json = testing::WriteTempFile("searched-two.json", "");
  BinaryResult run =
      RunBucketsim({"sweep", "traces/tiny-ws2.json", "traces/gpt-4l-h256-ws4.json",
                    "--bucket-cap-mb", "1,5,25,auto", "--profile",
                    "traces/profiles/h100-8gpu-nvlink.json", "--html", html, "--json", json});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json reports = nlohmann::json::parse(ReadFile(json));
  ASSERT_EQ(reports["sweeps"].size(), 2u);
  const std::string page = ReadFile(html);
  std::size_t at = 0;
  for (const auto& report : reports["sweeps"]) {
    at = page.find("<h3>Sweep</h3>\n<p>The Pareto-optimal configurations", at + 1);
    ASSERT_NE(at, std::string::npos);
    EXPECT_GT(ParetoPoints(report), 0u);
    EXPECT_EQ(TableRowsAfter(page, at), ParetoPoints(report));
  }
}

// A cap search of three policies of two frameworks: the page opens with its recommendation,
// shows one row per policy in its tables and one line per policy in its memory chart, and keeps
// every run folded (issue 22: 13 near-identical rows, 13 bucket lifetime sections, 16 lines).
TEST_F(ReportCommand, APageOfManyRunsLeadsWithItsRecommendationAndFoldsTheOtherCaps) {
  const std::string json = testing::WriteTempFile("many-runs.json", "");
  BinaryResult run =
      RunBucketsim({"sweep", "traces/gpt-4l-h256-ws4.json", "--bucket-cap-mb", "1,5,25,auto",
                    "--policy", "backward-only", "--policy", "ddp", "--policy", "unbucketed",
                    "--profile", "traces/profiles/h100-8gpu-nvlink.json", "--json", json});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::size_t runs = nlohmann::json::parse(ReadFile(json))["policies"].size();
  ASSERT_GT(runs, 20u);
  const std::string out = std::filesystem::path(json).parent_path().string() + "/many-runs";
  ASSERT_EQ(RunBucketsim({"report", json, "-o", out}).exit_code, 0);
  const std::string md = ReadFile(out + "/report.md");
  const std::size_t recommendation = md.find("\n## Recommendation\n\n**Recommended: ");
  ASSERT_NE(recommendation, std::string::npos) << md.substr(0, 2000);
  EXPECT_LT(recommendation, md.find("\n## Policies\n"));
  // The recommendation is the sweep's advice, as the terminal prints it.
  const std::size_t setting = run.out.find("Setting for ");
  ASSERT_NE(setting, std::string::npos);
  EXPECT_NE(md.find(run.out.substr(setting, 60)), std::string::npos);
  // Policies and Across frameworks: a row per policy, the table of every run folded.
  const std::string one_row =
      "One row per policy: the recommended run, and each other policy at its own knee";
  EXPECT_EQ(Count(md, one_row), 2u);
  EXPECT_EQ(Count(md, fmt::format("<details>\n<summary>Every run ({})</summary>", runs)), 2u);
  const std::size_t frameworks = md.find("\n## Across frameworks\n");
  ASSERT_NE(frameworks, std::string::npos);
  const std::string shown = md.substr(frameworks, md.find("<details>", frameworks) - frameworks);
  EXPECT_EQ(Count(shown, "\n| backward-only |"), 1u) << shown;
  EXPECT_EQ(Count(shown, "\n| ddp |"), 1u) << shown;
  EXPECT_EQ(Count(shown, "\n| unbucketed |"), 1u) << shown;
  // The memory chart of every run is a file the page links.
  EXPECT_NE(md.find(fmt::format(
                "[Memory over time: every run ({})](charts/memory-over-time-all.svg)", runs)),
            std::string::npos);
  EXPECT_EQ(Count(ReadFile(out + "/charts/memory-over-time-all.svg"), ": allocated</title>"), runs);
  EXPECT_EQ(Count(ReadFile(out + "/charts/memory-over-time.svg"), ": allocated</title>"), 3u);
  // The HTML page: the recommendation before the first table; the other runs' sections folded.
  const std::string html = ReadFile(out + "/report.html");
  EXPECT_LT(html.find("<section class=\"advice\">\n<h2>Recommendation</h2>"), html.find("<table"));
  const std::size_t folded = html.find("<summary>Peaks of the other runs (");
  ASSERT_NE(folded, std::string::npos);
  EXPECT_EQ(Count(html.substr(0, folded), "</code>)</h2>"), 3u);  // a section per policy
  EXPECT_EQ(Count(html.substr(folded), "</code>)</h2>"), runs - 3);
}

// A comparison recommends too: the least peak reserved within 1% of the fastest step, here
// without a profile (so the page says the steps are compute alone).
TEST_F(ReportCommand, AComparisonRecommendsAPolicy) {
  BinaryResult run = RunBucketsim({"compare", "traces/tiny-ws2.json", "--format", "markdown"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::size_t at = run.out.find("\n## Recommendation\n\n**Recommended: ");
  ASSERT_NE(at, std::string::npos) << run.out;
  EXPECT_LT(at, run.out.find("\n## Policies\n"));
  EXPECT_NE(run.out.find("the least peak reserved memory within 1% of the fastest step.**"),
            std::string::npos);
  EXPECT_NE(run.out.find("No --profile: copies and collectives cost nothing"), std::string::npos);
}

}  // namespace
}  // namespace bucketsim
