// What a MoE layer's routing tells the policies and the balance metrics: the expected load of
// every routed expert (StepResult::expert_loads, for load-driven policies) and the layer's
// balance over its expert slots (StepTotals' slot sums).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/model/model_card.h"
#include "sim/placement/layer_placements.h"
#include "sim/routing/routing_model.h"
#include "sim/serving/step_result.h"

namespace moesim::sim {

class LoadReporter {
 public:
  // References must outlive the reporter; placements may change between steps.
  LoadReporter(const ModelCard& card, const LayerPlacements& placements, RoutingModel& routing);

  // MoE layer `moe_layer_idx`'s row of result.expert_loads: the routing model's expected shares
  // x the step's tokens. Row 0 sizes the table; a routing model stating no expectation (or one
  // of another size) leaves it empty.
  void record_expert_loads(int64_t step_idx, int32_t moe_layer_idx, int64_t step_tokens,
                           StepResult& result);
  // The layer's per-slot balance added to `result`. `slot_loads`: the selections each slot
  // received where the layer was dispatched per expert (ReplicaDispatcher::slot_loads), or null
  // when no per-expert counts were drawn: then the expected loads (kept per layer while the
  // placement and the shares keep their versions).
  void record_slot_balance(int64_t step_idx, int32_t moe_layer_idx,
                           const std::span<const int64_t>* slot_loads, StepTotals& result);

 private:
  struct SlotBalance {
    uint64_t placement_version = 0, shares_version = 0;
    bool counted = false;  // the layer contributes (a positive max load)
    double imbalance = 0, balancedness = 0;
  };
  const LayerPlacements& placements_;
  RoutingModel& routing_;
  int64_t num_moe_layers_ = 0;
  std::vector<SlotBalance> slot_balance_;  // per MoE layer
};

}  // namespace moesim::sim
