// The pruning study (`moesim prune`): profile a scenario's routing, plan each pruned fraction,
// and measure what pruning buys (weight memory, KV pool, decode step time) and costs (routing
// mass lost on held-out tokens).
//
// It profiles replica 0's synthetic routing for P steps and holds out the next P for the mass
// lost, then prices one replica built as a run would (ReplicaBuilder: the scenario's cost,
// network and memory models) serving the pruned card with PrunedRoutingModel routing: the mean
// of a few decode steps at a given batch and context. docs/policies/expert_pruning.md
// ("moesim prune") has the options and the table it prints.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/policy/expert_pruning.h"
#include "sim/policy/pruning_plan.h"
#include "sim/scenario/scenario.h"

namespace moesim::sim::study {

struct PruningStudyOptions {
  std::vector<double> fractions = {0.0, 0.2, 0.4, 0.6};  // each in [0, 1)
  int64_t batch_per_gpu = 64;     // decode sequences per attention rank, >= 1
  int64_t context_tokens = 4096;  // context of every decode sequence, >= 1
  int32_t num_timed_steps = 8;    // decode steps averaged, >= 1
  ExpertPruningConfig profile;    // profile_steps, tokens_per_step, dead_threshold
  // Called with (stages done, stages in all) after the activation profile, the held-out
  // rerouting and each fraction's step timing (2 + fractions); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

struct PruningStudyRow {
  double fraction = 0;
  int32_t experts_kept_per_layer = 0;
  int32_t expert_slots_per_gpu = 0;      // per MoE layer, the fullest GPU
  double weight_bytes_per_gpu = 0;       // all weights on the fullest GPU
  double kv_pool_bytes_per_gpu = 0;      // HBM left for KV / state
  int64_t max_decode_batch_per_gpu = 0;  // sequences of context_tokens that fit the KV pool
  double decode_step_s = 0;              // mean over the timed steps
  double routing_mass_lost = 0;          // all layers, held-out tokens
  double max_layer_mass_lost = 0;
  double tokens_rerouted = 0;  // fraction of held-out tokens with a pruned pick
};

struct PruningStudy {
  std::string scenario_name;
  std::string model_name;
  int32_t num_gpus = 0;  // EP group (one replica)
  int32_t num_experts = 0;
  int32_t num_moe_layers = 0;
  int64_t profiled_tokens_per_layer = 0;
  int32_t num_dead_experts = 0;  // summed over layers, in the profile
  PruningStudyOptions options;
  std::vector<PruningStudyRow> rows;
  std::vector<PruningPlan> plans;  // one per fraction, in options.fractions order
};

// Runs the study of the file comment. Throws ConfigError when the scenario has no MoE layer or
// the deployment does not fit in HBM (key "deployment"); fractions that keep fewer than top_k
// experts are ConfigErrors naming "fractions". Precondition (checked): batch_per_gpu,
// context_tokens and num_timed_steps >= 1.
PruningStudy run_pruning_study(const Scenario& scenario, const PruningStudyOptions& options);
// Text table and JSON (units in key names).
std::string format_pruning_study_text(const PruningStudy& study);
std::string format_pruning_study_json(const PruningStudy& study);

}  // namespace moesim::sim::study
