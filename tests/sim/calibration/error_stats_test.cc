#include "sim/calibration/error_stats.h"

#include <gtest/gtest.h>

#include <vector>

namespace moesim::sim {
namespace {

TEST(ErrorStats, KnownValues) {
  std::vector<double> m = {1, 2, 4, 8};
  std::vector<double> s = {1.1, 1.8, 4.0, 8.8};  // +10%, -10%, 0%, +10%
  ErrorStats e = compute_error_stats(m, s);
  EXPECT_EQ(e.num_samples, 4);
  EXPECT_NEAR(e.mape, 0.075, 1e-12);
  EXPECT_NEAR(e.mean_rel_error, 0.025, 1e-12);
  EXPECT_NEAR(e.p50_abs_rel_error, 0.1, 1e-12);
  EXPECT_NEAR(e.p99_abs_rel_error, 0.1, 1e-12);
  EXPECT_NEAR(e.max_abs_error_s, 0.8, 1e-12);
  EXPECT_GT(e.pearson_r, 0.99);
}

TEST(ErrorStats, QuantileIsNearestRank) {
  std::vector<double> v = {5, 1, 4, 2, 3};
  EXPECT_EQ(quantile(v, 0.5), 3);
  EXPECT_EQ(quantile(v, 0.99), 5);
  EXPECT_EQ(quantile(v, 0.0), 1);
  EXPECT_EQ(quantile(std::vector<double>{}, 0.5), 0);
}

TEST(ErrorStats, ConstantSideGivesZeroCorrelation) {
  std::vector<double> m = {1, 2, 3};
  std::vector<double> s = {2, 2, 2};
  EXPECT_EQ(compute_error_stats(m, s).pearson_r, 0.0);
}

}  // namespace
}  // namespace moesim::sim
