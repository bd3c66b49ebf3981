// `bucketsim check` as a CI gate: budget files (alone and combined with flags), baselines with a
// tolerance, JUnit XML, and exit 2 for every file it cannot use. The figures are those of the
// tiny trace (tests/engine/tiny_trace_test.cc, tests/golden/compare-tiny-ws2.json):
// backward-only peaks at 3261440 B allocated and 6291456 B reserved (caching model); its
// "after fwd" is at most 2106368 B, "after bwd" 1572864 B, "after step" 1572864 B; each of the
// two iterations computes 350 us on stream 0, so the step time is 350.0 us. per-group-dedup
// peaks at 2999296 B allocated, 6291456 B reserved.
#include <gtest/gtest.h>

#include "testing/run_binary.h"

namespace bucketsim {
namespace {

using testing::BinaryResult;
using testing::RunBucketsim;
using testing::WriteTempFile;

constexpr const char* kTrace = "traces/tiny-ws2.json";

std::string Budget(const std::string& name, const std::string& policies) {
  return WriteTempFile(name, R"({"schema_version": 1, "policies": )" + policies + "}");
}

std::vector<std::string> Check(std::vector<std::string> extra) {
  std::vector<std::string> args = {"check", kTrace};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// --- budget file --------------------------------------------------------------------------

TEST(CheckBudgetFile, PassesAtExactlyEveryFigure) {
  std::string budget = Budget("exact.json", R"({"backward-only": {
      "max_peak_allocated": 3261440, "max_peak_reserved": "6MiB",
      "max_at_mark": {"after fwd": 2106368}, "max_step_time_us": 350}})");
  BinaryResult run = RunBucketsim(Check({"--budget", budget}));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "PASS backward-only: peak allocated 3.11 MiB (3261440 B) within budget 3.11 MiB "
            "(3261440 B)\n"
            "PASS backward-only: peak reserved 6.00 MiB (6291456 B) within budget 6.00 MiB "
            "(6291456 B)\n"
            "PASS backward-only: allocated at mark 'after fwd' 2.01 MiB (2106368 B) within budget "
            "2.01 MiB (2106368 B)\n"
            "PASS backward-only: step time 350.0 us within budget 350.0 us\n"
            "verdict: PASS (4 checks: 4 passed, 0 failed, 0 skipped)\n");
}

TEST(CheckBudgetFile, EachKindOfBreachFails) {
  struct Case {
    const char* budget;
    const char* line;
  };
  const Case cases[] = {
      {R"({"max_peak_allocated": 3261439})",
       "FAIL backward-only: peak allocated 3.11 MiB (3261440 B) exceeds budget 3.11 MiB "
       "(3261439 B)"},
      {R"({"max_peak_reserved": 6291455})",
       "FAIL backward-only: peak reserved 6.00 MiB (6291456 B) exceeds budget 6.00 MiB "
       "(6291455 B)"},
      {R"({"max_at_mark": {"after bwd": "1572863B"}})",
       "FAIL backward-only: allocated at mark 'after bwd' 1.50 MiB (1572864 B) exceeds budget "
       "1.50 MiB (1572863 B)"},
      {R"({"max_step_time_us": 349.9})",
       "FAIL backward-only: step time 350.0 us exceeds budget 349.9 us"},
  };
  for (const Case& c : cases) {
    std::string budget =
        Budget("breach.json", std::string(R"({"backward-only": )") + c.budget + "}");
    BinaryResult run = RunBucketsim(Check({"--budget", budget}));
    EXPECT_EQ(run.exit_code, 1) << c.budget << run.err;
    EXPECT_EQ(run.out,
              std::string(c.line) + "\nverdict: FAIL (1 check: 0 passed, 1 failed, 0 skipped)\n")
        << c.budget;
  }
}

