#include "backend/cuda/device_buffer_table.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

void* Fake(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

TEST(DeviceBufferTable, PolicyBuffersAlwaysTraceBuffersOnlyWithMaterializeAll) {
  DeviceBufferTable policy_only(false);
  EXPECT_TRUE(policy_only.Wants(3, 64));
  EXPECT_FALSE(policy_only.Wants(kTraceBufferBit | 3, 64));
  EXPECT_FALSE(policy_only.Wants(3, 0));  // nothing to hold
  DeviceBufferTable all(true);
  EXPECT_TRUE(all.Wants(kTraceBufferBit | 3, 64));
  EXPECT_FALSE(all.Wants(kTraceBufferBit | 3, 0));
}

TEST(DeviceBufferTable, TracksAddressesLiveBytesAndPeak) {
  DeviceBufferTable table(false);
  table.Insert(1, {Fake(0x1000), 100});
  table.Insert(2, {Fake(0x2000), 50});
  EXPECT_EQ(table.Find(1), Fake(0x1000));
  EXPECT_EQ(table.Size(2), 50u);
  EXPECT_EQ(table.live_bytes(), 150u);
  std::optional<DeviceBufferTable::Entry> taken = table.Take(1);
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->address, Fake(0x1000));
  EXPECT_EQ(table.Find(1), nullptr);
  EXPECT_FALSE(table.Take(1));          // a handle that holds nothing
  table.Insert(1, {Fake(0x3000), 20});  // the engine reuses handles after release
  EXPECT_EQ(table.live_bytes(), 70u);
  EXPECT_EQ(table.peak_bytes(), 150u);
  EXPECT_EQ(table.TakeAll().size(), 2u);
  EXPECT_EQ(table.held(), 0u);
  EXPECT_EQ(table.live_bytes(), 0u);
}

}  // namespace
}  // namespace bucketsim
