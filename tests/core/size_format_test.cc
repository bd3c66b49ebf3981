#include "core/size_format.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(ParseSize, BinaryAndDecimalUnits) {
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("512B"), 512u);
  EXPECT_EQ(*ParseSize("2KiB"), 2048u);
  EXPECT_EQ(*ParseSize("40GiB"), 40ull << 30);
  EXPECT_EQ(*ParseSize("1.5GiB"), 3ull << 29);
  EXPECT_EQ(*ParseSize("1TiB"), 1ull << 40);
  EXPECT_EQ(*ParseSize("512MB"), 512'000'000u);
  EXPECT_EQ(*ParseSize("3KB"), 3'000u);
  EXPECT_EQ(*ParseSize("2GB"), 2'000'000'000u);
  EXPECT_EQ(*ParseSize(" 80 GiB "), 80ull << 30);
}

TEST(ParseSize, RejectsWhatItCannotRepresent) {
  for (const char* bad : {"", "GiB", "-1GiB", "1.5", "0.3B", "12 parsecs", "1e3", "1..2MiB",
                          "99999999999999999999999GiB", "1 GiB extra"}) {
    Result<Bytes> size = ParseSize(bad);
    ASSERT_FALSE(size.ok()) << bad;
    EXPECT_EQ(size.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(ParseSize("12 parsecs").status().message().find("unknown unit 'parsecs'"),
            std::string::npos);
  EXPECT_NE(ParseSize("99999999999999999999999GiB").status().message().find("64 bits"),
            std::string::npos);
}

TEST(FormatBytes, PicksTheLargestBinaryUnitBelowTheValue) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(3'261'440), "3.11 MiB");
  EXPECT_EQ(FormatBytes(40ull << 30), "40.00 GiB");
}

}  // namespace
}  // namespace bucketsim