TEST(CheckBudgetFile, ReplaysThePoliciesItNamesWithTheDefaultUnderEach) {
  std::string budget = Budget("two.json", R"({
      "*": {"max_peak_reserved": "6MiB"},
      "per-group-dedup": {"max_peak_allocated": 2999296},
      "backward-only": {"max_peak_allocated": 2999296}})");
  BinaryResult run = RunBucketsim(Check({"--budget", budget}));
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_EQ(run.out,
            "PASS per-group-dedup: peak allocated 2.86 MiB (2999296 B) within budget 2.86 MiB "
            "(2999296 B)\n"
            "PASS per-group-dedup: peak reserved 6.00 MiB (6291456 B) within budget 6.00 MiB "
            "(6291456 B)\n"
            "FAIL backward-only: peak allocated 3.11 MiB (3261440 B) exceeds budget 2.86 MiB "
            "(2999296 B)\n"
            "PASS backward-only: peak reserved 6.00 MiB (6291456 B) within budget 6.00 MiB "
            "(6291456 B)\n"
            "verdict: FAIL (4 checks: 3 passed, 1 failed, 0 skipped)\n");
  // --policy chooses among them; a policy the file does not name gets "*" alone.
  BinaryResult chosen = RunBucketsim(
      Check({"--budget", budget, "--policy", "per-group-dedup", "--policy", "unbucketed"}));
  EXPECT_EQ(chosen.exit_code, 0) << chosen.err;
  EXPECT_FALSE(Has(chosen.out, "backward-only")) << chosen.out;
  EXPECT_TRUE(Has(chosen.out, "PASS unbucketed: peak reserved 6.00 MiB")) << chosen.out;
  EXPECT_TRUE(Has(chosen.out, "verdict: PASS (3 checks: 3 passed, 0 failed, 0 skipped)"))
      << chosen.out;
}

TEST(CheckBudgetFile, FlagsReplaceTheFilesBudgetsOfTheSameKindAndKeepTheRest) {
  std::string budget = Budget("combined.json", R"({"backward-only": {
      "max_peak_allocated": "1GiB", "max_at_mark": {"after fwd": "1GiB", "after bwd": "1GiB"}}})");
  BinaryResult run =
      RunBucketsim(Check({"--budget", budget, "--max-peak-allocated", "3261439", "--max-at-mark",
                          "after bwd=1572863", "--max-step-time-us", "400"}));
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_EQ(run.out,
            "FAIL backward-only: peak allocated 3.11 MiB (3261440 B) exceeds budget 3.11 MiB "
            "(3261439 B)\n"
            "PASS backward-only: allocated at mark 'after fwd' 2.01 MiB (2106368 B) within budget "
            "1.00 GiB (1073741824 B)\n"
            "FAIL backward-only: allocated at mark 'after bwd' 1.50 MiB (1572864 B) exceeds "
            "budget 1.50 MiB (1572863 B)\n"
            "PASS backward-only: step time 350.0 us within budget 400.0 us\n"
            "verdict: FAIL (4 checks: 2 passed, 2 failed, 0 skipped)\n");
}

TEST(CheckBudgetFile, MissingOrMalformedIsExit2WithTheFileAndTheField) {
  BinaryResult missing = RunBucketsim(Check({"--budget", "/nonexistent/budget.json"}));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err,
            "bucketsim: error: cannot read budget file '/nonexistent/budget.json': No such file "
            "or directory\n");
  EXPECT_EQ(missing.out, "verdict: ERROR (the check could not be decided: see the error above)\n");

  std::string truncated = WriteTempFile("truncated.json", R"({"schema_version": 1, "poli)");
  BinaryResult not_json = RunBucketsim(Check({"--budget", truncated}));
  EXPECT_EQ(not_json.exit_code, 2);
  EXPECT_TRUE(Has(not_json.err, truncated + ": not a valid budget file: parse error at line 1"))
      << not_json.err;

  std::string bad_size =
      Budget("bad-size.json", R"({"backward-only": {"max_at_mark": {"after fwd": "2 MiBs"}}})");
  BinaryResult size = RunBucketsim(Check({"--budget", bad_size}));
  EXPECT_EQ(size.exit_code, 2);
  EXPECT_EQ(size.err, "bucketsim: error: " + bad_size +
                          ": /policies/backward-only/max_at_mark/after fwd: size '2 MiBs' has an "
                          "unknown unit 'MiBs' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)\n");

  std::string version = WriteTempFile("v2.json", R"({"schema_version": 2, "policies": {}})");
  EXPECT_TRUE(Has(RunBucketsim(Check({"--budget", version})).err,
                  "/schema_version: this bucketsim reads budget file schema_version 1, not 2"));
  std::string typo = Budget("typo.json", R"({"backward-only": {"max_peak": "1GiB"}})");
  EXPECT_EQ(RunBucketsim(Check({"--budget", typo})).exit_code, 2);
  std::string unknown_policy = Budget("policy.json", R"({"backwards-only": {}})");
  EXPECT_EQ(RunBucketsim(Check({"--budget", unknown_policy})).exit_code, 2);
  // A mark the trace never reaches cannot be checked.
  std::string lunch = Budget("lunch.json", R"({"backward-only": {"max_at_mark": {"lunch": 1}}})");
  BinaryResult never = RunBucketsim(Check({"--budget", lunch}));
  EXPECT_EQ(never.exit_code, 2);
  EXPECT_EQ(never.err,
            "bucketsim: error: mark 'lunch' never occurs in the trace (its marks: 'after fwd', "
            "'after bwd', 'after step')\n");
}

