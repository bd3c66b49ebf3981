// The time model's validation on the machine the tests run on: calibrate the host backend under
// mpirun, then replay generated traces on the host backend with that profile and compare the
// measured step time with what the sim, priced by the profile, predicts (run --profile). The
// bounds and the figures behind them are in the README ("How good the time model is here").
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/run_binary.h"

namespace bucketsim {
namespace {

using nlohmann::json;
using testing::ReadFile;
using testing::RunBucketsim;
using testing::RunBucketsimUnderMpi;
using testing::WriteTempFile;

const std::vector<std::string> kPolicies = {"always-allocated", "backward-only", "per-group-dedup",
                                            "unbucketed"};

// A 4-block transformer on 2 ranks, 8 iterations, buckets of 1 MB: per-block gradients of 3-4 MB
// bypass the buckets, so each iteration has 6 reduce-scatters of 1.6-4.5 MB. `tflops` sets how
// long compute takes: 0.2 makes an iteration about 37 ms of compute against about 5 ms of
// collectives (compute-bound), 2 makes it 3.7 ms against the same collectives (comm-bound).
std::string GenerateTraces(const std::string& name, const std::string& tflops) {
  std::string pattern;
  for (int rank = 0; rank < 2; ++rank) {
    std::string path = WriteTempFile(name + "-" + std::to_string(rank) + ".json", "");
    testing::BinaryResult gen = RunBucketsim({"gen",
                                              "transformer",
                                              "--layers",
                                              "4",
                                              "--hidden",
                                              "256",
                                              "--heads",
                                              "4",
                                              "--vocab",
                                              "4096",
                                              "--seq",
                                              "256",
                                              "--world-size",
                                              "2",
                                              "--rank",
                                              std::to_string(rank),
                                              "--iterations",
                                              "8",
                                              "--device-tflops",
                                              tflops,
                                              "--param-dtype",
                                              "fp32",
                                              "--bucket-cap-mb",
                                              "1",
                                              "-o",
                                              path});
    EXPECT_EQ(gen.exit_code, 0) << gen.err;
    pattern = path.substr(0, path.size() - std::string("0.json").size()) + "{rank}.json";
  }
  return pattern;
}

struct Replayed {
  json measured;                // the host report
  double unpriced_step_us = 0;  // what the sim predicts without a profile: compute alone
};

Replayed ReplayWithPrediction(const std::string& traces, const std::string& profile,
                              const std::string& name) {
  std::string report = WriteTempFile(name + "-host.json", "");
  std::string unpriced = WriteTempFile(name + "-unpriced.json", "");
  std::vector<std::string> args = {"run",         traces,   "--profile", profile,
                                   "--no-verify", "--json", report};
  for (const std::string& policy : kPolicies) {
    args.push_back("--policy");
    args.push_back(policy);
  }
  testing::BinaryResult run = RunBucketsimUnderMpi(2, args);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  std::string rank0 = traces.substr(0, traces.find("{rank}")) + "0.json";
  testing::BinaryResult sim = RunBucketsim(
      {"run", rank0, "--backend", "sim", "--policy", "unbucketed", "--json", unpriced});
  EXPECT_EQ(sim.exit_code, 0) << sim.err;
  Replayed replayed;
  replayed.measured = json::parse(ReadFile(report));
  replayed.unpriced_step_us =
      json::parse(ReadFile(unpriced))["policies"][0]["timing"]["step_time_us"].get<double>();
  std::printf("%s", run.out.c_str());  // the measured-against-predicted table, for the log
  return replayed;
}

// A fresh calibration on 2 ranks, written to `name`.
std::string Calibrate(const std::string& name) {
  std::string profile = WriteTempFile(name, "");
  testing::BinaryResult calibrate =
      RunBucketsimUnderMpi(2, {"calibrate", "-o", profile, "--max-bytes", "16MiB"});
  EXPECT_EQ(calibrate.exit_code, 0) << calibrate.out << calibrate.err;
  std::printf("%s", calibrate.out.c_str());
  return profile;
}

class TimeValidation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { profile_ = new std::string(Calibrate("validation-profile.json")); }
  static void TearDownTestSuite() { delete profile_; }
  static std::string* profile_;
};

std::string* TimeValidation::profile_ = nullptr;

// What one calibrate-and-replay attempt found wrong; empty when every policy met the bound.
std::vector<std::string> PredictionFailures(const std::string& name, const std::string& tflops,
                                            double bound, const std::string& profile) {
  std::vector<std::string> failures;
  Replayed replayed = ReplayWithPrediction(GenerateTraces(name, tflops), profile, name);
  const json& policies = replayed.measured["policies"];
  if (policies.size() != kPolicies.size()) {
    failures.push_back("the report has " + std::to_string(policies.size()) + " policies");
    return failures;
  }
  for (const json& policy : policies) {
    const json& timing = policy["timing"];
    if (!timing["prediction"].is_object()) {
      failures.push_back(policy["policy"].dump() + ": no prediction in the report");
      continue;
    }
    double measured = timing["step_time_us"].get<double>();
    double error = timing["prediction"]["step_time_error"].get<double>();
    double compute_alone = replayed.unpriced_step_us / measured - 1;
    if (std::abs(error) > bound) {
      failures.push_back(policy["policy"].dump() + ": measured " + std::to_string(measured) +
                         " us, predicted " + timing["prediction"]["step_time_us"].dump() +
                         ", error " + std::to_string(error) + " beyond " + std::to_string(bound));
    }
    if (std::abs(error) >= std::abs(compute_alone)) {
      failures.push_back(policy["policy"].dump() + ": with the profile " + std::to_string(error) +
                         ", compute alone " + std::to_string(compute_alone));
    }
  }
  return failures;
}

// Every policy's predicted step time within `bound` of the measured one, and closer to it than
// compute alone (the sim without a profile): the profile's collective and copy times add what
// they claim to. The CI machine is a shared VM: a neighbour's burst during the calibration or the
// replay (a few seconds each) can put one attempt far off, while a model that is wrong is wrong
// every time. So up to three attempts, each after the first with a fresh calibration (a burst
// during the suite's calibration would spoil every replay priced by it); the test passes on the
// first attempt that meets every bound and fails with every attempt's findings otherwise.
void ExpectPredictedWithin(const std::string& name, const std::string& tflops, double bound,
                           const std::string& suite_profile) {
  constexpr int kAttempts = 3;
  std::string findings;
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    const std::string profile =
        attempt == 1 ? suite_profile
                     : Calibrate(name + "-profile-" + std::to_string(attempt) + ".json");
    std::vector<std::string> failures = PredictionFailures(name, tflops, bound, profile);
    if (failures.empty()) return;
    std::string found = "attempt " + std::to_string(attempt) + ":\n";
    for (const std::string& failure : failures) found += "  " + failure + "\n";
    std::printf("%s", found.c_str());
    findings += found;
  }
  ADD_FAILURE() << "no attempt of " << kAttempts << " met the bounds:\n" << findings;
}

// Compute-bound (about 37 ms of compute and 5 ms of collectives per iteration): within 10%
// (observed on the 2-core CI VM with a fresh calibration: -1.6% to -1.3%; compute alone is
// about -10%).
TEST_F(TimeValidation, ComputeBoundStepTimeWithinTenPercent) {
  ExpectPredictedWithin("compute-bound", "0.2", 0.10, *profile_);
}

// Mixed (15 ms : 5 ms): within 15% (observed -3.1% to -2.2%; compute alone about -23%).
TEST_F(TimeValidation, MixedStepTimeWithinFifteenPercent) {
  ExpectPredictedWithin("mixed", "0.5", 0.15, *profile_);
}

// Comm-bound (3.7 ms : 5 ms): collectives inside a replay run slower than calibrate measures them
// on this VM (README, "How good the time model is here"), so the bound is loose: 60% (observed
// -26% to -18%; compute alone about -76%).
TEST_F(TimeValidation, CommBoundStepTimeWithinSixtyPercent) {
  ExpectPredictedWithin("comm-bound", "2", 0.60, *profile_);
}

}  // namespace
}  // namespace bucketsim
