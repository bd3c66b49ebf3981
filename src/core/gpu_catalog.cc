#include "core/gpu_catalog.h"

#include <array>
#include <charconv>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "core/comma_list.h"

namespace bucketsim {
namespace {

// Host memory per GPU of the nodes the GPUs ship in: DGX H100/H200, two Xeon Platinum 8480C of
// 8 DDR5-4800 channels each (38.4 GB/s a channel: 307.2 GB/s a socket), over 8 GPUs; DGX A100,
// two EPYC 7742 of 8 DDR4-3200 channels (204.8 GB/s a socket), over 8 GPUs; GH200, its Grace's
// LPDDR5X (up to 512 GB/s) for its one GPU.
constexpr double kDgxH100HostGBps = 2 * 307.2 / 8;
constexpr double kDgxA100HostGBps = 2 * 204.8 / 8;

// Capacities: deviceQuery's "Total amount of global memory: ... (N bytes)", the source named by
// each (memory/device_capacity.h). Rates: the datasheets, the tensor-core figure halved where
// the datasheet gives it with sparsity; NVLink and PCIe halved from bidirectional.
//   H100 SXM, H100 NVL: nvidia.com/en-us/data-center/h100 (BF16 1,979* / 1,671* TFLOPS, FP32
//     67 / 60, 3.35 / 3.9 TB/s, NVLink 900 / 600 GB/s (the NVL's a bridged pair), PCIe Gen5
//     128 GB/s); the H100 whitepaper's table gives the SXM's 989.4 dense, 66.9 FP32.
//   H100 PCIe: the H100 datasheet of 2022 (BF16 1,513*, FP32 51, HBM2e 2 TB/s, NVLink bridge
//     600 GB/s, PCIe Gen5 128 GB/s).
//   H200: nvidia.com/en-us/data-center/h200 (BF16 1,979*, FP32 67, 141 GB at 4.8 TB/s, NVLink
//     900 GB/s, PCIe Gen5 128 GB/s).
//   GH200: nvidia.com/en-us/data-center/grace-hopper-superchip (96 GB HBM3 at 4 TB/s, BF16
//     1,979*, FP32 67, NVLink-C2C 900 GB/s to the Grace CPU).
//   A100: nvidia.com/en-us/data-center/a100 (BF16 312 dense, FP32 19.5, 80 GB HBM2e 2,039 GB/s,
//     40 GB HBM2 1,555 GB/s, NVLink 600 GB/s, PCIe Gen4 64 GB/s).
//   L40S: nvidia.com/en-us/data-center/l40s (BF16 362.05 dense, FP32 91.6, GDDR6 864 GB/s,
//     PCIe Gen4 x16 64 GB/s, no NVLink).
constexpr std::array<GpuSpec, 8> kGpus = {{
    // github.com/thamada/nvidia-smi nvsim/H100SXMx8_deviceQuery.py: "NVIDIA H100 80GB HBM3",
    // driver 12.7 / runtime 12.4, 81106 MBytes (85045477376 bytes). (nvidia-smi: 81559MiB.)
    {"h100-80gb", "NVIDIA H100 80GB HBM3 (SXM)", 85045477376, 989.4, 66.9, 3350, 450, 8, 64,
     kDgxH100HostGBps},
    // No deviceQuery output on record: rates only.
    {"h100-pcie-80gb", "NVIDIA H100 PCIe", 0, 756.5, 51, 2000, 300, 2, 64, kDgxH100HostGBps},
    // github.com/thamada/nvidia-smi gls/H100NVLx2_deviceQuery.py: "NVIDIA H100 NVL", driver
    // 12.4 / runtime 12.4, 95235 MBytes (99861594112 bytes).
    {"h100-94gb", "NVIDIA H100 NVL", 99861594112, 835.5, 60, 3900, 300, 2, 64, kDgxH100HostGBps},
    // A GH200's GPU (an H100 with 96 GB HBM3): a public Grace Hopper set-up log's deviceQuery,
    // "NVIDIA GH200 480GB", driver 12.2 / runtime 12.4, 97280 MBytes (102005473280 bytes).
    {"h100-96gb", "NVIDIA GH200 480GB (its H100, 96 GB HBM3)", 102005473280, 989.4, 67, 4000, 0, 0,
     450, 512},
    // No deviceQuery output on record (nvidia-smi shows 143771MiB, which is not totalGlobalMem).
    {"h200-141gb", "NVIDIA H200 (SXM)", 0, 989.4, 67, 4800, 450, 8, 64, kDgxH100HostGBps},
    // github.com/thamada/nvidia-smi gls/A100SXMx4_deviceQuery.py: "NVIDIA A100-SXM4-80GB",
    // driver 12.5 / runtime 12.4, 81158 MBytes (85100068864 bytes). (nvidia-smi: 81920MiB.)
    {"a100-80gb", "NVIDIA A100-SXM4-80GB", 85100068864, 312, 19.5, 2039, 300, 8, 32,
     kDgxA100HostGBps},
    // github.com/bottlerocket-os/bottlerocket pull 3873: deviceQuery "NVIDIA A100-SXM4-40GB",
    // driver 12.2 / runtime 11.4, 40339 MBytes (42298834944 bytes). (nvidia-smi: 40960MiB.)
    {"a100-40gb", "NVIDIA A100-SXM4-40GB", 42298834944, 312, 19.5, 1555, 300, 8, 32,
     kDgxA100HostGBps},
    // github.com/thamada/nvidia-smi nvsim/L40S_deviceQuery.py: "NVIDIA L40S", driver 12.4 /
    // runtime 12.4, 45589 MBytes (47803596800 bytes). (nvidia-smi: 46068MiB.)
    {"l40s-48gb", "NVIDIA L40S", 47803596800, 362.05, 91.6, 864, 0, 0, 32, kDgxH100HostGBps},
}};

// The keys of --gpu-efficiency, in the order GpuEfficiencyText writes them.
constexpr std::array<std::pair<std::string_view, double GpuEfficiency::*>, 4> kEfficiencyKeys = {{
    {"compute", &GpuEfficiency::compute},
    {"memory", &GpuEfficiency::memory},
    {"link", &GpuEfficiency::link},
    {"host", &GpuEfficiency::host},
}};

Result<double> ParseFraction(std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value) ||
      value <= 0 || value > 1) {
    return InvalidArgument(fmt::format("'{}' is not a fraction in (0, 1]", text));
  }
  return value;
}

}  // namespace

