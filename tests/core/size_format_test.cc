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

TEST(ParseSize, ReadsIntegersAbove2To53Exactly) {
  // libFuzzer: 2^53 + 1 went through a double and came back as 2^53.
  EXPECT_EQ(*ParseSize("9007199254740993"), 9'007'199'254'740'993u);
  EXPECT_EQ(*ParseSize("18446744073709551615"), 18'446'744'073'709'551'615u);  // 2^64 - 1
  EXPECT_EQ(*ParseSize("18446744073709551615B"), 18'446'744'073'709'551'615u);
  EXPECT_FALSE(ParseSize("18446744073709551616").ok());  // 2^64
  // 2^53 + 1 KiB and a fraction that is whole only when read exactly.
  EXPECT_EQ(*ParseSize("9007199254740993KiB"), 9'007'199'254'740'993ull * 1024);
  EXPECT_EQ(*ParseSize("8589934591.5KiB"), 8'589'934'591ull * 1024 + 512);
  EXPECT_EQ(*ParseSize("0.00000095367431640625TiB"), 1ull << 20);  // 2^-20 TiB
  EXPECT_EQ(*ParseSize("1.000000000000000000000000000000000000000000GiB"), 1ull << 30);
  EXPECT_FALSE(ParseSize("1.0000000000000000000000000000000000000000001GiB").ok());
  EXPECT_FALSE(ParseSize(".").ok());
  EXPECT_EQ(*ParseSize(".5KiB"), 512u);
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
