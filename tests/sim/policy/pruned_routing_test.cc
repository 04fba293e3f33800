#include "sim/policy/pruned_routing.h"

#include <gtest/gtest.h>

#include <span>

#include "sim/core/distributions.h"
#include "sim/policy/activation_profile.h"
#include "tests/sim/policy/pruning_test_util.h"

namespace moesim::sim {
namespace {

using testing::profile_with;
using testing::small_shape;
using testing::zipf_spec;

// Re-routing follows the Plackett-Luce continuation: top-2 sets drawn from all experts and then
// re-routed have the inclusion rates of top-2 sets drawn directly from the kept experts.
TEST(PrunedRouting, RerouteMatchesDirectDrawAmongKeptExperts) {
  const std::vector<double> w = {0.3, 0.25, 0.2, 0.15, 0.1};
  const ActivationProfile p = profile_with({100, 1, 50, 50, 50});
  const PruningPlan plan = PruningPlan::least_activated(p, 0.2, 2);  // prunes expert 1
  ASSERT_EQ(plan.pruned(0), (std::vector<int32_t>{1}));
  auto draw_sets = [](std::span<const double> weights, int64_t n, RngStream& rng) {
    std::vector<int32_t> sets;
    const CategoricalDistribution dist(weights);
    for (int64_t t = 0; t < n; ++t) {
      const auto a = static_cast<int32_t>(dist.sample(rng));
      int32_t b = a;
      while (b == a) b = static_cast<int32_t>(dist.sample(rng));
      sets.push_back(a);
      sets.push_back(b);
    }
    return sets;
  };
  const int64_t n = 200000;
  RngStream rng_a(1, "a"), rng_b(1, "b"), rng_c(1, "c");
  std::vector<int32_t> rerouted = draw_sets(w, n, rng_a);
  int64_t hit_pruned = 0;
  for (int32_t e : rerouted) hit_pruned += e == 1 ? 1 : 0;
  const RerouteStats stats = reroute_token_sets(plan, 0, w, 2, rerouted, rng_b);
  EXPECT_EQ(stats.num_tokens, n);
  EXPECT_EQ(stats.num_selections, 2 * n);
  EXPECT_EQ(stats.num_pruned_selections, hit_pruned);
  EXPECT_EQ(stats.num_tokens_affected, hit_pruned);  // at most one pruned pick per token
  EXPECT_DOUBLE_EQ(stats.mass_lost(), static_cast<double>(hit_pruned) / (2.0 * n));
  EXPECT_DOUBLE_EQ(stats.tokens_affected_fraction(), static_cast<double>(hit_pruned) / n);
  std::vector<double> kept_w = w;
  kept_w[1] = 0.0;
  const std::vector<int32_t> direct = draw_sets(kept_w, n, rng_c);
  std::vector<double> rate_rerouted(5, 0.0), rate_direct(5, 0.0);
  for (size_t i = 0; i < rerouted.size(); i += 2) {
    ASSERT_NE(rerouted[i], rerouted[i + 1]);
    for (int j = 0; j < 2; ++j) {
      rate_rerouted[rerouted[i + j]] += 1.0 / n;
      rate_direct[direct[i + j]] += 1.0 / n;
    }
  }
  EXPECT_EQ(rate_rerouted[1], 0.0);
  for (int e = 0; e < 5; ++e) EXPECT_NEAR(rate_rerouted[e], rate_direct[e], 0.01) << e;
}

// Re-routing several plans from one sampling pass gives each plan the counts it gets alone, and
// held_out_reroute is their sum over layers.
TEST(PrunedRouting, HeldOutPerLayerMatchesOnePlanAtATime) {
  const RoutingShape shape = small_shape();
  SyntheticRoutingModel profiler(shape, zipf_spec(), 7);
  const ActivationProfile p = profile_activations(profiler, 0, 2, 1000, {});
  const std::vector<PruningPlan> plans = {PruningPlan::least_activated(p, 0.0, shape.top_k),
                                          PruningPlan::least_activated(p, 0.25, shape.top_k),
                                          PruningPlan::least_activated(p, 0.5, shape.top_k)};
  SyntheticRoutingModel sampler(shape, zipf_spec(), 7);
  const auto all = held_out_reroute_per_layer(sampler, plans, 2, 2, 1000, 11);
  ASSERT_EQ(all.size(), 3u);
  for (size_t f = 0; f < plans.size(); ++f) {
    ASSERT_EQ(all[f].size(), 2u);
    SyntheticRoutingModel alone(shape, zipf_spec(), 7);
    const RerouteStats one = held_out_reroute(alone, plans[f], 2, 2, 1000, 11);
    RerouteStats sum;
    for (const RerouteStats& layer : all[f]) {
      EXPECT_EQ(layer.num_tokens, 2 * 1000);
      sum.add(layer);
    }
    EXPECT_EQ(sum.num_tokens, one.num_tokens);
    EXPECT_EQ(sum.num_selections, one.num_selections);
    EXPECT_EQ(sum.num_pruned_selections, one.num_pruned_selections);
    EXPECT_EQ(sum.num_tokens_affected, one.num_tokens_affected);
  }
  EXPECT_EQ(all[0][0].num_pruned_selections, 0);
  EXPECT_GT(all[2][0].num_pruned_selections, all[1][0].num_pruned_selections);
}

TEST(PrunedRouting, PrunedRoutingModelKeepsRowSumsAndCaps) {
  const RoutingShape shape = small_shape();
  SyntheticRoutingModel profiler(shape, zipf_spec(), 5);
  const ActivationProfile p = profile_activations(profiler, 0, 2, 2000, {});
  const PruningPlan plan = PruningPlan::least_activated(p, 0.5, shape.top_k);
  SyntheticRoutingModel inner(shape, zipf_spec(), 5);
  PrunedRoutingModel pruned(inner, plan);
  EXPECT_EQ(pruned.shape().num_experts, 8);
  const std::vector<int32_t> tokens = {0, 1, 3, 40, 500};
  RoutingQuery q;
  q.step_idx = 9;
  q.moe_layer_idx = 1;
  q.tokens_per_src = tokens;
  CountMatrix out;
  pruned.route(q, out);
  ASSERT_EQ(out.num_cols(), 8);
  for (int32_t s = 0; s < 5; ++s) {
    EXPECT_EQ(out.row_sum(s), static_cast<int64_t>(tokens[s]) * 2);
    for (int32_t v : out.row(s)) EXPECT_LE(v, tokens[s]);
  }
  // Unpruned: the inner model's counts unchanged.
  const PruningPlan none = PruningPlan::least_activated(p, 0.0, shape.top_k);
  SyntheticRoutingModel inner2(shape, zipf_spec(), 5);
  PrunedRoutingModel same(inner2, none);
  CountMatrix a, b;
  same.route(q, a);
  SyntheticRoutingModel inner3(shape, zipf_spec(), 5);
  inner3.route(q, b);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace moesim::sim
