// The devices --device-memory takes by name: each is the total_memory its deviceQuery source
// reports, and another name is none of them.
#include "memory/device_capacity.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(DeviceCapacity, EachNameIsItsTotalMemory) {
  EXPECT_EQ(NamedDeviceCapacity("h100-80gb"), Bytes{85045477376});
  EXPECT_EQ(NamedDeviceCapacity("h100-94gb"), Bytes{99861594112});
  EXPECT_EQ(NamedDeviceCapacity("h100-96gb"), Bytes{102005473280});
  EXPECT_EQ(NamedDeviceCapacity("a100-80gb"), Bytes{85100068864});
  EXPECT_EQ(NamedDeviceCapacity("a100-40gb"), Bytes{42298834944});
  EXPECT_EQ(NamedDeviceCapacity("l40s-48gb"), Bytes{47803596800});
  EXPECT_EQ(NamedDevices().size(), 6u);
  EXPECT_EQ(NamedDeviceList(), "h100-80gb, h100-94gb, h100-96gb, a100-80gb, a100-40gb, l40s-48gb");
}

TEST(DeviceCapacity, AnotherNameIsNone) {
  EXPECT_EQ(NamedDeviceCapacity("h100"), std::nullopt);
  EXPECT_EQ(NamedDeviceCapacity("H100-80GB"), std::nullopt);
  EXPECT_EQ(NamedDeviceCapacity(""), std::nullopt);
}

}  // namespace
}  // namespace bucketsim
