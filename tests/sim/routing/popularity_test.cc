#include "sim/routing/popularity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sim/routing/token_sampler.h"

namespace moesim::sim {
namespace {

double sum(std::span<const double> v) { return std::accumulate(v.begin(), v.end(), 0.0); }

TEST(Popularity, ZipfIsAPermutationOfRankWeights) {
  LayerSkewSpec skew;
  skew.popularity = PopularityKind::kZipf;
  skew.zipf_s = 1.0;
  RngStream rng(1, "p");
  std::vector<double> w(64);
  draw_popularity(skew, rng, w);
  EXPECT_NEAR(sum(w), 1.0, 1e-12);
  std::vector<double> sorted = w;
  std::sort(sorted.rbegin(), sorted.rend());
  for (size_t r = 1; r < sorted.size(); ++r) {
    EXPECT_NEAR(sorted[r] / sorted[0], 1.0 / static_cast<double>(r + 1), 1e-12);
  }
  EXPECT_NE(std::max_element(w.begin(), w.end()) - w.begin(), 0);  // permuted (seeded)
}

TEST(Popularity, DirichletAndUniformSumToOneAndFloorTinyWeights) {
  LayerSkewSpec skew;
  skew.popularity = PopularityKind::kDirichlet;
  skew.dirichlet_alpha = 0.001;  // most draws underflow towards 0
  RngStream rng(2, "d");
  std::vector<double> w(256);
  draw_popularity(skew, rng, w);
  EXPECT_NEAR(sum(w), 1.0, 1e-12);
  const double max_w = *std::max_element(w.begin(), w.end());
  for (double v : w) EXPECT_GE(v, max_w * kMinRelativePopularity * 0.999);
  skew.popularity = PopularityKind::kUniform;
  draw_popularity(skew, rng, w);
  for (double v : w) EXPECT_DOUBLE_EQ(v, 1.0 / 256);
}

TEST(Popularity, ExponentialRaceSolvesItsEquation) {
  const std::vector<double> rates = {0.5, 0.2, 0.2, 0.05, 0.05};
  const double t = exponential_race_time(rates, 2.0);
  double f = 0.0;
  for (double r : rates) f += 1.0 - std::exp(-r * t);
  EXPECT_NEAR(f, 2.0, 1e-9);
}

TEST(Popularity, SharesSumToTopKAndNeverExceedOne) {
  const RoutingShape shape{1, 256, 8, 8, 4};
  LayerSkewSpec skew;
  skew.popularity = PopularityKind::kZipf;
  skew.zipf_s = 2.0;
  RngStream rng(3, "s");
  std::vector<double> w(256), pi(256);
  draw_popularity(skew, rng, w);
  selection_shares(shape, w, pi);
  EXPECT_NEAR(sum(pi), 8.0, 1e-9);
  for (double p : pi) {
    EXPECT_GE(p, 0.0);
    EXPECT_LE(p, 1.0 + 1e-12);
  }
  // Uniform popularity: every expert equally likely, top_k / num_experts.
  std::fill(w.begin(), w.end(), 1.0 / 256);
  selection_shares(shape, w, pi);
  for (double p : pi) EXPECT_NEAR(p, 8.0 / 256, 1e-9);
}

// Measures the counts approximation (selection_shares) against the exact per-token sampler: the
// exact inclusion rates are estimated from 100,000 sampled tokens (standard error of a rate p is
// sqrt(p (1 - p) / 1e5) <= 0.0016). Reported in docs/routing.md ("Approximation error").
struct ErrorCase {
  const char* name;
  RoutingShape shape;
  double zipf_s;
  int32_t cluster_size;
  double coact_prob;
  double max_abs_error;  // bound asserted on max_e |pi_e - exact_e|
  double max_l1_share;   // bound on sum_e |pi_e - exact_e| / top_k
};

class ApproximationError : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ApproximationError, SharesMatchExactSamplerWithinBounds) {
  const ErrorCase& c = GetParam();
  LayerSkewSpec skew;
  skew.popularity = PopularityKind::kZipf;
  skew.zipf_s = c.zipf_s;
  RngStream pop_rng(11, "pop");
  std::vector<double> w(c.shape.num_experts), pi(c.shape.num_experts);
  draw_popularity(skew, pop_rng, w);
  std::vector<int32_t> clusters;
  if (c.cluster_size > 0) {
    clusters.resize(c.shape.num_experts);
    for (int32_t e = 0; e < c.shape.num_experts; ++e) clusters[e] = e / c.cluster_size;
  }
  coactivated_selection_shares(c.shape, w, c.coact_prob, c.cluster_size, clusters, pi);
  TokenSampler sampler(c.shape, w, clusters, c.cluster_size, c.coact_prob);
  RngStream rng(12, "tokens");
  constexpr int kTokens = 100000;
  std::vector<int64_t> hits(c.shape.num_experts, 0);
  std::vector<int32_t> set(c.shape.top_k);
  for (int t = 0; t < kTokens; ++t) {
    sampler.sample(rng, set);
    for (int32_t e : set) ++hits[e];
  }
  double max_abs = 0.0;
  double l1 = 0.0;
  for (int32_t e = 0; e < c.shape.num_experts; ++e) {
    const double err = std::fabs(pi[e] - static_cast<double>(hits[e]) / kTokens);
    max_abs = std::max(max_abs, err);
    l1 += err;
  }
  l1 /= c.shape.top_k;
  std::printf("[approx] %-28s max|pi-exact|=%.4f  L1 share error=%.4f\n", c.name, max_abs, l1);
  EXPECT_LE(max_abs, c.max_abs_error) << c.name;
  EXPECT_LE(l1, c.max_l1_share) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ApproximationError,
    ::testing::Values(
        ErrorCase{"plain top-8 zipf 0.63", {1, 256, 8, 1, 1}, 0.63, 0, 0.0, 0.01, 0.03},
        ErrorCase{"plain top-8 zipf 1.2", {1, 256, 8, 1, 1}, 1.2, 0, 0.0, 0.03, 0.05},
        ErrorCase{"grouped 8/4 zipf 0.63", {1, 256, 8, 8, 4}, 0.63, 0, 0.0, 0.03, 0.06},
        ErrorCase{"grouped 8/4 zipf 1.2", {1, 256, 8, 8, 4}, 1.2, 0, 0.0, 0.08, 0.12},
        ErrorCase{"coactivation 4 x 0.5 zipf 1", {1, 256, 8, 8, 4}, 1.0, 4, 0.5, 0.10, 0.12},
        ErrorCase{"coactivation 4 x 0.2 zipf 0.63", {1, 256, 8, 8, 4}, 0.63, 4, 0.2, 0.08, 0.15}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

}  // namespace
}  // namespace moesim::sim
