// The cuda backend on a GPU: shipped traces replayed with real device buffers, NCCL and
// verification. Without a usable device (this build has no CUDA, or the machine no GPU or
// driver) every GPU test skips with the reason, and one test checks that the reason is given.
#include "backend/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include "backend/availability.h"
#include "backend/host/mpi_world.h"
#include "engine/replay_policies.h"
#include "io/trace_reader.h"
#include "policy/policy_spec.h"

namespace bucketsim {
namespace {

MpiWorld& World() {
  // MPI is initialised once per process (a singleton world without mpirun).
  static std::unique_ptr<MpiWorld> world = [] {
    Result<std::unique_ptr<MpiWorld>> init = MpiWorld::Init();
    BUCKETSIM_CHECK(init.ok());
    return std::move(*init);
  }();
  return *world;
}

// `trace`: a file under traces/, or a path from the source directory.
Result<ReplayOutcome> ReplayShipped(const std::string& trace, std::vector<PolicySpec> policies,
                                    bool cuda) {
  std::string path = std::string(BUCKETSIM_SOURCE_DIR) +
                     (trace.find('/') == std::string::npos ? "/traces/" : "/") + trace;
  ReplayRequest request;
  request.policies = std::move(policies);
  if (cuda) {
    request.make_backend = [] {
      Result<std::unique_ptr<Backend>> backend = MakeCudaBackend(World(), CudaBackendOptions{});
      BUCKETSIM_CHECK(backend.ok());  // the fixture skipped when there is no device
      return std::move(*backend);
    };
  }
  return ReplayPolicies(
      [&](TraceHeader& header, EventSink& sink) { return ReadTrace(path, header, sink); }, request);
}

class CudaBackendOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    BackendAvailability cuda = ProbeCudaBackend();
    if (!cuda.usable) GTEST_SKIP() << "no usable CUDA device: " << cuda.detail;
  }
};

TEST(CudaBackend, WithoutAUsableDeviceTheFactorySaysWhy) {
  BackendAvailability cuda = ProbeCudaBackend();
  if (cuda.usable) GTEST_SKIP() << "this machine has a usable GPU: " << cuda.detail;
  Result<std::unique_ptr<Backend>> backend = MakeCudaBackend(World(), CudaBackendOptions{});
  ASSERT_FALSE(backend.ok());
  const Status& status = backend.status();
  if (cuda.compiled) {
    EXPECT_EQ(status.code(), StatusCode::kDeviceError);
    EXPECT_NE(status.message().find("no usable CUDA device"), std::string::npos)
        << status.message();
  } else {
    EXPECT_EQ(status.code(), StatusCode::kNotCompiled);
    EXPECT_NE(status.message().find("built without CUDA"), std::string::npos) << status.message();
  }
}

TEST_F(CudaBackendOnGpu, TinyTraceEmulatedEveryCollectiveVerifiedSameLogAndMemoryAsSim) {
  Result<ReplayOutcome> sim = ReplayShipped("tiny-ws2.json", DefaultPolicies(), false);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  Result<ReplayOutcome> cuda = ReplayShipped("tiny-ws2.json", DefaultPolicies(), true);
  ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
  ASSERT_EQ(cuda->runs.size(), sim->runs.size());
  for (std::size_t i = 0; i < sim->runs.size(); ++i) {
    const RunResult& want = sim->runs[i];
    const RunResult& got = cuda->runs[i];
    SCOPED_TRACE(want.policy);
    const ExecutionFacts& facts = got.execution;
    EXPECT_TRUE(facts.emulated);  // one process, a trace of two ranks
    EXPECT_TRUE(facts.verified);
    EXPECT_EQ(facts.verified_collectives, got.collectives.size());
    EXPECT_EQ(facts.verify_failures, 0u) << facts.first_mismatch;
    EXPECT_TRUE(facts.device_used_before_bytes.has_value());
    EXPECT_GE(*facts.device_used_peak_bytes, *facts.device_used_before_bytes);
    EXPECT_EQ(got.peak.allocated_bytes, want.peak.allocated_bytes);
    ASSERT_EQ(got.collectives.size(), want.collectives.size());
    for (std::size_t c = 0; c < want.collectives.size(); ++c) {
      EXPECT_EQ(got.collectives[c].group, want.collectives[c].group);
      EXPECT_EQ(got.collectives[c].input_numel, want.collectives[c].input_numel);
      EXPECT_EQ(got.collectives[c].event_index, want.collectives[c].event_index);
      EXPECT_GE(got.collectives[c].dur_us, 0.0);
    }
  }
  // tiny-ws2 has two group objects with the same members: identity keying makes a
  // communicator for each, per-group-dedup one (the policies are in DefaultPolicies() order).
  EXPECT_EQ(cuda->runs[1].policy, "backward-only");
  EXPECT_EQ(cuda->runs[2].policy, "per-group-dedup");
  EXPECT_EQ(cuda->runs[1].execution.communicators, 2u);
  EXPECT_EQ(cuda->runs[2].execution.communicators, 1u);
}

