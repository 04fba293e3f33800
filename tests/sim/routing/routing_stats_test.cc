#include "sim/routing/routing_stats.h"

#include <gtest/gtest.h>

namespace moesim::sim {
namespace {

TEST(RoutingStats, ImbalanceRatio) {
  const std::vector<int64_t> loads = {10, 10, 10, 30};  // mean 15, max 30
  EXPECT_DOUBLE_EQ(imbalance_ratio(loads), 1.0);
  const std::vector<int64_t> even = {4, 4, 4};
  EXPECT_DOUBLE_EQ(imbalance_ratio(even), 0.0);
  const std::vector<int64_t> zeros = {0, 0};
  EXPECT_DOUBLE_EQ(imbalance_ratio(zeros), 0.0);
  EXPECT_DOUBLE_EQ(imbalance_ratio({}), 0.0);
}

TEST(RoutingStats, LayerImbalanceFromMatrices) {
  CountMatrix se(2, 4);  // 2 sources x 4 experts
  se.at(0, 0) = 6;
  se.at(0, 1) = 2;
  se.at(1, 0) = 2;
  se.at(1, 3) = 6;       // expert loads 8, 2, 0, 6 -> mean 4, max 8
  CountMatrix sd(2, 2);  // experts 0,1 on GPU 0; 2,3 on GPU 1 -> 10, 6
  sd.at(0, 0) = 8;
  sd.at(1, 0) = 2;
  sd.at(1, 1) = 6;
  const LayerImbalance imb = layer_imbalance(sd, se);
  EXPECT_DOUBLE_EQ(imb.by_expert_slot, 1.0);
  EXPECT_DOUBLE_EQ(imb.by_gpu, (10.0 - 8.0) / 8.0);
}

TEST(RoutingStats, PercentilesAndHistogram) {
  std::vector<int64_t> loads;
  for (int64_t v = 1; v <= 100; ++v) loads.push_back(101 - v);
  const LoadSummary s = summarize_loads(loads);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.p50, 50);
  EXPECT_EQ(s.p90, 90);
  EXPECT_EQ(s.p99, 99);
  EXPECT_EQ(s.max, 100);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  const std::vector<int64_t> h = load_histogram(loads, 25);
  ASSERT_EQ(h.size(), 5u);  // 0-24, 25-49, 50-74, 75-99, 100
  EXPECT_EQ(h[0], 24);
  EXPECT_EQ(h[1], 25);
  EXPECT_EQ(h[4], 1);
}

TEST(RoutingStats, TrackerMeans) {
  ImbalanceTracker t(2);
  t.add(0, {1.0, 4.0});
  t.add(0, {3.0, 6.0});
  t.add(1, {5.0, 2.0});
  EXPECT_DOUBLE_EQ(t.layer_mean(0).by_gpu, 2.0);
  EXPECT_DOUBLE_EQ(t.layer_mean(0).by_expert_slot, 5.0);
  EXPECT_DOUBLE_EQ(t.overall_mean().by_gpu, 3.0);
  EXPECT_EQ(t.num_samples(1), 1);
}

TEST(RoutingStats, ActivationProfileCountsSelectionsAndPairs) {
  ActivationProfile p(3, 4, {1});
  CountMatrix se(1, 4);
  se.at(0, 2) = 5;
  p.add_counts(0, se);
  p.add_counts(0, se);
  EXPECT_EQ(p.selections(0, 2), 10);
  EXPECT_EQ(p.selections(1, 2), 0);
  const std::vector<int32_t> sets = {0, 1, 1, 3, 0, 3};  // top-2: {0,1}, {1,3}, {0,3}
  p.add_token_sets(1, sets, 2);
  EXPECT_TRUE(p.tracks_coactivation(1));
  EXPECT_FALSE(p.tracks_coactivation(0));
  EXPECT_EQ(p.coactivation(1, 0, 1), 1);
  EXPECT_EQ(p.coactivation(1, 1, 0), 1);
  EXPECT_EQ(p.coactivation(1, 0, 0), 2);
  EXPECT_EQ(p.coactivation(1, 1, 2), 0);
  EXPECT_EQ(p.num_sampled_tokens(1), 3);
}

}  // namespace
}  // namespace moesim::sim
