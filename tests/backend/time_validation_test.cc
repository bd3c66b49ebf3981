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

class TimeValidation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    profile_ = new std::string(WriteTempFile("validation-profile.json", ""));
    testing::BinaryResult calibrate =
        RunBucketsimUnderMpi(2, {"calibrate", "-o", *profile_, "--max-bytes", "16MiB"});
    ASSERT_EQ(calibrate.exit_code, 0) << calibrate.out << calibrate.err;
    std::printf("%s", calibrate.out.c_str());
  }
  static void TearDownTestSuite() { delete profile_; }
  static std::string* profile_;
};

std::string* TimeValidation::profile_ = nullptr;

// Every policy's predicted step time within `bound` of the measured one, and closer to it than
// compute alone (the sim without a profile): the profile's collective and copy times add what
// they claim to.
void ExpectPredictedWithin(const std::string& name, const std::string& tflops, double bound,
                           const std::string& profile) {
  Replayed replayed = ReplayWithPrediction(GenerateTraces(name, tflops), profile, name);
  const json& policies = replayed.measured["policies"];
  ASSERT_EQ(policies.size(), kPolicies.size());
  for (const json& policy : policies) {
    const json& timing = policy["timing"];
    ASSERT_TRUE(timing["prediction"].is_object());
    double measured = timing["step_time_us"].get<double>();
    double error = timing["prediction"]["step_time_error"].get<double>();
    double compute_alone = replayed.unpriced_step_us / measured - 1;
    EXPECT_LE(std::abs(error), bound) << policy["policy"] << ": measured " << measured
                                      << " us, predicted " << timing["prediction"]["step_time_us"];
    EXPECT_LT(std::abs(error), std::abs(compute_alone))
        << policy["policy"] << ": with the profile " << error << ", compute alone "
        << compute_alone;
  }
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
