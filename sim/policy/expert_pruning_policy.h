// Expert pruning applied in a serving run ([policies.expert_pruning]).
//
// At the start of the run the policy profiles replica 0's routing (as `moesim prune` does) and
// plans the least-activated `fraction` of every MoE layer's experts, or takes a plan file, then
// applies it to every replica through PolicyActions::replace_routed_experts: the replicas serve
// a card of the kept experts re-packed over their GPUs, the freed weight bytes join the KV pool,
// and tokens that pick a pruned expert take their next choice (PrunedRoutingModel). Needs
// synthetic routing; cannot be combined with eplb or hot_expert_replication.
// docs/policies/expert_pruning.md has the metrics and actions it reports.
#pragma once

#include <memory>

#include "sim/policy/expert_pruning.h"
#include "sim/policy/policy_registry.h"

namespace moesim::sim {

// The policy of resolved settings; `card` (the scenario's) must outlive the policy.
std::unique_ptr<ServingPolicy> make_expert_pruning_policy(const ExpertPruningSettings& settings,
                                                          const ModelCard& card);
// The registry's parse step (PolicyParser): parse_expert_pruning_settings, shared.
std::shared_ptr<const PolicySettings> parse_expert_pruning_policy_settings(
    TomlTable& table, const Scenario& scenario);
// The registry's maker (PolicyMaker): `settings` must be ExpertPruningSettings (checked); the
// policy uses the scenario's model card.
std::unique_ptr<ServingPolicy> make_expert_pruning_policy(const PolicySettings& settings,
                                                          const Scenario& scenario);

}  // namespace moesim::sim
