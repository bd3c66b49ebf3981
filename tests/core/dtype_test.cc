#include "core/dtype.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(DType, ElementSizesAndNames) {
  EXPECT_EQ(ElementSize(DType::kFloat32), 4u);
  EXPECT_EQ(ElementSize(DType::kBFloat16), 2u);
  EXPECT_EQ(ElementSize(DType::kFloat16), 2u);
  EXPECT_EQ(ElementSize(DType::kFloat64), 8u);
  EXPECT_EQ(ElementSize(DType::kFloat8E4M3), 1u);
  EXPECT_EQ(DTypeName(DType::kBFloat16), "bf16");
}

TEST(DType, ParsesOurNamesAndPyTorchNames) {
  EXPECT_EQ(ParseDType("fp32"), DType::kFloat32);
  EXPECT_EQ(ParseDType("float16"), DType::kFloat16);
  EXPECT_EQ(ParseDType("torch.bfloat16"), DType::kBFloat16);
  EXPECT_EQ(ParseDType("torch.fp32"), std::nullopt);  // the prefix goes with PyTorch's names
  EXPECT_EQ(ParseDType("int8"), std::nullopt);
  EXPECT_EQ(ParseDType(""), std::nullopt);
}

}  // namespace
}  // namespace bucketsim
