#include "sim/workload/value_distribution.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

ValueDistributionSpec parse(const std::string& toml, bool integer, double lowest) {
  TomlDocument doc = TomlDocument::parse_string(toml, "d.toml");
  TomlTable root = doc.root();
  return parse_value_distribution(root, integer, lowest);
}

std::string error_of(const std::string& toml, bool integer = true, double lowest = 1) {
  return testing::config_error_of([&] { parse(toml, integer, lowest); });
}

TEST(ValueDistribution, LognormalMeanSigmaFormHasThatMean) {
  const ValueDistributionSpec spec =
      parse("distribution = 'lognormal'\nmean = 2000\nsigma = 0.8\n", false, 0);
  ValueDistribution d(spec);
  RngStream rng(1, "lognormal_mean");
  const int n = 400000;
  double sum = 0.0;
  double sum_log = 0.0;
  double sum_log2 = 0.0;
  for (int i = 0; i < n; ++i) {
    const double x = d.sample(rng);
    sum += x;
    sum_log += std::log(x);
    sum_log2 += std::log(x) * std::log(x);
  }
  const double mean_log = sum_log / n;
  const double sd_log = std::sqrt(sum_log2 / n - mean_log * mean_log);
  EXPECT_NEAR(sd_log, 0.8, 0.005);
  // sd of the sample mean: mean * sqrt(exp(sigma^2) - 1) / sqrt(n) ~ 2.9.
  EXPECT_NEAR(sum / n, 2000.0, 15.0);
}

TEST(ValueDistribution, LognormalQuantileFormHitsP50AndP99) {
  const ValueDistributionSpec spec =
      parse("distribution = 'lognormal'\np50 = 1000\np99 = 16000\n", true, 1);
  ValueDistribution d(spec);
  RngStream rng(1, "lognormal_quantiles");
  std::vector<int64_t> xs(200000);
  for (int64_t& x : xs) x = d.sample_int(rng);
  std::sort(xs.begin(), xs.end());
  EXPECT_NEAR(static_cast<double>(xs[xs.size() / 2]), 1000.0, 20.0);
  EXPECT_NEAR(static_cast<double>(xs[xs.size() * 99 / 100]), 16000.0, 800.0);
  EXPECT_GE(xs.front(), 1);
}

TEST(ValueDistribution, TruncationRedrawsInsideBounds) {
  const ValueDistributionSpec spec = parse(
      "distribution = 'lognormal'\nmean = 1000\nsigma = 1.5\nmin = 200\nmax = 3000\n", true, 1);
  ValueDistribution d(spec);
  RngStream rng(1, "truncated");
  int64_t lo = 1 << 30;
  int64_t hi = 0;
  int at_max = 0;
  for (int i = 0; i < 100000; ++i) {
    const int64_t x = d.sample_int(rng);
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    at_max += x == 3000 ? 1 : 0;
  }
  EXPECT_GE(lo, 200);
  EXPECT_LE(hi, 3000);
  EXPECT_LT(lo, 210);
  EXPECT_GT(hi, 2990);
  EXPECT_LT(at_max, 100);  // no pile-up on the bound: it is not clamping
}

TEST(ValueDistribution, ExponentialMean) {
  ValueDistribution d(parse("distribution = 'exponential'\nmean = 2.5\n", false, 0));
  RngStream rng(1, "exp");
  double sum = 0.0;
  const int n = 400000;
  for (int i = 0; i < n; ++i) sum += d.sample(rng);
  EXPECT_NEAR(sum / n, 2.5, 5 * 2.5 / std::sqrt(n));
}

TEST(ValueDistribution, EmpiricalMatchesWeights) {
  ValueDistribution d(
      parse("distribution = 'empirical'\nvalues = [16, 128, 512]\nweights = [1, 2, 7]\n", true, 1));
  RngStream rng(1, "empirical");
  std::map<int64_t, int> counts;
  const int n = 200000;
  for (int i = 0; i < n; ++i) ++counts[d.sample_int(rng)];
  ASSERT_EQ(counts.size(), 3u);
  EXPECT_NEAR(counts[16] / double(n), 0.1, 0.005);
  EXPECT_NEAR(counts[128] / double(n), 0.2, 0.005);
  EXPECT_NEAR(counts[512] / double(n), 0.7, 0.005);
}

TEST(ValueDistribution, EmpiricalWithoutWeightsIsUniformAndConstantIsConstant) {
  ValueDistribution uniform(parse("distribution = 'empirical'\nvalues = [1, 2]\n", true, 1));
  ValueDistribution constant(parse("distribution = 'constant'\nvalue = 0.25\n", false, 0));
  RngStream rng(1, "empirical_uniform");
  int ones = 0;
  for (int i = 0; i < 10000; ++i) {
    ones += uniform.sample_int(rng) == 1 ? 1 : 0;
    ASSERT_EQ(constant.sample(rng), 0.25);
  }
  EXPECT_NEAR(ones, 5000, 250);
}

TEST(ValueDistribution, Errors) {
  EXPECT_EQ(error_of("distribution = 'constant'\nvalue = 2.5\n"),
            "d.toml:2:9: value: value 2.5 must be an integer");
  EXPECT_EQ(error_of("distribution = 'constant'\nvalue = 0\n"),
            "d.toml:2:9: value: value 0 is out of range [1, 1e+15]");
  EXPECT_EQ(error_of("distribution = 'lognormal'\np50 = 100\np99 = 50\n"),
            "d.toml:3:7: p99: p99 50 must be greater than p50 100");
  EXPECT_EQ(error_of("distribution = 'lognormal'\nmean = 100\nsigma = 1\nmin = 50\nmax = 10\n"),
            "d.toml:5:7: max: max 10 is below min 50");
  EXPECT_EQ(error_of("distribution = 'empirical'\nvalues = [1, 2]\nweights = [1]\n"),
            "d.toml:3:11: weights: has 1 entries but values has 2");
  EXPECT_EQ(error_of("distribution = 'empirical'\nvalues = [1, 2]\nweights = [1, -1]\n"),
            "d.toml:3:11: weights: weight -1 is negative");
  EXPECT_EQ(error_of("distribution = 'empirical'\nvalues = [1, 0]\n"),
            "d.toml:2:10: values: value 0 is out of range [1, 1e+15]");
  EXPECT_EQ(error_of("distribution = 'empirical'\nvalues = [1]\nmax = 4\n"),
            "d.toml:3:1: max: unknown key 'max' (valid keys: distribution, values, weights)");
  EXPECT_EQ(error_of("distribution = 'normal'\n"),
            "d.toml:1:16: distribution: unknown value 'normal' (valid: constant, lognormal, "
            "exponential, empirical)");
}

}  // namespace
}  // namespace moesim::sim
