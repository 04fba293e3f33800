// The EPLB-style balancing policy in the serving loop ([policies.eplb]).
//
// Per replica: every step's expected expert loads of each MoE layer feed that layer's moving
// average (exponential or window); every period_s the rebalancer (eplb_rebalance.h) computes,
// for each MoE layer on its own, a balanced placement with redundant slots from that layer's
// loads, aligned to the layer's current one. The weights of every expert a GPU gains in a layer
// (that layer's weights) are copied from the nearest GPU holding it, all layers' copies in one
// transfer riding along with the replica's dispatch collectives and competing with serving
// traffic; when it completes, the new placements of the layers that changed are applied at once
// (set_layer_placements): replicas no longer wanted are dropped and slots beyond the memory
// layout's are charged to the GPU's KV pool. A plan that needs no copy applies at once; a
// rebalance is skipped while a copy is in flight; a layer is left as it is before any load was
// seen, when nothing would change, and when its predicted imbalance would not fall by more than
// min_imbalance_gain. Actions: eplb_rebalance, eplb_skip_busy, eplb_layer_skip_no_load /
// _skip_no_gain / _unchanged, eplb_expert_copy (one per copied expert and layer),
// eplb_expert_drop, eplb_apply, eplb_apply_no_memory, plus the context's weight_transfer_start /
// _done and expert_placement_set. Works on either static layout ([deployment] placement).
// Cannot be combined with hot_expert_replication or expert_pruning (a ConfigError).
#pragma once

#include <memory>

#include "sim/policy/policy_registry.h"

namespace moesim::sim {

std::unique_ptr<ServingPolicy> make_eplb_policy(TomlTable& table, const Scenario& scenario);

}  // namespace moesim::sim
