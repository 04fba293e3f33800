// Expert popularity vectors and the per-expert selection shares they imply.
//
// The counts path needs each expert's expected selections per token, pi_i, under the exact
// sampler's Plackett-Luce draws (token_sampler.h), which have no closed form. selection_shares()
// uses the exponential-race approximation (draws without replacement are the first arrivals of
// exponential clocks with rates w_i): pi_i ~= 1 - exp(-w_i t) with sum_i pi_i = top_k; group
// limits apply it twice and co-activation mixes each pi with its cluster mates' mean.
// docs/routing.md ("Sampling") has the model and its measured error.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/core/rng.h"
#include "sim/routing/routing_spec.h"

namespace moesim::sim {

// Smallest popularity relative to the largest: draws below it are raised to it (then the vector
// is renormalised) so that every expert stays selectable and top-k sets always exist.
inline constexpr double kMinRelativePopularity = 1e-9;

// Draws a popularity vector for one (layer, domain, epoch) into out (size num_experts, sums to
// 1): uniform; Zipf weights 1/(rank+1)^s assigned to experts by a uniformly random permutation;
// or a symmetric Dirichlet(alpha) draw. Uses only `rng`.
void draw_popularity(const LayerSkewSpec& skew, RngStream& rng, std::span<double> out);
// The same, with the Zipf weights of ranks 0..n-1 given (zipf_weights(n, skew.zipf_s): a caller
// drawing many vectors of one shape computes them once; any span for other kinds); the same
// vector from the same stream.
void draw_popularity(const LayerSkewSpec& skew, RngStream& rng, std::span<double> out,
                     std::span<const double> zipf_table);
// Zipf weights 1/(rank+1)^s of ranks 0..n-1, as draw_popularity computes them.
std::vector<double> zipf_weights(size_t n, double s);

// A uniformly random permutation of 0..n-1 (Fisher-Yates from the back), written into out.
void random_permutation(RngStream& rng, std::span<int32_t> out);

// The t >= 0 with sum_i (1 - exp(-rates_i * t)) = k (Newton from 0; the sum is concave and
// increasing). Preconditions: rates_i >= 0; k <= number of positive rates.
double exponential_race_time(std::span<const double> rates, double k);

// Expected selections per token of each expert, pi (sums to num_picks, each in [0, 1]), for
// popularity w under the shape's group limiting, without co-activation (see the file comment).
// num_picks defaults to shape.top_k; it may be fractional (an average number of picks).
void selection_shares(const RoutingShape& shape, std::span<const double> popularity,
                      std::span<double> pi_out, double num_picks = -1.0);

// Expected selections per token with co-activation (cluster_size >= 2, prob > 0): a token makes
// M = prob * (top_k - 1) mate picks on average and top_k - M popularity picks. Popularity picks
// give base = selection_shares with top_k - M picks; a mate pick lands on j in proportion to the
// picked mass of j's mates, so pi_j = base_j + beta * (pi_C - pi_j), beta = M / ((size - 1) k),
// whose fixed point per cluster C is pi_C = base_C / (1 - M / k) and
// pi_j = (base_j + beta * pi_C) / (1 + beta). Values above 1 are set to 1 and their excess spread
// over the others in proportion to pi (repeated until none exceeds 1). cluster_of_expert[i] is
// i's cluster index; every cluster has cluster_size members.
void coactivated_selection_shares(const RoutingShape& shape, std::span<const double> popularity,
                                  double prob, int32_t cluster_size,
                                  std::span<const int32_t> cluster_of_expert,
                                  std::span<double> pi_out);

}  // namespace moesim::sim
