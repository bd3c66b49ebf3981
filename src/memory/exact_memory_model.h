// The `exact` memory model: every request is charged its size rounded up to 512 B, the
// allocator's minimum block granularity (kMinBlockSize in c10/cuda/CUDACachingAllocator.cpp,
// reference/caching_allocator.md §1.2). That is a lower bound of torch.cuda.memory_allocated,
// which counts whole blocks including remainders the allocator did not split off. Reserved
// equals allocated: this model has no cache.
#pragma once

#include "memory/memory_model.h"

namespace bucketsim {

inline constexpr Bytes kMinBlockSize = 512;

constexpr Bytes RoundUpToBlock(Bytes bytes) {
  return bytes == 0 ? 0 : (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

class ExactMemoryModel final : public MemoryModel {
 public:
  std::string_view name() const override { return "exact"; }
  Result<Block> Allocate(Bytes requested, StreamId stream) override;
  void Free(const Block& block) override;
  Bytes allocated_bytes() const override { return allocated_; }
  Bytes reserved_bytes() const override { return allocated_; }

 private:
  Bytes allocated_ = 0;
};

}  // namespace bucketsim
