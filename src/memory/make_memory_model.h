// Chooses the memory model a replay accounts with, from the user's words: `--allocator
// exact|caching`, `--alloc-conf` (PYTORCH_CUDA_ALLOC_CONF syntax) and `--device-memory`. Every
// policy of a comparison gets its own fresh model from the same factory.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "memory/memory_model.h"

namespace bucketsim {

using MemoryModelFactory = std::function<std::unique_ptr<MemoryModel>()>;

struct MemoryModelOptions {
  std::string allocator = "caching";   // "exact" or "caching"
  std::string alloc_conf;              // caching only
  std::optional<Bytes> device_memory;  // caching only: the capacity, for retries and OOM
};

Result<MemoryModelFactory> MakeMemoryModelFactory(const MemoryModelOptions& options);

}  // namespace bucketsim
