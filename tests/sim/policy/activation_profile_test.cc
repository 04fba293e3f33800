#include "sim/policy/activation_profile.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/sim/policy/pruning_test_util.h"

namespace moesim::sim {
namespace {

using testing::profile_with;
using testing::small_shape;
using testing::zipf_spec;

TEST(ActivationProfile, ProfileCountsEveryTokenSet) {
  SyntheticRoutingModel routing(small_shape(), zipf_spec(), 3);
  const ActivationProfile p = profile_activations(routing, 0, 4, 1000, {1});
  for (int32_t l = 0; l < 2; ++l) {
    EXPECT_EQ(p.num_sampled_tokens(l), 4000);
    int64_t total = 0;
    double rate_sum = 0;
    for (int32_t e = 0; e < 16; ++e) {
      total += p.selections(l, e);
      rate_sum += activation_rate(p, l, e);
    }
    EXPECT_EQ(total, 8000);
    EXPECT_NEAR(rate_sum, 2.0, 1e-12);
  }
  // The profile agrees with the sampled token sets' co-activation diagonal.
  for (int32_t e = 0; e < 16; ++e) EXPECT_EQ(p.coactivation(1, e, e), p.selections(1, e));
  // Deterministic.
  SyntheticRoutingModel again(small_shape(), zipf_spec(), 3);
  const ActivationProfile q = profile_activations(again, 0, 4, 1000, {});
  for (int32_t e = 0; e < 16; ++e) EXPECT_EQ(p.selections(0, e), q.selections(0, e));
}

TEST(ActivationProfile, AffinityByHand) {
  ActivationProfile p(1, 3, {0});
  const std::vector<int32_t> sets = {0, 1, 0, 1, 0, 2};  // {0,1}, {0,1}, {0,2}
  p.add_token_sets(0, sets, 2);
  const std::vector<double> c = coactivation_affinity(p, 0);
  EXPECT_DOUBLE_EQ(c[0 * 3 + 0], 1.0);
  EXPECT_DOUBLE_EQ(c[0 * 3 + 1], 2.0 / std::sqrt(6.0));
  EXPECT_DOUBLE_EQ(c[1 * 3 + 0], c[0 * 3 + 1]);
  EXPECT_DOUBLE_EQ(c[0 * 3 + 2], 1.0 / std::sqrt(3.0));
  EXPECT_DOUBLE_EQ(c[1 * 3 + 2], 0.0);
}

TEST(ActivationProfile, DeadExperts) {
  const ActivationProfile p = profile_with({50, 0, 30, 1, 0, 19});  // 100 tokens
  EXPECT_EQ(dead_experts(p, 0, 0.005), (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(dead_experts(p, 0, 0.02), (std::vector<int32_t>{1, 3, 4}));
}

// Largest remainder, ties to the lower domain; the counts always sum to the tokens.
TEST(ActivationProfile, TokensPerDomainByLargestRemainder) {
  RoutingSpec none;
  EXPECT_EQ(normalised_domain_weights(none), (std::vector<double>{1.0}));
  EXPECT_EQ(tokens_per_domain(7, std::vector<double>{1.0}), (std::vector<int32_t>{7}));
  EXPECT_EQ(tokens_per_domain(10, std::vector<double>{0.25, 0.25, 0.5}),
            (std::vector<int32_t>{3, 2, 5}));  // 2.5, 2.5, 5: the tie goes to domain 0
  EXPECT_EQ(tokens_per_domain(3, std::vector<double>{0.5, 0.3, 0.2}),
            (std::vector<int32_t>{1, 1, 1}));  // 1.5, 0.9, 0.6: remainders to 0.9, then 0.6
}

}  // namespace
}  // namespace moesim::sim