TEST(CheckBudgetFile, NothingToCheckIsAnError) {
  std::string any_only = Budget("any.json", R"({"*": {"max_peak_allocated": "1GiB"}})");
  BinaryResult no_policy = RunBucketsim(Check({"--budget", any_only}));
  EXPECT_EQ(no_policy.exit_code, 2);
  EXPECT_EQ(no_policy.err,
            "bucketsim: error: " + any_only + ": names no policy but \"*\": give --policy\n");
  std::string empty_entry = Budget("empty.json", R"({"backward-only": {}})");
  BinaryResult nothing = RunBucketsim(Check({"--budget", empty_entry}));
  EXPECT_EQ(nothing.exit_code, 2);
  EXPECT_TRUE(Has(nothing.err, "nothing to check for policy 'backward-only'")) << nothing.err;
}

// --- baseline -----------------------------------------------------------------------------

// A report with one policy, as `compare --json` writes it but cut to the fields a baseline
// needs (the reader reads no more).
std::string BaselineReport(const std::string& name, const std::string& policy, long allocated,
                           long reserved, long after_fwd, double step_us,
                           const std::string& model = "caching") {
  return WriteTempFile(name,
                       R"({"schema_version": 1, "context": {"memory_model": ")" + model +
                           R"(", "trace_digest": "fnv1a64:29d7f7d9e7295b7f"},)" +
                           R"( "trace": {"world_size": 2, "rank": 0, "bucket_cap_mb": 0.25},)" +
                           R"( "policies": [{"policy": ")" + policy +
                           R"(", "bucket_cap_mb": 0.25, "peak_allocated_bytes": )" +
                           std::to_string(allocated) + R"(, "peak_reserved_bytes": )" +
                           std::to_string(reserved) + R"(, "timing": {"step_time_us": )" +
                           std::to_string(step_us) +
                           R"(, "iterations": [{"iteration": 0}, {"iteration": 1}]})" +
                           R"(, "oom": null, "marks": [{"name": "after fwd", "allocated_bytes": )" +
                           std::to_string(after_fwd) + "}]}]}");
}

TEST(CheckBaseline, TheGoldenReportIsUnchanged) {
  BinaryResult run = RunBucketsim(
      Check({"--policy", "backward-only", "--baseline", "tests/golden/compare-tiny-ws2.json"}));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "PASS backward-only: peak allocated 3.11 MiB (3261440 B) vs baseline 3.11 MiB "
            "(3261440 B): unchanged\n"
            "PASS backward-only: peak reserved 6.00 MiB (6291456 B) vs baseline 6.00 MiB "
            "(6291456 B): unchanged\n"
            "PASS backward-only: allocated at mark 'after fwd' 2.01 MiB (2106368 B) vs baseline "
            "2.01 MiB (2106368 B): unchanged\n"
            "PASS backward-only: allocated at mark 'after bwd' 1.50 MiB (1572864 B) vs baseline "
            "1.50 MiB (1572864 B): unchanged\n"
            "PASS backward-only: allocated at mark 'after step' 1.50 MiB (1572864 B) vs baseline "
            "1.50 MiB (1572864 B): unchanged\n"
            "PASS backward-only: step time 350.0 us vs baseline 350.0 us: unchanged\n"
            "verdict: PASS (6 checks: 6 passed, 0 failed, 0 skipped)\n");
}

