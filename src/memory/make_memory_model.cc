#include "memory/make_memory_model.h"

#include <fmt/format.h>

#include "memory/alloc_conf.h"
#include "memory/caching_allocator_model.h"
#include "memory/exact_memory_model.h"

namespace bucketsim {

Result<MemoryModelFactory> MakeMemoryModelFactory(const MemoryModelOptions& options) {
  if (options.allocator == "exact") {
    if (!options.alloc_conf.empty() || options.device_memory) {
      return InvalidArgument(
          "--alloc-conf and --device-memory describe the caching allocator: use them with "
          "--allocator caching");
    }
    return MemoryModelFactory([] { return std::make_unique<ExactMemoryModel>(); });
  }
  if (options.allocator != "caching") {
    return InvalidArgument(
        fmt::format("unknown allocator '{}' (known: exact, caching)", options.allocator));
  }
  Result<AllocConf> conf = ParseAllocConf(options.alloc_conf);
  if (!conf.ok()) return conf.status();
  std::optional<Bytes> capacity = options.device_memory;
  return MemoryModelFactory(
      [conf = *conf, capacity] { return std::make_unique<CachingAllocatorModel>(conf, capacity); });
}

}  // namespace bucketsim
