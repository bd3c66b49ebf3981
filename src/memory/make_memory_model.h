// Chooses the memory model a replay accounts with, from the user's words: `--allocator
// exact|caching`, `--alloc-conf` (PYTORCH_CUDA_ALLOC_CONF syntax) and `--device-memory`, and from
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
#include "memory/memory_model.h"

namespace bucketsim {

// A bad alloc_conf in the trace's header is an input error ("header: alloc_conf: ...").
using MemoryModelFactory =
    std::function<Result<std::unique_ptr<MemoryModel>>(const TraceHeader& header)>;

struct MemoryModelOptions {
  std::string allocator = "caching";  // "exact" or "caching"
  // caching only. Unset: the trace's alloc_conf; "" (given): PyTorch's defaults.
  std::optional<std::string> alloc_conf;
  std::optional<Bytes> device_memory;  // caching only: the capacity, for retries and OOM
};

// Checks what the user gave (a bad --alloc-conf is a usage error here, before any trace is read).
Result<MemoryModelFactory> MakeMemoryModelFactory(const MemoryModelOptions& options);

// The alloc_conf a caching model for `header` uses: the given one, else the trace's.
std::string AllocConfFor(const MemoryModelOptions& options, const TraceHeader& header);

}  // namespace bucketsim
