#include "memory/make_memory_model.h"

#include <fmt/format.h>

#include "memory/alloc_conf.h"
#include "memory/caching_allocator_model.h"
#include "memory/exact_memory_model.h"

namespace bucketsim {

std::string AllocConfFor(const MemoryModelOptions& options, const TraceHeader& header) {
  return options.alloc_conf ? *options.alloc_conf : header.alloc_conf;
}

Result<std::optional<DeviceBudget>> DeviceBudgetOf(const MemoryModelOptions& options,
                                                   const TraceHeader& header) {
  if (!options.device_memory) return std::optional<DeviceBudget>();
  Result<DeviceBudget> budget =
      DeviceBudgetFor(*options.device_memory, options.device_overhead, header);
  if (!budget.ok()) return budget.status();
  return std::optional<DeviceBudget>(*budget);
}

Result<MemoryModelFactory> MakeMemoryModelFactory(const MemoryModelOptions& options) {
  if (options.device_overhead && !options.device_memory) {
    return InvalidArgument(
        "--device-overhead is taken from the device's capacity: give --device-memory SIZE too");
  }
  if (options.allocator == "exact") {
    if ((options.alloc_conf && !options.alloc_conf->empty()) || options.device_memory) {
      return InvalidArgument(
          "--alloc-conf and --device-memory describe the caching allocator: use them with "
          "--allocator caching");
    }
    return MemoryModelFactory([](const TraceHeader&) -> Result<std::unique_ptr<MemoryModel>> {
      return std::unique_ptr<MemoryModel>(std::make_unique<ExactMemoryModel>());
    });
  }
  if (options.allocator != "caching") {
    return InvalidArgument(
        fmt::format("unknown allocator '{}' (known: exact, caching)", options.allocator));
  }
  if (options.alloc_conf) {
    Result<AllocConf> given = ParseAllocConf(*options.alloc_conf);
    if (!given.ok()) return given.status();
  }
  return MemoryModelFactory([options](
                                const TraceHeader& header) -> Result<std::unique_ptr<MemoryModel>> {
    Result<AllocConf> conf = ParseAllocConf(AllocConfFor(options, header));
    if (!conf.ok()) {
      return InvalidTrace(fmt::format("header: alloc_conf: {}", conf.status().message()));
    }
    Result<std::optional<DeviceBudget>> device = DeviceBudgetOf(options, header);
    if (!device.ok()) return device.status();
    std::optional<Bytes> capacity;
    if (*device) capacity = (*device)->allocator_capacity_bytes;
    return std::unique_ptr<MemoryModel>(std::make_unique<CachingAllocatorModel>(*conf, capacity));
  });
}

}  // namespace bucketsim
