#include "memory/device_overhead.h"

#include <fmt/format.h>

#include "core/size_format.h"

namespace bucketsim {

int NcclReceivePeers(int group_size) {
  if (group_size <= 1) return 0;
  return group_size == 2 ? 1 : 2;
}

Bytes NcclBufferBytes(int group_size) {
  const Bytes per_connection = kNcclSimpleBufferBytes + kNcclLlBufferBytes + kNcclLl128BufferBytes;
  return Bytes{kNcclChannels} * static_cast<Bytes>(NcclReceivePeers(group_size)) * per_connection;
}

DeviceOverhead EstimateDeviceOverhead(const TraceHeader& header) {
  DeviceOverhead overhead;
  overhead.cuda_context_bytes = kCudaContextBytes;
  for (const ProcessGroup& group : header.groups) {
    if (NcclReceivePeers(group.size()) == 0) continue;
    overhead.nccl_buffer_bytes += NcclBufferBytes(group.size());
    ++overhead.nccl_communicators;
  }
  return overhead;
}

Result<DeviceBudget> DeviceBudgetFor(Bytes device_memory_bytes, std::optional<Bytes> given_overhead,
                                     const TraceHeader& header) {
  DeviceBudget budget;
  budget.device_memory_bytes = device_memory_bytes;
  if (given_overhead) {
    budget.overhead.given_bytes = given_overhead;
  } else {
    budget.overhead = EstimateDeviceOverhead(header);
  }
  const Bytes overhead_bytes = budget.overhead.total_bytes();
  if (overhead_bytes >= device_memory_bytes) {
    return InvalidArgument(fmt::format(
        "--device-memory {} ({} B) leaves nothing to the caching allocator: {} B of the device "
        "are outside it, {}; give the device's whole capacity, or --device-overhead SIZE "
        "measured on a real run (docs/memory-model.md)",
        FormatBytes(device_memory_bytes), device_memory_bytes, overhead_bytes,
        DescribeDeviceOverhead(budget.overhead)));
  }
  budget.allocator_capacity_bytes = device_memory_bytes - overhead_bytes;
  return budget;
}

std::string DescribeDeviceOverhead(const DeviceOverhead& overhead) {
  if (overhead.given_bytes) {
    return fmt::format("{} (--device-overhead)", FormatBytes(overhead.total_bytes()));
  }
  return fmt::format("{} (CUDA context {} + NCCL buffers {} for {} communicator{})",
                     FormatBytes(overhead.total_bytes()), FormatBytes(overhead.cuda_context_bytes),
                     FormatBytes(overhead.nccl_buffer_bytes), overhead.nccl_communicators,
                     overhead.nccl_communicators == 1 ? "" : "s");
}

}  // namespace bucketsim
