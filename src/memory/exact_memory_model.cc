#include "memory/exact_memory_model.h"

namespace bucketsim {

Result<Block> ExactMemoryModel::Allocate(Bytes requested, StreamId /*stream*/) {
  Block block{0, RoundUpToBlock(requested)};
  allocated_ += block.charged;
  return block;
}

void ExactMemoryModel::Free(const Block& block) {
  BUCKETSIM_CHECK(block.charged <= allocated_);
  allocated_ -= block.charged;
}

}  // namespace bucketsim
