// Chooses the memory model a replay accounts with, from the user's words: `--allocator
// exact|caching`, `--alloc-conf` (PYTORCH_CUDA_ALLOC_CONF syntax), `--device-memory` and
// `--device-overhead` (the allocator gets the device less what is outside it), and from
// the trace: without `--alloc-conf` the caching model takes the settings the trace was recorded
// under (an imported snapshot's alloc_conf; PyTorch's defaults when the trace has none). Every
// policy of a comparison gets its own fresh model from the same factory, made when the trace's
// header has been read.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "core/trace_header.h"
#include "memory/device_overhead.h"
#include "memory/memory_model.h"

namespace bucketsim {

// A bad alloc_conf in the trace's header is an input error ("header: alloc_conf: ...").
using MemoryModelFactory =
    std::function<Result<std::unique_ptr<MemoryModel>>(const TraceHeader& header)>;

struct MemoryModelOptions {
  std::string allocator = "caching";  // "exact" or "caching"
  // caching only. Unset: the trace's alloc_conf; "" (given): PyTorch's defaults.
  std::optional<std::string> alloc_conf;
  std::optional<Bytes> device_memory;  // caching only: the device's capacity, for retries and OOM
  // With device_memory: the memory outside the allocator, replacing the estimate
  // (device_overhead.h).
  std::optional<Bytes> device_overhead;
};

// Checks what the user gave (a bad --alloc-conf is a usage error here, before any trace is read).
Result<MemoryModelFactory> MakeMemoryModelFactory(const MemoryModelOptions& options);

// The device a replay of `header` runs on (--device-memory, less its overhead: the caching
// model's capacity); none without --device-memory. Fails when the overhead leaves nothing.
Result<std::optional<DeviceBudget>> DeviceBudgetOf(const MemoryModelOptions& options,
                                                   const TraceHeader& header);

// The alloc_conf a caching model for `header` uses: the given one, else the trace's.
std::string AllocConfFor(const MemoryModelOptions& options, const TraceHeader& header);

}  // namespace bucketsim
