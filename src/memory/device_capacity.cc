#include "memory/device_capacity.h"

#include <vector>

#include "core/gpu_catalog.h"

namespace bucketsim {
namespace {

// The catalogue's GPUs whose capacity is on record (core/gpu_catalog.cc cites each).
const std::vector<NamedDevice>& Devices() {
  static const std::vector<NamedDevice> devices = [] {
    std::vector<NamedDevice> list;
    for (const GpuSpec& gpu : Gpus()) {
      if (gpu.total_memory_bytes > 0) {
        list.push_back({gpu.name, gpu.description, gpu.total_memory_bytes});
      }
    }
    return list;
  }();
  return devices;
}

}  // namespace

std::span<const NamedDevice> NamedDevices() { return Devices(); }

std::optional<Bytes> NamedDeviceCapacity(std::string_view name) {
  for (const NamedDevice& device : Devices()) {
    if (device.name == name) return device.total_memory_bytes;
  }
  return std::nullopt;
}

std::string NamedDeviceList() {
  std::string list;
  for (const NamedDevice& device : Devices()) {
    list += list.empty() ? "" : ", ";
    list += device.name;
  }
  return list;
}

}  // namespace bucketsim