// Baseline 3200000 B: the run's 3261440 B is 61440 B (1.92%) more.
TEST(CheckBaseline, GrowthInsideAndOverTheTolerance) {
  std::string baseline =
      BaselineReport("grown.json", "backward-only", 3200000, 6291456, 2106368, 350.0);
  BinaryResult inside = RunBucketsim(
      Check({"--policy", "backward-only", "--baseline", baseline, "--tolerance", "2%"}));
  EXPECT_EQ(inside.exit_code, 0) << inside.err;
  EXPECT_TRUE(Has(inside.out,
                  "PASS backward-only: peak allocated 3.11 MiB (3261440 B) vs baseline 3.05 MiB "
                  "(3200000 B): +60.00 KiB (+61440 B, +1.92%) within tolerance 2% (+64000 B)\n"))
      << inside.out;
  EXPECT_TRUE(Has(inside.out, "verdict: PASS (4 checks: 4 passed, 0 failed, 0 skipped)"))
      << inside.out;

  BinaryResult over = RunBucketsim(
      Check({"--policy", "backward-only", "--baseline", baseline, "--tolerance", "1.5%"}));
  EXPECT_EQ(over.exit_code, 1) << over.err;
  EXPECT_TRUE(Has(over.out,
                  "FAIL backward-only: peak allocated 3.11 MiB (3261440 B) vs baseline 3.05 MiB "
                  "(3200000 B): +60.00 KiB (+61440 B, +1.92%) exceeds tolerance 1.5% (+48000 B)\n"))
      << over.out;
  // No --tolerance: no growth at all.
  EXPECT_EQ(RunBucketsim(Check({"--policy", "backward-only", "--baseline", baseline})).exit_code,
            1);
  // An absolute allowance: the larger of the two wins.
  BinaryResult absolute = RunBucketsim(Check({"--policy", "backward-only", "--baseline", baseline,
                                              "--tolerance", "1.5%", "--tolerance", "+60KiB"}));
  EXPECT_EQ(absolute.exit_code, 0) << absolute.out;
  EXPECT_TRUE(Has(absolute.out, "within tolerance 1.5%,+60KiB (+61440 B)")) << absolute.out;
}

TEST(CheckBaseline, GrowthOfReservedMarkAndStepTimeFailsAndShrinkageIsAnImprovement) {
  std::string baseline =
      BaselineReport("mixed.json", "backward-only", 4000000, 6000000, 2000000, 400.0);
  BinaryResult run = RunBucketsim(
      Check({"--policy", "backward-only", "--baseline", baseline, "--tolerance", "2%"}));
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_EQ(run.out,
            "PASS backward-only: peak allocated 3.11 MiB (3261440 B) vs baseline 3.81 MiB "
            "(4000000 B): -721.25 KiB (-738560 B, -18.46%), an improvement\n"
            "FAIL backward-only: peak reserved 6.00 MiB (6291456 B) vs baseline 5.72 MiB "
            "(6000000 B): +284.62 KiB (+291456 B, +4.86%) exceeds tolerance 2% (+120000 B)\n"
            "FAIL backward-only: allocated at mark 'after fwd' 2.01 MiB (2106368 B) vs baseline "
            "1.91 MiB (2000000 B): +103.88 KiB (+106368 B, +5.32%) exceeds tolerance 2% (+40000 "
            "B)\n"
            "PASS backward-only: step time 350.0 us vs baseline 400.0 us: -50.0 us (-12.50%), an "
            "improvement\n"
            "verdict: FAIL (4 checks: 2 passed, 2 failed, 0 skipped)\n");
  std::string slower =
      BaselineReport("slower.json", "backward-only", 3261440, 6291456, 2106368, 340.0);
  BinaryResult step =
      RunBucketsim(Check({"--policy", "backward-only", "--baseline", slower, "--tolerance", "2%"}));
  EXPECT_EQ(step.exit_code, 1);
  EXPECT_TRUE(Has(step.out,
                  "FAIL backward-only: step time 350.0 us vs baseline 340.0 us: +10.0 us (+2.94%) "
                  "exceeds tolerance 2% (+6.8 us)"))
      << step.out;
}

TEST(CheckBaseline, APolicyMissingFromTheBaselineIsANoteNotAPass) {
  std::string baseline =
      BaselineReport("other.json", "backward-only", 3261440, 6291456, 2106368, 350.0);
  // With a budget, the skipped comparison is reported and the budget decides.
  BinaryResult noted = RunBucketsim(
      Check({"--policy", "unbucketed", "--baseline", baseline, "--max-peak-allocated", "1GiB"}));
  EXPECT_EQ(noted.exit_code, 0) << noted.err;
  EXPECT_TRUE(Has(noted.out,
                  "SKIP unbucketed: baseline comparison skipped: the baseline report has no "
                  "policy of this name\n"))
      << noted.out;
  EXPECT_TRUE(Has(noted.out, "verdict: PASS (2 checks: 1 passed, 0 failed, 1 skipped)"));
  // Without one, nothing would be checked: that never passes.
  BinaryResult unchecked = RunBucketsim(Check({"--policy", "unbucketed", "--baseline", baseline}));
  EXPECT_EQ(unchecked.exit_code, 2);
  EXPECT_TRUE(Has(unchecked.err, "nothing was checked for policy 'unbucketed'")) << unchecked.err;
}

