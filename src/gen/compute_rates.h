// How long the emitter's spans take on the run's device. Without --gpu, one sustained rate
// (--device-tflops) prices every span's FLOPs and nothing else, as traces always had. With
// --gpu NAME, the GPU's published rates (core/gpu_catalog.h) at --gpu-efficiency: a roofline
// per span, the longer of its FLOPs at the dense peak of the precision it computes in (bf16 or
// fp16 on the tensor cores, fp32 without them: torch's default for fp32 matmuls) and the bytes
// it moves at the device memory's bandwidth; copies between host and device at the host link's
// (CPU offload: parameters in, gradients out); an optimizer step on the CPU at the host memory's
// bandwidth. An estimate, said so wherever it is reported (docs/time-model.md).
#pragma once

#include <string>

#include "core/gpu_catalog.h"
#include "core/units.h"
#include "gen/gen_options.h"

namespace bucketsim {

// What a span does, as the time model prices it.
struct SpanWork {
  double flops = 0;
  double bytes = 0;           // read and written in device memory (host memory when on_host)
  bool tensor_cores = false;  // computed in bf16 or fp16
  bool on_host = false;       // runs on the CPU (the optimizer step of offloaded parameters)
};

class ComputeRates {
 public:
  explicit ComputeRates(const GenOptions& options);

  // The span's duration, µs; a span on the host takes none without a GPU.
  Micros Duration(const SpanWork& work) const;
  // A copy of `bytes` between host and device memory, µs; 0 without a GPU (not priced).
  Micros HostCopy(Bytes bytes) const;
  // Whether host copies and host spans are priced (a GPU is named).
  bool prices_host() const { return gpu_ != nullptr; }

 private:
  double device_tflops_ = 0;
  const GpuSpec* gpu_ = nullptr;
  GpuEfficiency efficiency_;
};

// What an estimate's figures rest on, for reports: "Times are an estimate from the NVIDIA H100
// 80GB HBM3 (SXM)'s published rates (...) at compute=0.7,...: a ranking, not a measurement.";
// empty without --gpu.
std::string EstimateText(const GenOptions& options);

}  // namespace bucketsim
