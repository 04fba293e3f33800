// [policies.expert_pruning]: the table's settings, and the table resolved against its scenario
// (cross-checks, the plan file read and validated) once, before any run uses it. The policy is
// in expert_pruning_policy.h; the concepts it uses: activation_profile.h, pruning_plan.h,
// pruned_routing.h, expert_pruning_deployment.h; the `moesim prune` study:
// sim/study/pruning_study.h.
// docs/policies/expert_pruning.md describes the model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "sim/config/toml_source.h"
#include "sim/policy/pruning_plan.h"
#include "sim/scenario/scenario.h"

namespace moesim::sim {

// [policies.expert_pruning]; defaults in brackets.
struct ExpertPruningConfig {
  double fraction = 0.2;           // least-activated fraction pruned per layer, in [0, 1)
  double dead_threshold = 1e-3;    // activation rate below which an expert is dead, [0, 1]
  int32_t profile_steps = 8;       // steps profiled, >= 1
  int32_t tokens_per_step = 4096;  // tokens sampled per step and layer, >= 1
  // A plan written by `moesim prune --write-plan` (run policy; "" = plan `fraction` from the
  // profile). Relative paths are resolved against the scenario's directory.
  std::string plan_file;
};
// Parses the table; calls finish(). Unknown keys and out-of-range values are ConfigErrors;
// giving both fraction and plan_file is one.
ExpertPruningConfig parse_expert_pruning_config(TomlTable& table);

// The table resolved against its scenario: the policy's settings in Scenario::policies, filled
// once per scenario load by resolve_policy_settings (policy_registry.h).
struct ExpertPruningSettings final : PolicySettings {
  ExpertPruningConfig config;
  // The plan config.plan_file names, read and checked against the model's routing shape; null
  // when the policy plans config.fraction from its profile at the start of a run. Shared by every
  // policy built from these settings, never modified.
  std::shared_ptr<const PruningPlan> plan;
};
// Checks the scenario (a model with MoE layers; no [policies.eplb] or
// [policies.hot_expert_replication]), parses the table (parse_expert_pruning_config), checks
// that `fraction` keeps at least top_k experts, and reads plan_file (relative to the scenario's
// file). Every error is a ConfigError at the table or its key; plan-file errors name the file:
// "plan_file: cannot read <path>", "plan_file: <path>: <key>: <reason>".
ExpertPruningSettings parse_expert_pruning_settings(TomlTable& table, const Scenario& scenario);

}  // namespace moesim::sim
