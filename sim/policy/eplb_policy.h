// The EPLB-style balancing policy in the serving loop ([policies.eplb]).
//
// Per replica: every step's expected expert loads of each MoE layer feed a moving average
// (exponential or window, per layer); every period_s the rebalancer (eplb_rebalance.h) computes
// a balanced placement with redundant slots from those loads, aligned to the current one. The
// weights of every expert a GPU gains are copied from the nearest GPU holding it, riding along
// with the replica's dispatch collectives and competing with serving traffic; when the copy
// completes, the whole new placement is applied at once (set_expert_placement): replicas no
// longer wanted are dropped and slots beyond the static placement's (the redundant ones) are
// charged to the GPU's KV pool. A plan that needs no copy applies at once; a rebalance is
// skipped while a copy is in flight, before any load was seen, when nothing would change, and
// when the predicted imbalance would not fall by more than min_imbalance_gain.
// Actions: eplb_rebalance, eplb_skip_busy / _no_load / _no_gain, eplb_unchanged,
// eplb_expert_copy (one per copied expert), eplb_expert_drop, eplb_apply, eplb_apply_no_memory,
// plus the context's weight_transfer_start / _done and expert_placement_set.
// Cannot be combined with hot_expert_replication or expert_pruning (a ConfigError).
#pragma once

#include <memory>

#include "sim/policy/policy_registry.h"

namespace moesim::sim {

std::unique_ptr<ServingPolicy> make_eplb_policy(TomlTable& table, const Scenario& scenario);

}  // namespace moesim::sim
