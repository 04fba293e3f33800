#include "engine/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

namespace moesim::engine {
namespace {

TEST(DType, NamesRoundTrip) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kFP8E4M3, DType::kI32}) {
    EXPECT_EQ(dtype_from_name(dtype_name(d)), d);
  }
  EXPECT_FALSE(dtype_from_name("mxfp4").has_value());
  EXPECT_EQ(dtype_size_bytes(DType::kBF16), 2);
  EXPECT_EQ(dtype_size_bytes(DType::kFP8E4M3), 1);
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(round_bf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
  EXPECT_EQ(round_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
  // Just above the halfway point rounds up.
  EXPECT_EQ(round_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)),
            1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(round_bf16(-2.5f), -2.5f);
  EXPECT_TRUE(std::isnan(round_bf16(std::nanf(""))));
}

TEST(DType, Fp8DecodesEveryCodeAndReencodesIt) {
  int finite = 0;
  for (int code = 0; code < 256; ++code) {
    const float v = fp8e4m3_to_float(static_cast<uint8_t>(code));
    if (std::isnan(v)) {
      EXPECT_EQ(code & 0x7f, 0x7f);
      continue;
    }
    ++finite;
    if (code == 0x80) {
      EXPECT_EQ(v, 0.0f);  // negative zero
      continue;
    }
    EXPECT_EQ(float_to_fp8e4m3(v), code) << "code " << code << " value " << v;
  }
  EXPECT_EQ(finite, 254);
  EXPECT_EQ(fp8e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(fp8e4m3_to_float(0x01), std::ldexp(1.0f, -9));
}

TEST(DType, Fp8RoundsToNearestEvenAndSaturates) {
  // Between 1 (0x38) and 1.125 (0x39): the midpoint 1.0625 ties to even (1).
  EXPECT_EQ(round_fp8e4m3(1.0625f), 1.0f);
  // Between 1.125 and 1.25: the midpoint 1.1875 ties to even (1.25, mantissa 2).
  EXPECT_EQ(round_fp8e4m3(1.1875f), 1.25f);
  EXPECT_EQ(round_fp8e4m3(1.07f), 1.125f);
  EXPECT_EQ(round_fp8e4m3(1000.0f), 448.0f);
  EXPECT_EQ(round_fp8e4m3(-1e30f), -448.0f);
  EXPECT_EQ(round_fp8e4m3(std::ldexp(1.0f, -11)), 0.0f);  // below half the smallest subnormal
  EXPECT_EQ(round_fp8e4m3(3 * std::ldexp(1.0f, -10)), std::ldexp(1.0f, -8));  // tie -> even (2)
  EXPECT_EQ(float_to_fp8e4m3(std::nanf("")), 0x7f);
}

}  // namespace
}  // namespace moesim::engine
