// Checked conversions: values that fit convert exactly, values outside the type are refused.
#include "base/checked_number.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace moesim {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(CheckedNumber, NarrowKeepsValuesThatFitAndRefusesTheRest) {
  EXPECT_EQ(checked_narrow<int32_t>(int64_t{-5}), -5);
  EXPECT_EQ(checked_narrow<int32_t>(int64_t{1} << 31), std::nullopt);
  EXPECT_EQ(checked_narrow<int64_t>(uint64_t{1} << 63), std::nullopt);
  EXPECT_EQ(checked_narrow<uint32_t>(int64_t{-1}), std::nullopt);
  EXPECT_EQ(checked_narrow<int64_t>(uint64_t{kMax}), kMax);
}

TEST(CheckedNumber, LlroundRoundsHalfAwayAndRefusesOutOfRange) {
  EXPECT_EQ(checked_llround(2.5), 3);
  EXPECT_EQ(checked_llround(-2.5), -3);
  EXPECT_EQ(checked_llround(-9223372036854774784.0), -9223372036854774784);
  EXPECT_EQ(checked_llround(9223372036854775808.0), std::nullopt);  // 2^63
  EXPECT_EQ(checked_llround(-9223372036854775808.0), std::nullopt);
  EXPECT_EQ(checked_llround(1e30), std::nullopt);
  EXPECT_EQ(checked_llround(std::nan("")), std::nullopt);
  EXPECT_EQ(checked_llround(std::numeric_limits<double>::infinity()), std::nullopt);
}

TEST(CheckedNumber, ArithmeticRefusesOverflow) {
  EXPECT_EQ(checked_mul(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_EQ(checked_mul(int64_t{1} << 32, int64_t{1} << 31), std::nullopt);
  EXPECT_EQ(checked_add(kMax - 1, 1), kMax);
  EXPECT_EQ(checked_add(kMax, 1), std::nullopt);
  EXPECT_EQ(checked_sub(kMin + 1, 1), kMin);
  EXPECT_EQ(checked_sub(kMin, 1), std::nullopt);
}

}  // namespace
}  // namespace moesim
