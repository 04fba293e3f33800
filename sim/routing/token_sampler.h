// The exact per-token router model: one token's top-k expert set, drawn without replacement.
//
// A token picks topk_groups groups by successive draws proportional to the group weights, then
// top_k distinct experts among them proportional to popularity; with co-activation each pick
// after the first is, with probability coactivation_prob, a uniform choice among the cluster
// mates of its picks. Clusters lie within groups, so a token spans at most topk_groups groups.
// This is the reference the counts path approximates (popularity.h). Draws use alias tables with
// rejection, O(top_k) expected per token. docs/routing.md ("The model (exact, per token)").
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/core/distributions.h"
#include "sim/core/rng.h"
#include "sim/routing/routing_spec.h"

namespace moesim::sim {

class TokenSampler {
 public:
  // popularity: positive weights, one per expert. cluster_of_expert: empty (no co-activation)
  // or one cluster index per expert, clusters of cluster_size experts within one group.
  TokenSampler(const RoutingShape& shape, std::span<const double> popularity,
               std::span<const int32_t> cluster_of_expert, int32_t cluster_size,
               double coactivation_prob);

  // Draws one token's experts into experts_out (size top_k), in pick order, all distinct.
  void sample(RngStream& rng, std::span<int32_t> experts_out);

  const RoutingShape& shape() const { return shape_; }

 private:
  int32_t pick_group(RngStream& rng);
  int32_t pick_expert(RngStream& rng);
  int32_t pick_mate(RngStream& rng, std::span<const int32_t> picked);

  RoutingShape shape_;
  std::vector<double> popularity_;
  std::vector<double> group_weight_;
  CategoricalDistribution expert_table_;
  CategoricalDistribution group_table_;
  std::vector<int32_t> cluster_of_expert_;
  std::vector<int32_t> cluster_members_;  // cluster c: [c * cluster_size, (c + 1) * cluster_size)
  int32_t cluster_size_ = 0;
  double coactivation_prob_ = 0.0;
  // Per-token scratch, cleared after each token.
  std::vector<uint8_t> group_allowed_;
  std::vector<uint8_t> expert_picked_;
  std::vector<int32_t> picked_groups_;
  std::vector<int32_t> mate_candidates_;
};

}  // namespace moesim::sim
