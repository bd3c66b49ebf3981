// The GPUs by name: their published rates, the capacities on record, and the efficiency flag.
#include "core/gpu_catalog.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "memory/device_capacity.h"

namespace bucketsim {
namespace {

TEST(GpuCatalog, EveryGpuHasItsRatesAndOneName) {
  std::set<std::string_view> names;
  for (const GpuSpec& gpu : Gpus()) {
    SCOPED_TRACE(std::string(gpu.name));
    EXPECT_TRUE(names.insert(gpu.name).second);
    EXPECT_EQ(FindGpu(gpu.name), &gpu);
    EXPECT_GT(gpu.bf16_tflops, gpu.fp32_tflops);
    EXPECT_GT(gpu.fp32_tflops, 0);
    EXPECT_GT(gpu.hbm_GBps, 0);
    EXPECT_GT(gpu.host_link_GBps, 0);
    EXPECT_GT(gpu.host_memory_GBps, 0);
    EXPECT_EQ(gpu.nvlink_ranks >= 2, gpu.nvlink_GBps > 0);
  }
  EXPECT_EQ(FindGpu("h100"), nullptr);
  // The datasheets' dense figures: half the "with sparsity" tensor-core figures.
  EXPECT_EQ(FindGpu("h100-80gb")->bf16_tflops, 989.4);
  EXPECT_EQ(FindGpu("h200-141gb")->hbm_GBps, 4800);
  EXPECT_EQ(FindGpu("a100-80gb")->bf16_tflops, 312);
  EXPECT_EQ(GpuNameList().substr(0, 25), "h100-80gb, h100-pcie-80gb");
}

// --device-memory takes only the GPUs whose totalGlobalMem is on record; the others have rates.
TEST(GpuCatalog, CapacitiesComeOnlyFromTheGpusOnRecord) {
  for (const GpuSpec& gpu : Gpus()) {
    const std::optional<Bytes> capacity = NamedDeviceCapacity(gpu.name);
    EXPECT_EQ(capacity.has_value(), gpu.total_memory_bytes > 0) << gpu.name;
  }
  EXPECT_FALSE(NamedDeviceCapacity("h200-141gb"));
  EXPECT_EQ(NamedDeviceCapacity("h100-80gb"), Bytes{85045477376});
}

TEST(GpuEfficiency, ReadsOneFractionAsComputeOrEachByName) {
  Result<GpuEfficiency> compute = ParseGpuEfficiency("0.55");
  ASSERT_TRUE(compute.ok()) << compute.status().message();
  EXPECT_EQ(compute->compute, 0.55);
  EXPECT_EQ(compute->memory, GpuEfficiency{}.memory);

  Result<GpuEfficiency> named = ParseGpuEfficiency("link=0.9,compute=0.5,host=1");
  ASSERT_TRUE(named.ok()) << named.status().message();
  EXPECT_EQ(*named, (GpuEfficiency{0.5, GpuEfficiency{}.memory, 0.9, 1.0}));
  EXPECT_EQ(GpuEfficiencyText(*named), "compute=0.5,memory=0.8,link=0.9,host=1");
  EXPECT_EQ(ParseGpuEfficiency(GpuEfficiencyText(GpuEfficiency{})).value(), GpuEfficiency{});
  EXPECT_EQ(GpuEfficiencyText(GpuEfficiency{}), "compute=0.7,memory=0.8,link=0.8065,host=0.8");
}

TEST(GpuEfficiency, RefusesWhatIsNotAFractionOfARate) {
  for (const char* bad : {"0", "1.5", "-0.1", "x", "nan", "compute=0", "speed=0.5",
                          "compute=0.5,compute=0.6", "compute", "compute=0.5,", "=0.5"}) {
    Result<GpuEfficiency> parsed = ParseGpuEfficiency(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
  }
  EXPECT_EQ(ParseGpuEfficiency("memory=2").status().message(),
            "memory: '2' is not a fraction in (0, 1]");
  EXPECT_EQ(ParseGpuEfficiency("speed=0.5").status().message(),
            "'speed=0.5' is not KEY=FRACTION with KEY compute, memory, link or host");
}

}  // namespace
}  // namespace bucketsim
