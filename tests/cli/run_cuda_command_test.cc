// `bucketsim run --backend cuda` where it cannot run: a build without CUDA, or a machine
// without a GPU or driver, ends with exit code 2 and the reason, never a crash or a hang.
#include <gtest/gtest.h>

#include "backend/availability.h"
#include "testing/run_binary.h"

namespace bucketsim {
namespace {

TEST(RunCudaCommand, WithoutAUsableGpuExitsTwoNamingTheMissingDeviceOrBuild) {
  BackendAvailability cuda = ProbeCudaBackend();
  if (cuda.usable) GTEST_SKIP() << "this machine has a usable GPU: " << cuda.detail;
  testing::BinaryResult result =
      testing::RunBucketsim({"run", "traces/tiny-ws2.json", "--backend", "cuda"});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_EQ(result.out, "");
  EXPECT_NE(result.err.find("bucketsim: error: rank 0: --backend cuda: "), std::string::npos)
      << result.err;
  if (cuda.compiled) {
    // The runtime's own reason, e.g. "CUDA driver version is insufficient for CUDA runtime
    // version" or "no CUDA-capable device is detected".
    EXPECT_NE(result.err.find("no usable CUDA device ("), std::string::npos) << result.err;
  } else {
    EXPECT_NE(result.err.find("built without CUDA"), std::string::npos) << result.err;
  }
}

}  // namespace
}  // namespace bucketsim
