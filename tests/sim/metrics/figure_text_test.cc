// Number formats of the outputs: 15-digit doubles without arithmetic noise, integer counts,
// human byte sizes, and the bytes naming convention.
#include "sim/metrics/figure_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace moesim::sim {
namespace {

TEST(FigureTextTest, DoublesLoseTheLastBitNoiseOnly) {
  EXPECT_EQ(number_text(0.07622000000000001), "0.07622");
  EXPECT_EQ(number_text(0.1 + 0.2), "0.3");
  EXPECT_EQ(number_text(2.0), "2");
  EXPECT_EQ(number_text(0), "0");
  EXPECT_EQ(number_text(-1.5), "-1.5");
  EXPECT_EQ(number_text(1.5e-7), "1.5e-07");
  EXPECT_EQ(number_text(123456.789012345), "123456.789012345");
  // 15 significant digits are kept: the value read back is within one part in 1e15.
  double v = 2.0 / 3.0;
  EXPECT_EQ(number_text(v), "0.666666666666667");
  EXPECT_NEAR(std::stod(number_text(v)), v, 1e-15);
  EXPECT_EQ(clean_double(0.07622000000000001), 0.07622);
  EXPECT_EQ(number_text(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(number_text(std::numeric_limits<double>::infinity()), "inf");
}

TEST(FigureTextTest, CountsAreIntegers) {
  EXPECT_EQ(count_text(10217300000.4), "10217300000");
  EXPECT_EQ(count_text(1023.5), "1024");
  EXPECT_EQ(count_text(0), "0");
  EXPECT_EQ(count_text(-3.2), "-3");
}

TEST(FigureTextTest, BytesInBinaryUnitsWithThreeSignificantDigits) {
  EXPECT_EQ(bytes_text(0), "0 B");
  EXPECT_EQ(bytes_text(812), "812 B");
  EXPECT_EQ(bytes_text(4096), "4.00 KiB");
  EXPECT_EQ(bytes_text(512.0 * 1024 * 1024), "512 MiB");
  EXPECT_EQ(bytes_text(1.02173e10), "9.52 GiB");
  EXPECT_EQ(bytes_text(1000.0 * 1024 * 1024), "0.977 GiB");
  EXPECT_EQ(bytes_text(141.0 * 1024 * 1024 * 1024), "141 GiB");
  EXPECT_EQ(bytes_text(1.25 * 1024 * 1024 * 1024 * 1024), "1.25 TiB");
}

TEST(FigureTextTest, BytesNames) {
  EXPECT_TRUE(is_bytes_name("eplb.weight_bytes_copied"));
  EXPECT_TRUE(is_bytes_name("hot_expert_replication.replica_hbm_bytes_max_gpu"));
  EXPECT_TRUE(is_bytes_name("dispatch_bytes"));
  EXPECT_TRUE(is_bytes_name("bytes"));
  EXPECT_FALSE(is_bytes_name("expert_pruning.tokens_rerouted_held_out"));
  EXPECT_FALSE(is_bytes_name("bytesize"));
  EXPECT_FALSE(is_bytes_name("eplb.expert_copies"));
}

}  // namespace
}  // namespace moesim::sim
