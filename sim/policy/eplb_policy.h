// The EPLB-style balancing policy in the serving loop ([policies.eplb]).
//
// Per replica, every step's expected expert loads feed each MoE layer's moving average; every
// period_s the rebalancer (eplb_rebalance.h) plans each layer, and the weights every GPU gains
// travel in one transfer riding along with the replica's dispatch collectives. When it lands the
// changed layers' placements apply at once; slots beyond the memory layout's are charged to the
// GPU's KV pool. A rebalance is skipped while a copy is in flight. Cannot be combined with
// hot_expert_replication or expert_pruning (a ConfigError). docs/policies/eplb.md ("In the
// serving loop") lists the decisions and the actions counted.
#pragma once

#include <memory>

#include "sim/policy/policy_registry.h"

namespace moesim::sim {

std::unique_ptr<ServingPolicy> make_eplb_policy(TomlTable& table, const Scenario& scenario);

}  // namespace moesim::sim
