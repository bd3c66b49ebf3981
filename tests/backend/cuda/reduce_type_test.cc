#include "backend/cuda/reduce_type.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(ReduceType, FloatingTypesReduceAsThemselves) {
  EXPECT_EQ(*ReduceTypeFor(DType::kFloat16), ReduceType::kFloat16);
  EXPECT_EQ(*ReduceTypeFor(DType::kBFloat16), ReduceType::kBFloat16);
  EXPECT_EQ(*ReduceTypeFor(DType::kFloat32), ReduceType::kFloat32);
  EXPECT_EQ(*ReduceTypeFor(DType::kFloat64), ReduceType::kFloat64);
}

TEST(ReduceType, Fp8IsRefusedWithTheDtypeNamed) {
  for (DType dtype : {DType::kFloat8E4M3, DType::kFloat8E5M2}) {
    Result<ReduceType> type = ReduceTypeFor(dtype);
    ASSERT_FALSE(type.ok());
    EXPECT_EQ(type.status().code(), StatusCode::kInvalidTrace);
    EXPECT_NE(type.status().message().find(std::string(DTypeName(dtype))), std::string::npos);
    EXPECT_NE(type.status().message().find("--backend sim"), std::string::npos);
  }
}

}  // namespace
}  // namespace bucketsim
