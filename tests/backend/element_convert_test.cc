#include "backend/element_convert.h"

#include <cmath>

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(ElementConvert, SmallIntegersRoundTripExactly) {
  for (int i = -2048; i <= 2048; ++i) {
    auto value = static_cast<float>(i);
    EXPECT_EQ(Fp16ToFloat(FloatToFp16(value)), value) << i;
    if (std::abs(i) <= 256) {
      EXPECT_EQ(Bf16ToFloat(FloatToBf16(value)), value) << i;
    }
  }
}

TEST(ElementConvert, RoundsToNearestEven) {
  // bf16 keeps 8 significant bits: 257 lies halfway between 256 and 258 -> 256 (even).
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(257.0f)), 256.0f);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(259.0f)), 260.0f);
  // fp16 keeps 11: 2049 -> 2048, 2051 -> 2052.
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(2049.0f)), 2048.0f);
  EXPECT_EQ(Fp16ToFloat(FloatToFp16(2051.0f)), 2052.0f);
}

TEST(ElementConvert, KnownBitPatterns) {
  EXPECT_EQ(FloatToFp16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToFp16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToFp16(65504.0f), 0x7bff);                // largest finite half
  EXPECT_EQ(FloatToFp16(1e6f), 0x7c00);                    // overflows to infinity
  EXPECT_EQ(FloatToFp16(5.9604644775390625e-8f), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Fp16ToFloat(0x0001), 5.9604644775390625e-8f);
  EXPECT_TRUE(std::isnan(Fp16ToFloat(FloatToFp16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
}

}  // namespace
}  // namespace bucketsim