TEST(CheckBaseline, MissingMalformedOrIncomparableIsExit2) {
  BinaryResult missing = RunBucketsim(
      Check({"--policy", "backward-only", "--baseline", "/nonexistent/baseline.json"}));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err,
            "bucketsim: error: cannot read report '/nonexistent/baseline.json': No such file or "
            "directory\n");
  std::string future = WriteTempFile("future.json", R"({"schema_version": 2})");
  BinaryResult version = RunBucketsim(Check({"--policy", "backward-only", "--baseline", future}));
  EXPECT_EQ(version.exit_code, 2);
  EXPECT_EQ(version.err, "bucketsim: error: " + future +
                             ": /schema_version: this bucketsim reads report schema_version 1, "
                             "not 2\n");
  std::string broken = WriteTempFile(
      "broken.json",
      R"({"schema_version": 1, "context": {"memory_model": "caching", "trace_digest": "x"},
          "trace": {"world_size": 2, "rank": 0, "bucket_cap_mb": 0.25},
          "policies": [{"policy": "backward-only", "peak_allocated_bytes": "3MiB"}]})");
  BinaryResult field = RunBucketsim(Check({"--policy", "backward-only", "--baseline", broken}));
  EXPECT_EQ(field.exit_code, 2);
  EXPECT_EQ(field.err, "bucketsim: error: " + broken +
                           ": /policies/0/peak_allocated_bytes: expected an integer >= 0, got "
                           "\"3MiB\"\n");
  BinaryResult model = RunBucketsim(Check({"--policy", "backward-only", "--allocator", "exact",
                                           "--baseline", "tests/golden/compare-tiny-ws2.json"}));
  EXPECT_EQ(model.exit_code, 2);
  EXPECT_TRUE(Has(model.err,
                  "the baseline was replayed with memory model 'caching', this check "
                  "with 'exact' (--allocator, --alloc-conf): their figures are not comparable"))
      << model.err;
  // The exact model's own golden is comparable.
  EXPECT_EQ(RunBucketsim(Check({"--policy", "backward-only", "--allocator", "exact", "--baseline",
                                "tests/golden/compare-tiny-ws2-exact.json"}))
                .exit_code,
            0);
  // A tolerance needs a baseline, and must say what it means.
  EXPECT_EQ(RunBucketsim(Check({"--policy", "backward-only", "--max-peak-allocated", "1GiB",
                                "--tolerance", "2%"}))
                .exit_code,
            2);
  BinaryResult ambiguous =
      RunBucketsim(Check({"--policy", "backward-only", "--baseline",
                          "tests/golden/compare-tiny-ws2.json", "--tolerance", "0.02"}));
  EXPECT_EQ(ambiguous.exit_code, 2);
  EXPECT_TRUE(Has(ambiguous.err, "--tolerance '0.02': a bare number is ambiguous"))
      << ambiguous.err;
}

TEST(CheckBaseline, AnotherTraceIsRefusedUnlessAllowed) {
  std::string baseline = WriteTempFile(
      "digest.json",
      R"({"schema_version": 1, "context": {"memory_model": "caching", "trace_digest": "fnv1a64:0"},
          "trace": {"world_size": 2, "rank": 0, "bucket_cap_mb": 0.25},
          "policies": [{"policy": "backward-only", "bucket_cap_mb": 0.25,
                        "peak_allocated_bytes": 3261440, "peak_reserved_bytes": 6291456,
                        "marks": []}]})");
  BinaryResult refused = RunBucketsim(Check({"--policy", "backward-only", "--baseline", baseline}));
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_EQ(refused.err, "bucketsim: error: " + baseline +
                             ": the baseline is not comparable with this check: it has trace "
                             "digest fnv1a64:0 (this trace fnv1a64:29d7f7d9e7295b7f); regenerate "
                             "it, or give --allow-different-trace to compare anyway\n");
  BinaryResult run = RunBucketsim(
      Check({"--policy", "backward-only", "--baseline", baseline, "--allow-different-trace"}));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.rfind("NOTE: the baseline " + baseline +
                              " differs (--allow-different-trace): trace digest fnv1a64:0 (this "
                              "trace fnv1a64:29d7f7d9e7295b7f)\n",
                          0),
            0u)
      << run.out;
}

