// Shared by the expert-pruning tests (activation_profile, pruning_plan, pruned_routing,
// pruning_study, expert_pruning): small routing shapes and profiles built by hand.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/routing/count_matrix.h"
#include "sim/routing/routing_spec.h"
#include "sim/routing/routing_stats.h"
#include "tests/support/config_errors.h"

namespace moesim::sim::testing {

// `layers` MoE layers of 16 experts, top-2, no groups.
inline RoutingShape small_shape(int32_t layers = 2) {
  RoutingShape s;
  s.num_moe_layers = layers;
  s.num_experts = 16;
  s.top_k = 2;
  return s;
}

inline RoutingSpec zipf_spec() {
  RoutingSpec spec;
  spec.defaults.popularity = PopularityKind::kZipf;
  spec.defaults.zipf_s = 1.2;
  return spec;
}

// A profile with given selections in layer 0 (one token per selection, top-1).
inline ActivationProfile profile_with(const std::vector<int32_t>& counts) {
  ActivationProfile p(1, static_cast<int32_t>(counts.size()), {0});
  std::vector<int32_t> sets;
  for (size_t e = 0; e < counts.size(); ++e)
    sets.insert(sets.end(), counts[e], static_cast<int32_t>(e));
  CountMatrix m;
  m.reset(1, static_cast<int32_t>(counts.size()));
  for (size_t e = 0; e < counts.size(); ++e) m.at(0, static_cast<int32_t>(e)) = counts[e];
  p.add_counts(0, m);
  p.add_token_sets(0, sets, 1);
  return p;
}

}  // namespace moesim::sim::testing
