// A pruning plan: which routed experts of every MoE layer are pruned, and its JSON file format
// (written by `moesim prune --write-plan`, read by [policies.expert_pruning] plan_file).
//
// Model: least_activated prunes per layer the round(fraction * experts) least-activated experts,
// the first in ascending (selections, expert id) order; the same number in every layer; at least
// top_k experts stay.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/routing/routing_spec.h"
#include "sim/routing/routing_stats.h"

namespace moesim::sim {

class PruningPlan {
 public:
  // round(fraction * num_experts): the experts a fraction prunes per layer.
  static int32_t num_pruned_for(double fraction, int32_t num_experts);
  // The num_pruned_for(fraction) least-activated experts of every layer. Precondition
  // (checked): fraction in [0, 1) and at least top_k experts kept.
  static PruningPlan least_activated(const ActivationProfile& profile, double fraction,
                                     int32_t top_k);
  // An explicit plan: pruned[l] lists layer l's pruned experts. Precondition (checked): every
  // layer prunes the same number of distinct experts in [0, num_experts), fewer than all.
  static PruningPlan from_layers(int32_t num_experts, std::vector<std::vector<int32_t>> pruned);

  int32_t num_moe_layers() const { return static_cast<int32_t>(pruned_.size()); }
  int32_t num_experts() const { return num_experts_; }
  int32_t num_pruned_per_layer() const { return num_pruned_; }
  int32_t num_kept_per_layer() const { return num_experts_ - num_pruned_; }
  // Pruned experts of a layer, ascending.
  const std::vector<int32_t>& pruned(int32_t moe_layer_idx) const { return pruned_[moe_layer_idx]; }
  bool is_pruned(int32_t moe_layer_idx, int32_t expert_idx) const {
    return is_pruned_[static_cast<size_t>(moe_layer_idx) * num_experts_ + expert_idx] != 0;
  }
  // Kept experts of a layer, ascending: compacted index i is kept(layer)[i].
  std::vector<int32_t> kept(int32_t moe_layer_idx) const;

 private:
  int32_t num_experts_ = 0;
  int32_t num_pruned_ = 0;
  std::vector<std::vector<int32_t>> pruned_;
  std::vector<uint8_t> is_pruned_;  // layer x expert
};

// A plan as JSON ({"model", "num_moe_layers", "num_experts", "fraction", "pruned": [[...], ...]}),
// and back. The parser checks the shape against the model's routing shape (layers, experts, at
// least top_k kept, equal counts per layer, ids in range and distinct) and throws ConfigError
// naming `source` and the offending key.
std::string format_pruning_plan_json(const PruningPlan& plan, const std::string& model_name,
                                     double fraction);
PruningPlan parse_pruning_plan_json(const std::string& text, const std::string& source,
                                    const RoutingShape& shape);

}  // namespace moesim::sim
