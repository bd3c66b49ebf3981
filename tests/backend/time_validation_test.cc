// The time model on the machine the tests run on: calibrate the host backend under mpirun, then
// replay generated traces on the host backend with that profile (run --profile) and check what
// the report says of the prediction beside the measurement. The accuracy itself (predicted against
// measured step time) is a timing, measured by bench/time_validation.sh, with its figures in the
// docs/time-model.md ("How good the time model is here").
#include <cstddef>
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

// What holds of a host replay priced by a profile however loaded the machine is: the report
// carries a prediction for every policy; the prediction's compute is the replay's compute (the
// host backend's compute spans follow a device clock, so both are the trace's durations); the
// profile only adds (collectives and copies, never less than compute alone, never more than
// compute, collectives and copies end to end); the error is the prediction against the
// measurement; a noisy neighbour can only lengthen a real step, never shorten it below its
// compute; and the bytes moved are the bytes the sim moves. How far the prediction is from the
// measurement is a timing of this machine, measured by bench/time_validation.sh and never
// asserted here (docs/time-model.md, "How good the time model is here").
void ExpectPredictionAccountsForTheReplay(const std::string& name, const std::string& tflops,
                                          const std::string& profile) {
  const std::string traces = GenerateTraces(name, tflops);
  Replayed replayed = ReplayWithPrediction(traces, profile, name);
  const json& policies = replayed.measured["policies"];
  ASSERT_EQ(policies.size(), kPolicies.size());
  const std::string rank0 = traces.substr(0, traces.find("{rank}")) + "0.json";
  for (std::size_t i = 0; i < policies.size(); ++i) {
    const json& policy = policies[i];
    SCOPED_TRACE(policy["policy"].dump());
    EXPECT_EQ(policy["policy"], kPolicies[i]);
    const json& timing = policy["timing"];
    EXPECT_EQ(timing["backend"], "host");
    ASSERT_TRUE(timing["prediction"].is_object());
    const json& predicted = timing["prediction"];
    EXPECT_EQ(predicted["profile"], "measured-host");

    const double compute = timing["compute_us"].get<double>();
    EXPECT_GT(compute, 0);
    EXPECT_NEAR(predicted["compute_us"].get<double>(), compute, compute * 1e-4);

    const double step = timing["step_time_us"].get<double>();
    const double predicted_step = predicted["step_time_us"].get<double>();
    EXPECT_GT(predicted["communication_us"].get<double>(), 0);
    EXPECT_GE(predicted_step, replayed.unpriced_step_us * (1 - 1e-9));
    const double end_to_end = predicted["compute_us"].get<double>() +
                              predicted["communication_us"].get<double>() +
                              predicted["copy_us"].get<double>();
    EXPECT_LE(predicted["iteration_us"].get<double>(), end_to_end * (1 + 1e-9));
    EXPECT_NEAR(predicted["step_time_error"].get<double>(), predicted_step / step - 1, 1e-9);
    EXPECT_GE(step, replayed.unpriced_step_us * (1 - 1e-3))
        << "a real step shorter than its compute: the host backend did not spin its compute spans";

    // The sim of the same trace and policy moves the same bytes.
    ASSERT_TRUE(timing["collective_bytes"].is_number_unsigned());
    const std::string sim_report = WriteTempFile(name + "-sim-" + kPolicies[i] + ".json", "");
    testing::BinaryResult sim = RunBucketsim(
        {"run", rank0, "--backend", "sim", "--policy", kPolicies[i], "--json", sim_report});
    ASSERT_EQ(sim.exit_code, 0) << sim.err;
    EXPECT_EQ(timing["collective_bytes"],
              json::parse(ReadFile(sim_report))["policies"][0]["timing"]["collective_bytes"]);
  }
}

// Compute-bound: about 37 ms of compute and 5 ms of collectives per iteration.
TEST_F(TimeValidation, ComputeBoundPredictionAccountsForTheReplay) {
  ExpectPredictionAccountsForTheReplay("compute-bound", "0.2", *profile_);
}

// Mixed: 15 ms : 5 ms.
TEST_F(TimeValidation, MixedPredictionAccountsForTheReplay) {
  ExpectPredictionAccountsForTheReplay("mixed", "0.5", *profile_);
}

// Comm-bound: 3.7 ms : 5 ms.
TEST_F(TimeValidation, CommBoundPredictionAccountsForTheReplay) {
  ExpectPredictionAccountsForTheReplay("comm-bound", "2", *profile_);
}

}  // namespace
}  // namespace bucketsim
