// GPUs by name (`h100-80gb`): what --device-memory takes as a capacity, and the published rates
// an estimate of time is made from when no profile was measured (--gpu: compute spans as a
// roofline, gen/compute_rates.h; collectives and copies, backend/sim/time_profile.h).
//
// Every rate is the vendor's datasheet figure, dense (the datasheets' tensor-core figures are
// "with sparsity", twice the dense rate); each entry cites its source in gpu_catalog.cc. The
// capacity is CUDA's cudaDeviceProp::totalGlobalMem (memory/device_capacity.h says why), 0 where
// no deviceQuery output of the GPU is on record: such a GPU has rates but no capacity, and
// --device-memory needs a size for it.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/units.h"

namespace bucketsim {

struct GpuSpec {
  std::string_view name;         // "h100-80gb"
  std::string_view description;  // "NVIDIA H100 80GB HBM3 (SXM)"
  Bytes total_memory_bytes = 0;  // totalGlobalMem; 0: not on record
  double bf16_tflops = 0;        // dense bf16/fp16 tensor-core FLOP/s, 1e12
  double fp32_tflops = 0;        // fp32 without tensor cores (torch's default for fp32 matmuls)
  double hbm_GBps = 0;           // device memory bandwidth, GB/s (1e9 bytes)
  // NVLink bandwidth per direction (half the datasheet's bidirectional figure), GB/s, and the
  // largest group it joins all of (8 through NVSwitch, 2 for a bridged pair; 0: none). A
  // larger group goes over the host link.
  double nvlink_GBps = 0;
  int nvlink_ranks = 0;
  double host_link_GBps = 0;  // to host memory per direction (PCIe x16, or GH200's NVLink-C2C)
  // Host memory bandwidth per GPU of the node the GPU ships in (the CPUs' channels shared by
  // its GPUs): what an optimizer step on the CPU (CPU offload) is priced at.
  double host_memory_GBps = 0;
};

// Every GPU, in the order help text lists them.
std::span<const GpuSpec> Gpus();
// The GPU `name` names; none for another name.
const GpuSpec* FindGpu(std::string_view name);
// "h100-80gb, h100-pcie-80gb, ...": the names, for help text and errors.
std::string GpuNameList();

// The fraction of each published rate an estimate assumes a run reaches. Defaults: compute, a
// large bf16 GEMM's share of the dense peak; memory, a streaming kernel's share of HBM; link,
// the 8xH100 NCCL ring fit's busbw over NVLink 4's line rate (362.93 of 450 GB/s,
// traces/profiles/h100-8gpu-nvlink.json), to four places; host, a pinned-memory copy's share
// of PCIe.
struct GpuEfficiency {
  double compute = 0.7;
  double memory = 0.8;
  double link = 0.8065;
  double host = 0.8;
  bool operator==(const GpuEfficiency&) const = default;
};
// "0.6" (compute alone) or "compute=0.6,memory=0.75,link=0.8,host=0.8" (any of the four, the
// others their defaults); each in (0, 1].
Result<GpuEfficiency> ParseGpuEfficiency(std::string_view text);
// "compute=0.7,memory=0.8,link=0.8065,host=0.8", which ParseGpuEfficiency reads back.
std::string GpuEfficiencyText(const GpuEfficiency& efficiency);

// Alpha of the estimated collectives: the 8xH100 NCCL ring fit's (the same file), which also
// absorbs the protocol ramp of mid-size messages.
inline constexpr double kEstimateAlphaUs = 87.73;

}  // namespace bucketsim
