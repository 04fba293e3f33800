// Expert pruning applied in a serving run ([policies.expert_pruning]).
//
// At the start of the run (before any step) the policy profiles replica 0's routing (steps
// [0, profile_steps), as `moesim prune` does), plans the least-activated `fraction` of the
// experts of every MoE layer (PruningPlan::least_activated), or takes the plan read from
// plan_file (written by `moesim prune --write-plan`; read when the table is parsed, see
// expert_pruning.h), and applies the plan to every
// replica through PolicyActions::replace_routed_experts: the replicas serve a card of `kept`
// experts per MoE layer, re-packed over their GPUs (repacked_placement), so the freed weight
// bytes join the KV pool; tokens that pick a pruned expert take their next choice
// (PrunedRoutingModel, one per replica, wrapping the replica's synthetic routing).
// Metrics (summary "policy_metrics"): expert_pruning.experts_pruned_per_layer, .experts_kept_
// per_layer, .expert_slots_per_gpu_before / _after, .weight_bytes_freed_per_gpu,
// .mass_lost_held_out and .tokens_rerouted_held_out (token level, the profile_steps steps after
// the profile), and at the end .mass_lost_served (selections re-routed over selections drawn
// during the run). Actions: expert_pruning_apply (per replica), experts_pruned (pruned experts
// summed over MoE layers, once), plus the context's routed_experts_replaced.
// Needs synthetic routing; cannot be combined with eplb or hot_expert_replication.
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
