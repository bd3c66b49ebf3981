#include "memory/device_capacity.h"

#include <array>

namespace bucketsim {
namespace {

// deviceQuery's "Total amount of global memory: ... (N bytes)" is cudaDeviceProp::totalGlobalMem.
constexpr std::array<NamedDevice, 6> kDevices = {{
    // github.com/thamada/nvidia-smi nvsim/H100SXMx8_deviceQuery.py: "NVIDIA H100 80GB HBM3",
    // driver 12.7 / runtime 12.4, 81106 MBytes (85045477376 bytes). (nvidia-smi: 81559MiB.)
    {"h100-80gb", "NVIDIA H100 80GB HBM3 (SXM)", 85045477376},
    // github.com/thamada/nvidia-smi gls/H100NVLx2_deviceQuery.py: "NVIDIA H100 NVL", driver
    // 12.4 / runtime 12.4, 95235 MBytes (99861594112 bytes).
    {"h100-94gb", "NVIDIA H100 NVL", 99861594112},
    // A GH200's GPU (an H100 with 96 GB HBM3): a public Grace Hopper set-up log's deviceQuery,
    // "NVIDIA GH200 480GB", driver 12.2 / runtime 12.4, 97280 MBytes (102005473280 bytes).
    {"h100-96gb", "NVIDIA GH200 480GB (its H100, 96 GB HBM3)", 102005473280},
    // github.com/thamada/nvidia-smi gls/A100SXMx4_deviceQuery.py: "NVIDIA A100-SXM4-80GB",
    // driver 12.5 / runtime 12.4, 81158 MBytes (85100068864 bytes). (nvidia-smi: 81920MiB.)
    {"a100-80gb", "NVIDIA A100-SXM4-80GB", 85100068864},
    // github.com/bottlerocket-os/bottlerocket pull 3873: deviceQuery "NVIDIA A100-SXM4-40GB",
    // driver 12.2 / runtime 11.4, 40339 MBytes (42298834944 bytes). (nvidia-smi: 40960MiB.)
    {"a100-40gb", "NVIDIA A100-SXM4-40GB", 42298834944},
    // github.com/thamada/nvidia-smi nvsim/L40S_deviceQuery.py: "NVIDIA L40S", driver 12.4 /
    // runtime 12.4, 45589 MBytes (47803596800 bytes). (nvidia-smi: 46068MiB.)
    {"l40s-48gb", "NVIDIA L40S", 47803596800},
}};

}  // namespace

std::span<const NamedDevice> NamedDevices() { return kDevices; }

std::optional<Bytes> NamedDeviceCapacity(std::string_view name) {
  for (const NamedDevice& device : kDevices) {
    if (device.name == name) return device.total_memory_bytes;
  }
  return std::nullopt;
}

std::string NamedDeviceList() {
  std::string list;
  for (const NamedDevice& device : kDevices) {
    list += list.empty() ? "" : ", ";
    list += device.name;
  }
  return list;
}

}  // namespace bucketsim
