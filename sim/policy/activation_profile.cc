#include "sim/policy/activation_profile.h"

#include <cmath>
#include <numeric>

#include "base/check.h"

namespace moesim::sim {

std::vector<double> normalised_domain_weights(const RoutingSpec& spec) {
  std::vector<double> w;
  for (const DomainSpec& d : spec.domains) w.push_back(d.weight);
  if (w.empty()) w.push_back(1.0);
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& x : w) x /= sum;
  return w;
}

std::vector<int32_t> tokens_per_domain(int32_t num_tokens, std::span<const double> weights) {
  std::vector<int32_t> out(weights.size());
  std::vector<double> frac(weights.size());
  int32_t given = 0;
  for (size_t d = 0; d < weights.size(); ++d) {
    const double x = static_cast<double>(num_tokens) * weights[d];
    out[d] = static_cast<int32_t>(std::floor(x));
    frac[d] = x - out[d];
    given += out[d];
  }
  for (; given < num_tokens; ++given) {
    size_t best = 0;
    for (size_t d = 1; d < weights.size(); ++d) {
      if (frac[d] > frac[best]) best = d;
    }
    ++out[best];
    frac[best] = -1.0;
  }
  return out;
}

ActivationProfile profile_activations(SyntheticRoutingModel& routing, int64_t first_step,
                                      int32_t num_steps, int32_t tokens_per_step,
                                      const std::vector<int32_t>& coactivation_layers) {
  const RoutingShape& shape = routing.shape();
  ActivationProfile profile(shape.num_moe_layers, shape.num_experts, coactivation_layers);
  const std::vector<int32_t> per_domain =
      tokens_per_domain(tokens_per_step, normalised_domain_weights(routing.spec()));
  std::vector<int32_t> experts;
  CountMatrix counts;
  for (int32_t l = 0; l < shape.num_moe_layers; ++l) {
    for (int64_t step = first_step; step < first_step + num_steps; ++step) {
      counts.reset(1, shape.num_experts);
      for (int32_t d = 0; d < static_cast<int32_t>(per_domain.size()); ++d) {
        if (per_domain[d] == 0) continue;
        routing.sample_token_experts(step, l, d, per_domain[d], experts);
        profile.add_token_sets(l, experts, shape.top_k);
        for (int32_t e : experts) ++counts.at(0, e);
      }
      profile.add_counts(l, counts);
    }
  }
  return profile;
}

double activation_rate(const ActivationProfile& profile, int32_t moe_layer_idx,
                       int32_t expert_idx) {
  const int64_t tokens = profile.num_sampled_tokens(moe_layer_idx);
  if (tokens == 0) return 0.0;
  return static_cast<double>(profile.selections(moe_layer_idx, expert_idx)) /
         static_cast<double>(tokens);
}

std::vector<double> coactivation_affinity(const ActivationProfile& profile, int32_t moe_layer_idx) {
  MOESIM_CHECK(profile.tracks_coactivation(moe_layer_idx), "the layer tracks co-activation");
  const int32_t n = profile.num_experts();
  std::vector<double> c(static_cast<size_t>(n) * n, 0.0);
  for (int32_t i = 0; i < n; ++i) {
    const double ni = static_cast<double>(profile.coactivation(moe_layer_idx, i, i));
    for (int32_t j = 0; j < n; ++j) {
      const double nj = static_cast<double>(profile.coactivation(moe_layer_idx, j, j));
      if (ni == 0.0 || nj == 0.0) continue;
      c[static_cast<size_t>(i) * n + j] =
          static_cast<double>(profile.coactivation(moe_layer_idx, i, j)) / std::sqrt(ni * nj);
    }
  }
  return c;
}

std::vector<int32_t> dead_experts(const ActivationProfile& profile, int32_t moe_layer_idx,
                                  double threshold) {
  std::vector<int32_t> out;
  for (int32_t e = 0; e < profile.num_experts(); ++e) {
    if (activation_rate(profile, moe_layer_idx, e) < threshold) out.push_back(e);
  }
  return out;
}

}  // namespace moesim::sim
