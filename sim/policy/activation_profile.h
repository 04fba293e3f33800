// Activation profiling for expert pruning: which experts a workload activates, from exact
// per-token top-k sets (SyntheticRoutingModel::sample_token_experts).
//
// Model:
//  - profile: tokens_per_step tokens per step over num_steps steps, split over the routing
//    spec's domains by their weights; selections per (layer, expert) and co-activation counts
//    n_ij (ActivationProfile, sim/routing/routing_stats.h).
//  - co-activation affinity C_ij = n_ij / sqrt(n_i * n_j) (n_i = tokens that picked i), 1 on the
//    diagonal of active experts, 0 when either expert never fired.
//  - dead experts: activation rate (tokens that picked the expert / tokens) below a threshold.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/routing/routing_spec.h"
#include "sim/routing/routing_stats.h"
#include "sim/routing/synthetic_routing.h"

namespace moesim::sim {

// The spec's domain weights normalised to sum 1 ({1} without domains).
std::vector<double> normalised_domain_weights(const RoutingSpec& spec);
// num_tokens tokens split over domains by `weights` (summing to 1): floors, then the remainder
// one each to the largest fractional parts (ties to the lower domain). Sums to num_tokens.
std::vector<int32_t> tokens_per_domain(int32_t num_tokens, std::span<const double> weights);

// Samples token sets for steps [first_step, first_step + num_steps) into a profile of every MoE
// layer (co-activation kept for coactivation_layers). Tokens of a step are split over the spec's
// domains by tokens_per_domain.
ActivationProfile profile_activations(SyntheticRoutingModel& routing, int64_t first_step,
                                      int32_t num_steps, int32_t tokens_per_step,
                                      const std::vector<int32_t>& coactivation_layers);

// Tokens that picked the expert / tokens profiled in the layer (0 before any token).
double activation_rate(const ActivationProfile& profile, int32_t moe_layer_idx, int32_t expert_idx);
// C_ij (see the file comment), num_experts x num_experts row-major. Precondition: the layer
// tracks co-activation.
std::vector<double> coactivation_affinity(const ActivationProfile& profile, int32_t moe_layer_idx);
// Experts whose activation rate is below threshold, ascending.
std::vector<int32_t> dead_experts(const ActivationProfile& profile, int32_t moe_layer_idx,
                                  double threshold);

}  // namespace moesim::sim
