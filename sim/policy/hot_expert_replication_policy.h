// The hot-expert replication policy in the serving loop ([policies.hot_expert_replication]).
//
// Per replica and MoE layer: the layer's expected expert loads of every step feed that layer's
// sliding window; every period_s the planner (hot_expert_replication.h) picks each layer's
// hottest experts and where to copy them in that layer. Removals of replicas that are no longer
// hot apply at once (their HBM goes back to the KV pool); additions first copy the expert's
// weights of that layer over the network, riding along with the replica's dispatch collectives
// and competing with serving traffic, and take effect only when the copies of every layer land:
// then the slot's HBM is taken from the KV pool (a replica that no longer fits is skipped and
// counted) and that layer's tokens go to the nearest replica (the placement's token-to-replica
// rule). A refresh is skipped while a copy is in flight. Actions: replication_refresh,
// replication_skip_busy, expert_replica_add / _remove, weight_transfer_start / _done,
// replica_add_no_memory.
#pragma once

#include <memory>

#include "sim/policy/policy_registry.h"

namespace moesim::sim {

std::unique_ptr<ServingPolicy> make_hot_expert_replication_policy(TomlTable& table,
                                                                  const Scenario& scenario);

}  // namespace moesim::sim
