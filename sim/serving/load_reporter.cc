#include "sim/serving/load_reporter.h"

#include <algorithm>

namespace moesim::sim {

LoadReporter::LoadReporter(const ModelCard& card, const LayerPlacements& placements,
                           RoutingModel& routing)
    : placements_(placements), routing_(routing), num_moe_layers_(num_moe_layers(card)) {
  slot_balance_.assign(static_cast<size_t>(num_moe_layers_), SlotBalance{});
}

void LoadReporter::record_expert_loads(int64_t step_idx, int32_t moe_layer_idx, int64_t step_tokens,
                                       StepResult& result) {
  const std::span<const double> pi = routing_.expected_shares(moe_layer_idx, step_idx);
  const auto num_experts = static_cast<size_t>(placements_.num_experts());
  if (pi.size() != num_experts) {
    result.expert_loads.clear();
    return;
  }
  if (moe_layer_idx == 0) {
    result.expert_loads.assign(num_experts * static_cast<size_t>(num_moe_layers_), 0.0);
  }
  if (result.expert_loads.empty()) return;
  double* row = &result.expert_loads[static_cast<size_t>(moe_layer_idx) * num_experts];
  for (size_t e = 0; e < num_experts; ++e) row[e] = pi[e] * static_cast<double>(step_tokens);
}

void LoadReporter::record_slot_balance(int64_t step_idx, int32_t moe_layer_idx,
                                       const std::span<const int64_t>* slot_loads,
                                       StepTotals& result) {
  const ExpertPlacement& placement = placements_.layer(moe_layer_idx);
  double max_load = 0, sum_load = 0;
  if (slot_loads) {
    // Dispatched per expert: the selections each slot received.
    for (const int64_t c : *slot_loads) {
      const auto load = static_cast<double>(c);
      max_load = std::max(max_load, load);
      sum_load += load;
    }
    if (max_load <= 0) return;
    const double mean_load = sum_load / static_cast<double>(placement.total_slots());
    result.slot_imbalance_sum += (max_load - mean_load) / mean_load;
    result.slot_balancedness_sum += mean_load / max_load;
    result.num_slot_balance_layers++;
    return;
  }
  // No per-expert counts were drawn: the expected ones (a scale of the shares: the ratios do not
  // depend on the step's tokens).
  SlotBalance& cached = slot_balance_[moe_layer_idx];
  const uint64_t placement_version = placements_.version(moe_layer_idx);
  const uint64_t shares_version = routing_.expected_shares_version(moe_layer_idx, step_idx);
  if (shares_version == 0 || cached.placement_version != placement_version ||
      cached.shares_version != shares_version) {
    cached = SlotBalance{};
    const std::span<const double> pi = routing_.expected_shares(moe_layer_idx, step_idx);
    if (static_cast<int32_t>(pi.size()) != placement.num_experts()) return;
    for (int32_t e = 0; e < placement.num_experts(); ++e) {
      const double load = pi[e] / static_cast<double>(placement.replicas(e).size());
      max_load = std::max(max_load, load);
      sum_load += load * static_cast<double>(placement.replicas(e).size());
    }
    if (max_load > 0) {
      const double mean_load = sum_load / static_cast<double>(placement.total_slots());
      cached.counted = true;
      cached.imbalance = (max_load - mean_load) / mean_load;
      cached.balancedness = mean_load / max_load;
    }
    cached.placement_version = placement_version;
    cached.shares_version = shares_version;
  }
  if (!cached.counted) return;
  result.slot_imbalance_sum += cached.imbalance;
  result.slot_balancedness_sum += cached.balancedness;
  result.num_slot_balance_layers++;
}

}  // namespace moesim::sim
