// Devices by name for --device-memory (`h100-80gb`): each one's capacity is what PyTorch reports
// as torch.cuda.get_device_properties(0).total_memory, CUDA's cudaDeviceProp::totalGlobalMem,
// which is also cudaMemGetInfo's total: the figure device overhead is measured against
// (docs/memory-model.md). It is less than nvidia-smi's MiB total (NVML counts memory the driver
// reserves) and a driver version can move it by a few MiB; each figure names the deviceQuery
// output it comes from (core/gpu_catalog.cc, the one table of GPUs). A GPU without such a
// source is left out.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/units.h"

namespace bucketsim {

struct NamedDevice {
  std::string_view name;         // "h100-80gb"
  std::string_view description;  // "NVIDIA H100 80GB HBM3 (SXM)"
  Bytes total_memory_bytes = 0;
};

// Every named device, in the order help text lists them.
std::span<const NamedDevice> NamedDevices();
// The capacity of the device `name` names; none for another name.
std::optional<Bytes> NamedDeviceCapacity(std::string_view name);
// "h100-80gb, h100-94gb, ...": the names, for help text and errors.
std::string NamedDeviceList();

}  // namespace bucketsim