// PyTorch FSDP traces (format 5): their all-gathers (ncclAllGather in place, on the trace's
// streams, into scratch), NO_SHARD's and HYBRID_SHARD's all-reduces, emulated on one process:
// the sim's log, every collective verified, under the implementation's policy and a what-if.
TEST_F(CudaBackendOnGpu, PyTorchFsdpsOwnCollectivesVerifiedSameLogAsSim) {
  for (const std::string trace : {"tests/fuzz/seeds/trace/fsdp1-hybrid-1l.json",
                                  "tests/fuzz/seeds/trace/fsdp1-no-shard-1l.json",
                                  "tests/fuzz/seeds/trace/fsdp2-reshard-2-1l.json"}) {
    SCOPED_TRACE(trace);
    const std::string impl = trace.find("fsdp2") != std::string::npos ? "fsdp2" : "fsdp1";
    std::vector<PolicySpec> policies;
    for (const std::string& name : {impl, std::string("backward-only")}) {
      Result<PolicySpec> spec = ParsePolicySpec(name);
      ASSERT_TRUE(spec.ok()) << spec.status().ToString();
      policies.push_back(*spec);
    }
    Result<ReplayOutcome> sim = ReplayShipped(trace, policies, false);
    ASSERT_TRUE(sim.ok()) << sim.status().ToString();
    Result<ReplayOutcome> cuda = ReplayShipped(trace, policies, true);
    ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
    for (std::size_t i = 0; i < sim->runs.size(); ++i) {
      const RunResult& want = sim->runs[i];
      const RunResult& got = cuda->runs[i];
      SCOPED_TRACE(want.policy);
      EXPECT_EQ(got.execution.verify_failures, 0u) << got.execution.first_mismatch;
      EXPECT_EQ(got.execution.verified_collectives, got.collectives.size());
      EXPECT_EQ(got.peak.allocated_bytes, want.peak.allocated_bytes);
      ASSERT_EQ(got.collectives.size(), want.collectives.size());
      for (std::size_t c = 0; c < want.collectives.size(); ++c) {
        EXPECT_EQ(got.collectives[c].kind, want.collectives[c].kind);
        EXPECT_EQ(got.collectives[c].group, want.collectives[c].group);
        EXPECT_EQ(got.collectives[c].output_numel, want.collectives[c].output_numel);
      }
    }
  }
}

TEST_F(CudaBackendOnGpu, ComputeSpansSpinAtLeastTheirTracedDuration) {
  std::vector<PolicySpec> unbucketed = {*ParsePolicySpec("unbucketed")};
  Result<ReplayOutcome> sim = ReplayShipped("tiny-ws2.json", unbucketed, false);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  Result<ReplayOutcome> cuda = ReplayShipped("tiny-ws2.json", unbucketed, true);
  ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
  const RunResult& want = sim->runs.front();
  const RunResult& got = cuda->runs.front();
  ASSERT_EQ(got.iterations.size(), want.iterations.size());
  // Not a timing assertion (bench/ measures speed): a calibrated spin that ran for less than
  // 90% of the traced compute time would mean the calibration is wrong.
  for (std::size_t i = 0; i < want.iterations.size(); ++i) {
    EXPECT_GE(got.iterations[i].compute_us, 0.9 * want.iterations[i].compute_us);
  }
}

}  // namespace
}  // namespace bucketsim
