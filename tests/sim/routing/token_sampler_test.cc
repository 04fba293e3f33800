#include "sim/routing/token_sampler.h"

#include <gtest/gtest.h>

#include <set>

#include "sim/routing/popularity.h"

namespace moesim::sim {
namespace {

std::vector<double> zipf(int32_t n, double s, uint64_t seed) {
  LayerSkewSpec skew;
  skew.popularity = PopularityKind::kZipf;
  skew.zipf_s = s;
  RngStream rng(seed, "pop");
  std::vector<double> w(n);
  draw_popularity(skew, rng, w);
  return w;
}

TEST(TokenSampler, DistinctExpertsWithinTopKGroups) {
  const RoutingShape shape{1, 256, 8, 8, 4};
  const std::vector<double> w = zipf(256, 1.5, 1);
  TokenSampler sampler(shape, w, {}, 0, 0.0);
  RngStream rng(2, "t");
  std::vector<int32_t> set(8);
  std::set<int32_t> groups_seen;
  for (int t = 0; t < 5000; ++t) {
    sampler.sample(rng, set);
    std::set<int32_t> experts(set.begin(), set.end());
    ASSERT_EQ(experts.size(), 8u);
    std::set<int32_t> groups;
    for (int32_t e : set) {
      ASSERT_GE(e, 0);
      ASSERT_LT(e, 256);
      groups.insert(shape.group_of(e));
    }
    ASSERT_LE(groups.size(), 4u);
    groups_seen.insert(groups.begin(), groups.end());
  }
  EXPECT_EQ(groups_seen.size(), 8u);
}

TEST(TokenSampler, ExtremeSkewUsesTheExactFallbackAndStaysDistinct) {
  // Zipf s = 6: after the hottest experts the remaining mass is tiny, so rejection sampling
  // gives up and the linear scan must still return a valid, distinct expert.
  const RoutingShape shape{1, 64, 8, 1, 1};
  TokenSampler sampler(shape, zipf(64, 6.0, 3), {}, 0, 0.0);
  RngStream rng(4, "t");
  std::vector<int32_t> set(8);
  for (int t = 0; t < 2000; ++t) {
    sampler.sample(rng, set);
    ASSERT_EQ(std::set<int32_t>(set.begin(), set.end()).size(), 8u);
  }
}

TEST(TokenSampler, CoactivationMakesClusterMatesFireTogether) {
  const RoutingShape shape{1, 64, 4, 1, 1};
  const std::vector<double> w(64, 1.0 / 64);
  std::vector<int32_t> clusters(64);
  for (int32_t e = 0; e < 64; ++e) clusters[e] = e / 4;
  auto mate_pairs_per_token = [&](double prob) {
    TokenSampler sampler(shape, w, clusters, 4, prob);
    RngStream rng(5, "t");
    std::vector<int32_t> set(4);
    int64_t pairs = 0;
    for (int t = 0; t < 20000; ++t) {
      sampler.sample(rng, set);
      for (int i = 0; i < 4; ++i)
        for (int j = i + 1; j < 4; ++j) pairs += clusters[set[i]] == clusters[set[j]] ? 1 : 0;
    }
    return static_cast<double>(pairs) / 20000;
  };
  const double independent = mate_pairs_per_token(0.0);
  const double coactive = mate_pairs_per_token(0.8);
  // Independent: 6 pairs x 3/63 ~ 0.29 mate pairs per token; with prob 0.8 most picks are mates.
  EXPECT_NEAR(independent, 6.0 * 3.0 / 63.0, 0.03);
  EXPECT_GT(coactive, 4.0 * independent);
}

TEST(TokenSampler, HotExpertIsPickedAsOftenAsThePopularityImplies) {
  // top-1: a single pick is exactly categorical on the popularity.
  const RoutingShape shape{1, 8, 1, 1, 1};
  const std::vector<double> w = {0.5, 0.2, 0.1, 0.1, 0.05, 0.03, 0.01, 0.01};
  TokenSampler sampler(shape, w, {}, 0, 0.0);
  RngStream rng(6, "t");
  std::vector<int32_t> set(1);
  std::vector<int64_t> hits(8, 0);
  for (int t = 0; t < 100000; ++t) {
    sampler.sample(rng, set);
    ++hits[set[0]];
  }
  for (int e = 0; e < 8; ++e) EXPECT_NEAR(hits[e] / 1e5, w[e], 0.006) << e;
}

}  // namespace
}  // namespace moesim::sim
