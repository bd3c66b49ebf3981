// How requested bytes become device memory. The engine hands every allocation and free (trace
// tensors and policy buffers alike) to a MemoryModel and learns what each allocation is charged
// (its block size: what torch.cuda.memory_allocated counts) and what the device has reserved.
// `exact` charges the request rounded to 512 B and reserves nothing beyond it; the caching
// allocator model (segments, pools, streams, splitting) implements the same interface, so the
// engine and the policies do not change when it is selected.
#pragma once

#include <string_view>

#include "core/status.h"
#include "core/units.h"

namespace bucketsim {

struct Block {
  std::uint64_t handle = 0;  // the model's own identifier of the allocation
  Bytes charged = 0;         // bytes counted as allocated while the block is live
};

class MemoryModel {
 public:
  virtual ~MemoryModel() = default;
  virtual std::string_view name() const = 0;
  // A failure is a device-capacity OOM (only models with a capacity fail).
  virtual Result<Block> Allocate(Bytes requested, StreamId stream) = 0;
  virtual void Free(const Block& block) = 0;
  virtual Bytes allocated_bytes() const = 0;
  virtual Bytes reserved_bytes() const = 0;
};

}  // namespace bucketsim
