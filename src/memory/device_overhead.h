// Device memory a training process holds outside PyTorch's caching allocator: the CUDA context
// and NCCL's buffers. Neither is in torch.cuda.memory_reserved(), both are on the device, so a
// capacity (--device-memory) is the allocator's only after they are taken from it: "fits in
// 80 GiB" means reserved + overhead <= 80 GiB. A budget on the allocator's own figure
// (--max-peak-reserved, sweep --budget) is not a device capacity and gets no overhead.
//
// The estimate (docs/memory-model.md, "Device memory outside the caching allocator"):
//
//   overhead = cuda_context + sum over the trace's process groups of size >= 2 of
//              channels * receive_peers(size) * (simple + ll + ll128)
//
// - cuda_context, 512 MiB: what one process's context holds with lazy module loading
//   (CUDA_MODULE_LOADING=LAZY, PyTorch's default since 1.13, CUDA's since 12.2): 287,047,680 B
//   used after the first tensor in pytorch/pytorch#86509 (666,632,192 B eager), "~300MB" and
//   "around 400MB" in pytorch/pytorch#107667 and #109888; a training process loads more
//   kernels (cuBLAS, cuDNN, NCCL, optimizer) as it runs, so the default rounds those up. Eager
//   loading (CUDA < 11.7, CUDA_MODULE_LOADING=EAGER) takes 0.7 to over 1 GB: measure, and
//   give --device-overhead.
// - one NCCL communicator per process-group *object* (ProcessGroupNCCL creates one per group,
//   with its own buffers unless split with shared resources, NVIDIA/nccl#986).
// - channels, 32: NCCL's MAXCHANNELS (src/include/device.h); NVLink systems use 16 to 32
//   collective channels (NCCL_MAX_NCHANNELS lowers it) and memory is linear in them (#986).
// - receive_peers: a ring receives from its previous rank, a tree (a chain along the ring
//   inside a node) also from the next: 2 peers at 3 ranks or more, 1 at 2 ranks (the same
//   peer), 0 alone (no connection). "Ring ... only has 2 connections regardless of the scale"
//   (#986).
// - per connection the receiver holds one buffer per protocol (src/init.cc computeBuffSizes):
//   Simple NCCL_BUFFSIZE = 4 MiB, LL 8 lines * 512 threads * 8 steps * 16 B = 512 KiB, LL128
//   120 elements * 640 threads * 8 steps * 8 B = 4,915,200 B.
//
// It counts the ring and tree buffers only: not NVLS, CollNet, send/recv (p2p) channels, NCCL's
// own kernels in the context, nor a default group the script uses outside the trace. Users report
// 0.5 to 1.6 GB per communicator (NVIDIA/nccl#964, #864), above this estimate: where a real run
// was measured (cudaMemGetInfo's total - free, less memory_reserved()), --device-overhead gives
// that figure instead of the estimate.
#pragma once

#include <optional>
#include <string>

#include "core/status.h"
#include "core/trace_header.h"
#include "core/units.h"

namespace bucketsim {

inline constexpr Bytes kCudaContextBytes = 512 * kMiB;
inline constexpr int kNcclChannels = 32;
inline constexpr Bytes kNcclSimpleBufferBytes = 4 * kMiB;  // NCCL_BUFFSIZE's default
inline constexpr Bytes kNcclLlBufferBytes = 8 * 512 * 8 * 16;
inline constexpr Bytes kNcclLl128BufferBytes = 120 * 640 * 8 * 8;

// The peers a rank of a `group_size`-rank communicator receives from on each channel.
int NcclReceivePeers(int group_size);
// The buffers one communicator of `group_size` ranks holds on each of its ranks' devices.
Bytes NcclBufferBytes(int group_size);

struct DeviceOverhead {
  // The estimate's terms; zero when the figure was given.
  Bytes cuda_context_bytes = 0;
  Bytes nccl_buffer_bytes = 0;
  int nccl_communicators = 0;  // the process groups the NCCL term counts
  // --device-overhead: the whole figure as measured, replacing the estimate.
  std::optional<Bytes> given_bytes;
  Bytes total_bytes() const {
    return given_bytes ? *given_bytes : cuda_context_bytes + nccl_buffer_bytes;
  }
};

// The estimate above for the process groups of `header`.
DeviceOverhead EstimateDeviceOverhead(const TraceHeader& header);

// A device of --device-memory bytes and what of it the caching allocator can have.
struct DeviceBudget {
  Bytes device_memory_bytes = 0;
  DeviceOverhead overhead;
  Bytes allocator_capacity_bytes = 0;  // device_memory_bytes - overhead.total_bytes()
};

// The budget of a device of `device_memory_bytes` for a replay of `header`: with
// `given_overhead` (--device-overhead) that figure, else the estimate. An overhead that leaves
// the allocator nothing is an error (fails closed: never a negative capacity).
Result<DeviceBudget> DeviceBudgetFor(Bytes device_memory_bytes, std::optional<Bytes> given_overhead,
                                     const TraceHeader& header);

// "1.07 GiB outside the caching allocator (CUDA context 512.00 MiB + NCCL buffers 588.00 MiB
// for 2 communicators)", or "(--device-overhead)" for a given figure.
std::string DescribeDeviceOverhead(const DeviceOverhead& overhead);

}  // namespace bucketsim
