// How the emitter prices its spans: --device-tflops alone, or a GPU's published rates (--gpu) as
// a roofline, with host copies and the CPU optimizer step of CPU offload.
#include "gen/compute_rates.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gen/fsdp_emitter.h"
#include "gen/model_program.h"
#include "gen/program_builder.h"
#include "tiny_fsdp.h"

namespace bucketsim {
namespace {

GenOptions OnGpu(std::string gpu) {
  GenOptions options;
  options.gpu = std::move(gpu);
  return options;
}

TEST(ComputeRates, WithoutAGpuFlopsAtTheSustainedRateAndNothingElse) {
  GenOptions options;
  options.device_tflops = 200;
  const ComputeRates rates(options);
  EXPECT_DOUBLE_EQ(rates.Duration({2e12, 1e12, true, false}), 1e4);  // 2e12 / 2e14 s
  EXPECT_EQ(rates.Duration({0, 1e12, false, false}), 0);             // bytes are free
  EXPECT_EQ(rates.Duration({1e9, 1e9, false, true}), 0);             // so is the host
  EXPECT_EQ(rates.HostCopy(1 << 30), 0);
  EXPECT_FALSE(rates.prices_host());
}

// h100-80gb at the default efficiencies: 989.4 TFLOP/s bf16 x 0.7, 66.9 fp32 x 0.7, 3350 GB/s x
// 0.8, PCIe 64 GB/s x 0.8, host memory 76.8 GB/s x 0.8 (core/gpu_catalog.cc).
TEST(ComputeRates, AGpusRooflineIsTheLongerOfItsFlopsAndItsBytes) {
  const ComputeRates rates(OnGpu("h100-80gb"));
  EXPECT_TRUE(rates.prices_host());
  EXPECT_DOUBLE_EQ(rates.Duration({1e12, 1e6, true, false}), 1e12 / (989.4 * 0.7 * 1e6));
  EXPECT_DOUBLE_EQ(rates.Duration({1e12, 1e6, false, false}), 1e12 / (66.9 * 0.7 * 1e6));
  EXPECT_DOUBLE_EQ(rates.Duration({1e6, 1e9, true, false}), 1e9 / (3350 * 0.8 * 1e3));
  EXPECT_DOUBLE_EQ(rates.Duration({1e12, 1e9, false, true}), 1e9 / (76.8 * 0.8 * 1e3));
  EXPECT_DOUBLE_EQ(rates.HostCopy(1'000'000), 1e6 / (64 * 0.8 * 1e3));

  GenOptions slower = OnGpu("h100-80gb");
  slower.gpu_efficiency.compute = 0.35;
  EXPECT_DOUBLE_EQ(ComputeRates(slower).Duration({1e12, 1e6, true, false}),
                   2 * rates.Duration({1e12, 1e6, true, false}));
}

TEST(ComputeRates, TheEstimateSaysWhatItRestsOn) {
  EXPECT_EQ(EstimateText(GenOptions{}), "");
  EXPECT_EQ(EstimateText(OnGpu("a100-40gb")),
            "Times are an estimate from the NVIDIA A100-SXM4-40GB's published rates (312 TFLOP/s "
            "bf16, 19.5 fp32; 1555 GB/s memory; NVLink 300 GB/s to 8 GPUs; host link 32 GB/s; "
            "host memory 51.2 GB/s) at --gpu-efficiency compute=0.7,memory=0.8,link=0.8065,"
            "host=0.8: they rank configurations, they are not a measurement.");
}

TEST(ComputeRates, GpuOptionsAreChecked) {
  GenOptions unknown = OnGpu("h100");
  EXPECT_EQ(ValidateGenOptions(unknown).message().substr(0, 34),
            "gpu 'h100' is not one of h100-80gb");
  GenOptions both = OnGpu("h100-80gb");
  both.device_tflops = 500;
  EXPECT_FALSE(ValidateGenOptions(both).ok());
  GenOptions efficiency_alone;
  efficiency_alone.gpu_efficiency.compute = 0.5;
  EXPECT_EQ(ValidateGenOptions(efficiency_alone).message(),
            "gpu_efficiency scales a GPU's published rates: give gpu too");
  EXPECT_TRUE(ValidateGenOptions(OnGpu("h200-141gb")).ok());
}

// x (100 bytes) -> l1 (1 GFLOP, fp32) -> h (200 bytes) -> l2 (a bf16 output, 1 GFLOP) -> y
// (200 bytes) -> loss; l1 and l2 units of 7 elements (tests/gen/torch_fsdp2_test.cc's shapes).
ModelProgram TwoUnits() {
  ProgramBuilder program("rates");
  program.AddInstance({"root", {}, true, false});
  const std::size_t l1 = program.AddInstance({"l1", {{"w", 7}}, true, true});
  const std::size_t l2 = program.AddInstance({"l2", {{"w", 7}}, true, true});
  program.AddInput(Tensor("x", 100, "fp32"));
  program.Gather(l1);
  program.Run("l1", 1e9, {l1}, {In("x")}, {Tensor("h", 200, "fp32")}, {Keep("x")});
  program.EndForward(l1);
  program.Gather(l2);
  program.Run("l2", 1e9, {l2}, {In("h")}, {Tensor("y", 200, "bf16")}, {Keep("h")});
  program.EndForward(l2);
  program.Run("loss", 0, {}, {In("y")}, {Tensor("loss", 4, "fp32")});
  program.SetLoss("loss");
  return program.Take();
}

// Each span as "NAME s{stream} {µs, 6 significant digits}".
std::vector<std::string> Spans(const GenOptions& options) {
  testing::RecordingSink sink;
  Status status = EmitFsdpTrace(TwoUnits(), options, sink);
  EXPECT_TRUE(status.ok()) << status.message();
  std::vector<std::string> spans;
  for (const Event& e : sink.events) {
    if (e.kind != EventKind::kCompute) continue;
    spans.push_back(fmt::format("{} s{} {:.6g}", sink.header.names[e.name], e.stream, e.dur_us));
  }
  return spans;
}

// FSDP2 with CPUOffloadPolicy on an H100: each all-gather's inputs copied in on the all-gather
// stream (4 padded elements, 16 bytes, at 51.2 GB/s), each unit's gradients out on the
// reduce-scatter stream (rank 0's 4 local elements), the step on the CPU (AdamW foreach, 36 bytes
// per element of 8 at 61.44 GB/s); each run the longer of its FLOPs and its bytes (forward: its
// input and output once, backward twice, at twice the FLOPs); loss moves 204 bytes at 2680 GB/s.
TEST(ComputeRates, AnOffloadedRunOnAGpuPaysItsHostCopiesAndItsCpuStep) {
  GenOptions options = testing::TinyFsdpOptions(2);
  options.gpu = "h100-80gb";
  options.fsdp_impl = FsdpImpl::kFsdp2;
  options.offload_params = true;
  options.optimizer = OptimizerKind::kAdamW;
  options.optimizer_impl = OptimizerImpl::kForeach;
  const double fp32 = 66.9 * 0.7 * 1e6;
  const double bf16 = 989.4 * 0.7 * 1e6;
  const double hbm = 3350 * 0.8 * 1e3;
  const double pcie = 64 * 0.8 * 1e3;
  const auto span = [](std::string name, int stream, double us) {
    return fmt::format("{} s{} {:.6g}", name, stream, us);
  };
  EXPECT_EQ(Spans(options),
            (std::vector<std::string>{
                span("offload param to device", 2, 16 / pcie),
                span("forward l1", 0, 1e9 / fp32),
                span("offload param to device", 2, 16 / pcie),
                span("forward l2", 0, 1e9 / bf16),
                span("forward loss", 0, 204 / hbm),
                span("backward loss", 0, 408 / hbm),
                span("offload param to device", 2, 16 / pcie),  // l2's pre-backward unshard
                span("offload param to device", 2, 16 / pcie),  // ... and its prefetch of l1
                span("backward l2", 0, 2e9 / bf16),
                span("offload grad to host", 3, 16 / pcie),
                span("backward l1", 0, 2e9 / fp32),
                span("offload grad to host", 3, 16 / pcie),
                span("optimizer step", 0, 36 * 8 / (76.8 * 0.8 * 1e3)),
            }));
}

// FSDP1 with CPUOffload(offload_params=True): the shard's copy to the device before the unshard
// stream's all-gather, the reduced shard's to the host after the post-backward stream's
// reduce-scatter (rt _offload_grad), the step on the CPU.
TEST(ComputeRates, Fsdp1sOffloadCopiesRunOnItsUnshardAndPostBackwardStreams) {
  GenOptions options = testing::TinyFsdpOptions(2);
  options.gpu = "a100-80gb";
  options.fsdp_impl = FsdpImpl::kFsdp1;
  options.offload_params = true;
  const double pcie = 32 * 0.8 * 1e3;
  std::vector<std::string> copies;
  for (const std::string& span : Spans(options)) {
    if (span.find("offload") != std::string::npos || span.find("step") != std::string::npos) {
      copies.push_back(span);
    }
  }
  // A flat parameter of 7 elements at 2 ranks: a shard of 4 fp32 (16 bytes). SGD (TinyFsdpOptions)
  // moves 12 bytes per element over the host's 51.2 GB/s x 0.8.
  const std::string in = fmt::format("offload param to device s1 {:.6g}", 16 / pcie);
  const std::string out = fmt::format("offload grad to host s2 {:.6g}", 16 / pcie);
  // Forward's two unshards, then l2's in backward and BACKWARD_PRE's prefetch of l1 before l2's
  // gradient is reduced.
  EXPECT_EQ(copies, (std::vector<std::string>{
                        in, in, in, in, out, out,
                        fmt::format("optimizer step s0 {:.6g}", 12.0 * 8 / (51.2 * 0.8 * 1e3))}));
}

// Without --gpu the same run's spans are FLOPs at --device-tflops, and the offload costs nothing
// (no host copy spans; the CPU step takes no time), as traces always had.
TEST(ComputeRates, WithoutAGpuOffloadIsNotPriced) {
  GenOptions options = testing::TinyFsdpOptions(2);
  options.fsdp_impl = FsdpImpl::kFsdp2;
  options.offload_params = true;
  const double rate = 400 * 1e6;
  EXPECT_EQ(Spans(options), (std::vector<std::string>{
                                "forward l1 s0 " + fmt::format("{:.6g}", 1e9 / rate),
                                "forward l2 s0 " + fmt::format("{:.6g}", 1e9 / rate),
                                "forward loss s0 0",
                                "backward loss s0 0",
                                "backward l2 s0 " + fmt::format("{:.6g}", 2e9 / rate),
                                "backward l1 s0 " + fmt::format("{:.6g}", 2e9 / rate),
                                "optimizer step s0 0",
                            }));
}

}  // namespace
}  // namespace bucketsim
