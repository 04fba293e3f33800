// The hot-expert replication policy in the serving loop ([policies.hot_expert_replication]).
//
// Per replica and MoE layer, every step's expected expert loads feed the layer's sliding window;
// every period_s the planner (hot_expert_replication.h) picks each layer's hot experts and their
// destinations. Removals apply at once (their HBM returns to the KV pool); additions copy the
// weights over the network alongside the dispatch collectives and take effect when every
// layer's copies land, their HBM then taken from the KV pool (a replica that no longer fits is
// skipped and counted). A refresh is skipped while a copy is in flight.
// docs/policies/hot_expert_replication.md lists the actions counted.
#pragma once

#include <memory>

#include "sim/policy/policy_registry.h"

namespace moesim::sim {

std::unique_ptr<ServingPolicy> make_hot_expert_replication_policy(TomlTable& table,
                                                                  const Scenario& scenario);

}  // namespace moesim::sim