std::span<const GpuSpec> Gpus() { return kGpus; }

const GpuSpec* FindGpu(std::string_view name) {
  for (const GpuSpec& gpu : kGpus) {
    if (gpu.name == name) return &gpu;
  }
  return nullptr;
}

std::string GpuNameList() {
  std::string list;
  for (const GpuSpec& gpu : kGpus) {
    list += list.empty() ? "" : ", ";
    list += gpu.name;
  }
  return list;
}

Result<GpuEfficiency> ParseGpuEfficiency(std::string_view text) {
  GpuEfficiency efficiency;
  if (text.find('=') == std::string_view::npos) {
    Result<double> compute = ParseFraction(text);
    if (!compute.ok()) return compute.status();
    efficiency.compute = *compute;
    return efficiency;
  }
  std::array<bool, kEfficiencyKeys.size()> seen{};
  for (std::string_view item : SplitCommaList(text)) {
    const std::size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    std::size_t k = 0;
    while (k < kEfficiencyKeys.size() && kEfficiencyKeys[k].first != key) ++k;
    if (eq == std::string_view::npos || k == kEfficiencyKeys.size()) {
      return InvalidArgument(
          fmt::format("'{}' is not KEY=FRACTION with KEY compute, memory, link or host", item));
    }
    if (seen[k]) return InvalidArgument(fmt::format("'{}' is given twice", key));
    seen[k] = true;
    Result<double> value = ParseFraction(item.substr(eq + 1));
    if (!value.ok()) return InvalidArgument(fmt::format("{}: {}", key, value.status().message()));
    efficiency.*kEfficiencyKeys[k].second = *value;
  }
  return efficiency;
}

std::string GpuEfficiencyText(const GpuEfficiency& efficiency) {
  std::string text;
  for (const auto& [key, field] : kEfficiencyKeys) {
    text += fmt::format("{}{}={:.4g}", text.empty() ? "" : ",", key, efficiency.*field);
  }
  return text;
}

}  // namespace bucketsim
