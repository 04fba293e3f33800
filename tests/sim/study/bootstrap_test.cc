#include "sim/study/bootstrap.h"

#include <gtest/gtest.h>

#include "sim/core/distributions.h"

namespace moesim::sim::study {
namespace {

double mean_at(const std::vector<double>& x, std::span<const int64_t> idx) {
  double s = 0;
  for (int64_t i : idx) s += x[static_cast<size_t>(i)];
  return s / static_cast<double>(idx.size());
}

TEST(Bootstrap, QuantileInterpolates) {
  std::vector<double> v = {1, 2, 3, 4, 5};
  EXPECT_DOUBLE_EQ(quantile_sorted(v, 0.0), 1);
  EXPECT_DOUBLE_EQ(quantile_sorted(v, 1.0), 5);
  EXPECT_DOUBLE_EQ(quantile_sorted(v, 0.5), 3);
  EXPECT_DOUBLE_EQ(quantile_sorted(v, 0.125), 1.5);
  std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(quantile_sorted(one, 0.3), 7);
}

TEST(Bootstrap, EstimateIsTheFullSampleAndDrawsAreSeeded) {
  std::vector<double> x = {3.1, 1.4, 4.1, 1.5, 5.9, 9.2, 2.6, 6.5};
  StatisticsFn fn = [&](std::span<const int64_t> idx, std::span<double> out) {
    out[0] = mean_at(x, idx);
  };
  BootstrapOptions opt{500, 0.9, 7};
  auto a = bootstrap_cis(8, 1, fn, opt);
  auto b = bootstrap_cis(8, 1, fn, opt);
  EXPECT_DOUBLE_EQ(a[0].estimate, 34.3 / 8.0);
  EXPECT_EQ(a[0].lo, b[0].lo);
  EXPECT_EQ(a[0].hi, b[0].hi);
  EXPECT_LT(a[0].lo, a[0].estimate);
  EXPECT_GT(a[0].hi, a[0].estimate);
  opt.seed = 8;
  auto c = bootstrap_cis(8, 1, fn, opt);
  EXPECT_TRUE(a[0].lo != c[0].lo || a[0].hi != c[0].hi);
}

TEST(Bootstrap, ConstantStatisticHasZeroWidth) {
  StatisticsFn fn = [](std::span<const int64_t>, std::span<double> out) {
    out[0] = 2.5;
    out[1] = -1;
  };
  auto cis = bootstrap_cis(5, 2, fn, BootstrapOptions{});
  EXPECT_EQ(cis[0].lo, 2.5);
  EXPECT_EQ(cis[0].hi, 2.5);
  EXPECT_EQ(cis[1].lo, -1);
}

// The 95% interval of a mean of 40 normal draws covers the true mean in about 95% of repeated
// experiments (the percentile bootstrap runs a little under its level at this size).
TEST(Bootstrap, CoverageOfAMeanDifference) {
  const double true_diff = 1.5;
  const int kTrials = 200, kN = 40;
  int covered = 0;
  RngStream data(2024, "coverage.data");
  for (int t = 0; t < kTrials; ++t) {
    // Paired samples: a shared component (as under common random numbers) plus noise.
    std::vector<double> d(kN);
    for (int i = 0; i < kN; ++i) {
      double shared = normal(data, 100, 10);
      double a = shared + normal(data, 0, 2);
      double b = shared + true_diff + normal(data, 0, 2);
      d[static_cast<size_t>(i)] = b - a;
    }
    StatisticsFn fn = [&](std::span<const int64_t> idx, std::span<double> out) {
      out[0] = mean_at(d, idx);
    };
    auto ci = bootstrap_cis(kN, 1, fn, BootstrapOptions{1000, 0.95, static_cast<uint64_t>(t)});
    covered += ci[0].lo <= true_diff && true_diff <= ci[0].hi;
  }
  double coverage = static_cast<double>(covered) / kTrials;
  EXPECT_GE(coverage, 0.89);
  EXPECT_LE(coverage, 0.99);
}

}  // namespace
}  // namespace moesim::sim::study