// --- JUnit --------------------------------------------------------------------------------

TEST(CheckJUnit, OneTestcasePerPolicyAndCheck) {
  std::string xml_path = WriteTempFile("check.xml", "");
  std::string budget = Budget("junit.json", R"({"backward-only": {"max_peak_allocated": 3261439,
      "max_peak_reserved": "6MiB"}})");
  BinaryResult run = RunBucketsim(
      Check({"--budget", budget, "--policy", "backward-only", "--policy", "unbucketed",
             "--baseline", "tests/golden/compare-tiny-ws2.json", "--junit", xml_path}));
  EXPECT_EQ(run.exit_code, 1) << run.err;
  std::string xml = testing::ReadFile(xml_path);
  // backward-only: 2 budgets + 6 baseline figures; unbucketed: 6 baseline figures.
  EXPECT_TRUE(Has(xml,
                  "<testsuites name=\"bucketsim check\" tests=\"14\" failures=\"1\" "
                  "errors=\"0\" skipped=\"0\""))
      << xml;
  EXPECT_TRUE(Has(xml, "<testsuite name=\"bucketsim check tiny-ws2.json\" tests=\"14\""));
  EXPECT_TRUE(Has(xml,
                  "<testcase classname=\"bucketsim.check.backward-only\" name=\"peak "
                  "allocated budget\" time=\"0\">\n      <failure message=\"FAIL "
                  "backward-only: peak allocated 3.11 MiB (3261440 B) exceeds budget 3.11 "
                  "MiB (3261439 B)\" type=\"BudgetExceeded\">"))
      << xml;
  EXPECT_TRUE(Has(xml,
                  "<testcase classname=\"bucketsim.check.unbucketed\" name=\"allocated at "
                  "mark &apos;after bwd&apos; vs baseline\" time=\"0\"/>"))
      << xml;
  EXPECT_TRUE(
      Has(xml, "<property name=\"baseline\" value=\"tests/golden/compare-tiny-ws2.json\"/>"));
}

TEST(CheckJUnit, AnErrorIsWrittenAsAnErroredTestcase) {
  std::string xml_path = WriteTempFile("error.xml", "");
  BinaryResult run =
      RunBucketsim(Check({"--budget", "/nonexistent/budget.json", "--junit", xml_path}));
  EXPECT_EQ(run.exit_code, 2);
  std::string xml = testing::ReadFile(xml_path);
  EXPECT_TRUE(Has(xml, "tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\"")) << xml;
  EXPECT_TRUE(Has(xml,
                  "<error message=\"cannot read budget file &apos;/nonexistent/budget.json"
                  "&apos;: No such file or directory\" type=\"IoError\">"))
      << xml;
}

TEST(CheckJUnit, AReportThatCannotBeWrittenIsAnErrorNotAPass) {
  std::string file = WriteTempFile("plain-file", "");  // a file cannot hold a directory
  BinaryResult run = RunBucketsim(Check({"--policy", "backward-only", "--max-peak-allocated",
                                         "1GiB", "--junit", file + "/check.xml"}));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "verdict: ERROR (the check could not be decided: see the error above)\n");
  EXPECT_TRUE(Has(run.err, "bucketsim: error: cannot write '" + file + "/check.xml'")) << run.err;
}

// --- the shipped example --------------------------------------------------------------------

// The CI job of docs/ci-gates.md, on the shipped default trace, with the shipped budget and
// baseline.
TEST(CheckExample, TheExampleBudgetAndBaselinePassOnTheDefaultTrace) {
  std::string xml_path = WriteTempFile("example.xml", "");
  BinaryResult run = RunBucketsim({"check", "traces/gpt-24l-h1024-ws8.json", "--budget",
                                   "reports/budget-example.json", "--baseline",
                                   "reports/baseline-gpt-24l-h1024-ws8.json", "--tolerance", "2%",
                                   "--junit", xml_path});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_TRUE(Has(run.out, "verdict: PASS (")) << run.out;
  EXPECT_FALSE(Has(run.out, "FAIL")) << run.out;
  EXPECT_FALSE(Has(run.out, "SKIP")) << run.out;
  EXPECT_TRUE(Has(testing::ReadFile(xml_path), "failures=\"0\" errors=\"0\" skipped=\"0\""));
}

}  // namespace
}  // namespace bucketsim
