#include "gen/compute_rates.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/status.h"

namespace bucketsim {
namespace {

// FLOP/s in 1e12 and bytes/s in GB (1e9) as per-µs rates.
constexpr double kFlopsPerUsPerTflops = 1e6;
constexpr double kBytesPerUsPerGBps = 1e3;

}  // namespace

ComputeRates::ComputeRates(const GenOptions& options)
    : device_tflops_(options.device_tflops),
      gpu_(options.gpu.empty() ? nullptr : FindGpu(options.gpu)),
      efficiency_(options.gpu_efficiency) {
  BUCKETSIM_CHECK(options.gpu.empty() || gpu_ != nullptr);  // ValidateGenOptions
}

Micros ComputeRates::Duration(const SpanWork& work) const {
  // Without a GPU the CPU's work is not priced (a step on the host took no time before --gpu).
  if (gpu_ == nullptr)
    return work.on_host ? 0 : work.flops / (device_tflops_ * kFlopsPerUsPerTflops);
  if (work.on_host) {
    return work.bytes / (gpu_->host_memory_GBps * efficiency_.memory * kBytesPerUsPerGBps);
  }
  const double peak = work.tensor_cores ? gpu_->bf16_tflops : gpu_->fp32_tflops;
  const Micros compute = work.flops / (peak * efficiency_.compute * kFlopsPerUsPerTflops);
  const Micros memory = work.bytes / (gpu_->hbm_GBps * efficiency_.memory * kBytesPerUsPerGBps);
  return std::max(compute, memory);
}

Micros ComputeRates::HostCopy(Bytes bytes) const {
  if (gpu_ == nullptr) return 0;
  return static_cast<double>(bytes) /
         (gpu_->host_link_GBps * efficiency_.host * kBytesPerUsPerGBps);
}

std::string EstimateText(const GenOptions& options) {
  const GpuSpec* gpu = options.gpu.empty() ? nullptr : FindGpu(options.gpu);
  if (gpu == nullptr) return {};
  return fmt::format(
      "Times are an estimate from the {}'s published rates ({} TFLOP/s bf16, {} fp32; {} GB/s "
      "memory; {}host link {} GB/s; host memory {:.4g} GB/s) at --gpu-efficiency {}: they rank "
      "configurations, they are not a measurement.",
      gpu->description, gpu->bf16_tflops, gpu->fp32_tflops, gpu->hbm_GBps,
      gpu->nvlink_ranks >= 2
          ? fmt::format("NVLink {} GB/s to {} GPUs; ", gpu->nvlink_GBps, gpu->nvlink_ranks)
          : std::string(),
      gpu->host_link_GBps, gpu->host_memory_GBps, GpuEfficiencyText(options.gpu_efficiency));
}

}  // namespace bucketsim
