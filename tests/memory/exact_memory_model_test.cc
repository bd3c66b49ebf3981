#include "memory/exact_memory_model.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(ExactMemoryModel, ChargesRequestRoundedTo512Bytes) {
  ExactMemoryModel model;
  // 1 -> 512; 512 stays; 513 -> 1024.
  EXPECT_EQ(model.Allocate(1, 0)->charged, 512u);
  EXPECT_EQ(model.Allocate(512, 0)->charged, 512u);
  EXPECT_EQ(model.Allocate(513, 0)->charged, 1024u);
  EXPECT_EQ(model.allocated_bytes(), 2048u);
  EXPECT_EQ(model.reserved_bytes(), 2048u);
}

TEST(ExactMemoryModel, ZeroBytesChargesNothing) {
  ExactMemoryModel model;
  auto block = model.Allocate(0, 0);
  ASSERT_TRUE(block.ok());
  EXPECT_EQ(block->charged, 0u);
  model.Free(*block);
  EXPECT_EQ(model.allocated_bytes(), 0u);
}

TEST(ExactMemoryModel, FreeReturnsTheCharge) {
  ExactMemoryModel model;
  auto a = model.Allocate(1000, 0);  // 1024
  auto b = model.Allocate(3000, 1);  // 3072
  model.Free(*a);
  EXPECT_EQ(model.allocated_bytes(), 3072u);
  model.Free(*b);
  EXPECT_EQ(model.allocated_bytes(), 0u);
  EXPECT_EQ(model.reserved_bytes(), 0u);
}

}  // namespace
}  // namespace bucketsim
