// Expert pruning: profile which experts a workload activates, prune the least-activated ones,
// and measure what that buys (weight memory, decode step time) and costs (routing mass lost).
//
// Model:
//  - profile: exact per-token top-k sets (SyntheticRoutingModel::sample_token_experts) for
//    tokens_per_step tokens per step over profile_steps steps, split over domains by their
//    weights; selections per (layer, expert) and co-activation counts n_ij (ActivationProfile).
//  - co-activation affinity C_ij = n_ij / sqrt(n_i * n_j) (n_i = tokens that picked i), 1 on the
//    diagonal of active experts, 0 when either expert never fired.
//  - dead experts: activation rate (tokens that picked the expert / tokens) below a threshold.
//  - plan: per layer the round(fraction * experts) least-activated experts, the first in
//    ascending (selections, expert id) order; the same number in every layer; at least top_k
//    experts stay.
//  - re-routing: a token whose top-k set holds pruned experts keeps its other picks and replaces
//    each pruned pick with its next choice. The router's full ranking is the Plackett-Luce order
//    of the token sampler (successive draws proportional to popularity); its continuation after
//    the picks is again Plackett-Luce over the remaining experts, so the next choice is drawn
//    proportional to popularity among experts neither pruned nor picked. Exact for plain top-k;
//    with group-limited routing or co-activation it ignores the group restriction and the
//    cluster preference of later picks (an approximation).
//  - routing mass lost: selections that hit pruned experts / all selections, measured on
//    held-out tokens (steps after the profile, so drift shows up as extra loss).
//  - deployment: pruning frees each layer's pruned slots; the kept experts are re-packed over the
//    EP group (kept expert i of a layer on GPU floor(i * G / kept), the same map in every layer),
//    so weight memory per GPU falls with ceil(kept / G) slots per layer. The decode step is timed
//    with a card whose MoE layers have `kept` experts (router rows shrink with it) and a routing
//    model whose pruned selections are re-routed (PrunedRoutingModel).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sim/core/rng.h"
#include "sim/model/model_card.h"
#include "sim/placement/expert_placement.h"
#include "sim/routing/routing_model.h"
#include "sim/routing/routing_stats.h"
#include "sim/routing/synthetic_routing.h"
#include "sim/scenario/scenario.h"

namespace moesim::sim {

class TomlTable;

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

// Samples token sets for steps [first_step, first_step + num_steps) into a profile of every MoE
// layer (co-activation kept for coactivation_layers). Tokens of a step are split over the spec's
// domains in proportion to their weights (largest remainder, ties to the lower domain).
ActivationProfile profile_activations(SyntheticRoutingModel& routing, int64_t first_step,
                                      int32_t num_steps, int32_t tokens_per_step,
                                      const std::vector<int32_t>& coactivation_layers);

// Tokens that picked the expert / tokens profiled in the layer (0 before any token).
double activation_rate(const ActivationProfile& profile, int32_t moe_layer_idx, int32_t expert_idx);
// C_ij (see the file comment), num_experts x num_experts row-major. Precondition: the layer
// tracks co-activation.
std::vector<double> coactivation_affinity(const ActivationProfile& profile, int32_t moe_layer_idx);
// Experts whose activation rate is below threshold, ascending.
std::vector<int32_t> dead_experts(const ActivationProfile& profile, int32_t moe_layer_idx,
                                  double threshold);

class PruningPlan {
 public:
  // The round(fraction * experts) least-activated experts of every layer. Precondition
  // (checked): fraction in [0, 1) and at least top_k experts kept.
  static PruningPlan least_activated(const ActivationProfile& profile, double fraction,
                                     int32_t top_k);
  // An explicit plan: pruned[l] lists layer l's pruned experts. Precondition (checked): every
  // layer prunes the same number of distinct experts in [0, num_experts), fewer than all.
  static PruningPlan from_layers(int32_t num_experts, std::vector<std::vector<int32_t>> pruned);

  int32_t num_moe_layers() const { return static_cast<int32_t>(pruned_.size()); }
  int32_t num_experts() const { return num_experts_; }
  int32_t num_pruned_per_layer() const { return num_pruned_; }
  int32_t num_kept_per_layer() const { return num_experts_ - num_pruned_; }
  // Pruned experts of a layer, ascending.
  const std::vector<int32_t>& pruned(int32_t moe_layer_idx) const { return pruned_[moe_layer_idx]; }
  bool is_pruned(int32_t moe_layer_idx, int32_t expert_idx) const {
    return is_pruned_[static_cast<size_t>(moe_layer_idx) * num_experts_ + expert_idx] != 0;
  }
  // Kept experts of a layer, ascending: compacted index i is kept(layer)[i].
  std::vector<int32_t> kept(int32_t moe_layer_idx) const;

 private:
  int32_t num_experts_ = 0;
  int32_t num_pruned_ = 0;
  std::vector<std::vector<int32_t>> pruned_;
  std::vector<uint8_t> is_pruned_;  // layer x expert
};

// Counts of one re-routing pass.
struct RerouteStats {
  int64_t num_tokens = 0;
  int64_t num_selections = 0;
  int64_t num_pruned_selections = 0;  // selections that hit pruned experts (and were re-routed)
  int64_t num_tokens_affected = 0;    // tokens with at least one pruned pick
  // num_pruned_selections / num_selections (0 without selections).
  double mass_lost() const;
  void add(const RerouteStats& other);
};

// Re-routes token sets of one layer in place (token t owns experts[t * top_k, (t + 1) * top_k))
// by the next-choice rule of the file comment; popularity has one positive weight per expert.
// Precondition (checked): at least top_k experts kept.
RerouteStats reroute_token_sets(const PruningPlan& plan, int32_t moe_layer_idx,
                                std::span<const double> popularity, int32_t top_k,
                                std::span<int32_t> experts, RngStream& rng);

// A plan as JSON ({"model", "num_moe_layers", "num_experts", "fraction", "pruned": [[...], ...]}),
// and back. The parser checks the shape against the model's routing shape (layers, experts, at
// least top_k kept, equal counts per layer, ids in range and distinct) and throws ConfigError
// naming `source` and the offending key.
std::string format_pruning_plan_json(const PruningPlan& plan, const std::string& model_name,
                                     double fraction);
PruningPlan parse_pruning_plan_json(const std::string& text, const std::string& source,
                                    const RoutingShape& shape);

// Re-routes `plan` on held-out steps [first_step, first_step + num_steps): every MoE layer's token
// sets sampled as profile_activations does, re-routed by reroute_token_sets with streams
// "prune.reroute.L<l>.S<step>.D<d>" of root_seed (the pruning study's draws). All layers summed.
RerouteStats held_out_reroute(SyntheticRoutingModel& sampler, const PruningPlan& plan,
                              int64_t first_step, int32_t num_steps, int32_t tokens_per_step,
                              uint64_t root_seed);

// The card with every MoE layer reduced to num_kept routed experts and its groups collapsed to
// one (the pruned router no longer group-limits). Not re-validated: the group constraints of the
// original no longer apply.
ModelCard pruned_model_card(const ModelCard& card, int32_t num_kept);
// Kept experts re-packed over the EP group: compacted expert i on GPU floor(i * num_gpus /
// num_kept) (GPUs hold floor or ceil of num_kept / num_gpus; some none when num_kept < GPUs).
ExpertPlacement repacked_placement(int32_t num_kept, int32_t num_gpus, int32_t gpus_per_node,
                                   int32_t num_shared_experts);

// A routing model over the kept experts (compacted ids, kept(layer) order) that draws from an
// inner synthetic model and re-routes the selections of pruned experts, per source row, to kept
// experts in proportion to their popularity (the domains' popularity mixed by domain weight),
// never above the source's tokens per expert (the excess moves on); deterministic (largest
// remainder rounding, no extra draws). A counts-level form of the next-choice rule, for the
// step model's hot path. References must outlive the model.
class PrunedRoutingModel final : public RoutingModel {
 public:
  PrunedRoutingModel(SyntheticRoutingModel& inner, const PruningPlan& plan);

  const RoutingShape& shape() const override { return shape_; }
  void route(const RoutingQuery& query, CountMatrix& out) override;
  // Selections drawn by the inner model over all route() calls, and those that hit a pruned
  // expert (re-routed): the routing mass lost while serving is their ratio.
  int64_t num_selections() const { return num_selections_; }
  int64_t num_rerouted_selections() const { return num_rerouted_selections_; }

 private:
  SyntheticRoutingModel& inner_;
  const PruningPlan& plan_;
  RoutingShape shape_;
  std::vector<double> domain_weights_;  // normalised
  CountMatrix full_;
  std::vector<double> weights_;  // per kept expert
  std::vector<int64_t> row_;     // per kept expert
  std::vector<int32_t> order_;
  int64_t num_selections_ = 0;
  int64_t num_rerouted_selections_ = 0;
};

// ---- The pruning study (`moesim prune`)
// ----------------------------------------------------------

struct PruningStudyOptions {
  std::vector<double> fractions = {0.0, 0.2, 0.4, 0.6};  // each in [0, 1)
  int64_t batch_per_gpu = 64;     // decode sequences per attention rank, >= 1
  int64_t context_tokens = 4096;  // context of every decode sequence, >= 1
  int32_t num_timed_steps = 8;    // decode steps averaged, >= 1
  ExpertPruningConfig profile;    // profile_steps, tokens_per_step, dead_threshold
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

// Profiles the scenario's routing (replica 0's seed), plans each fraction, and times one replica's
// decode step at the batch with the pruned model. Throws ConfigError when the scenario has no MoE
// layer or the deployment does not fit in HBM; fractions that keep fewer than top_k experts are
// ConfigErrors naming "fractions".
PruningStudy run_pruning_study(const Scenario& scenario, const PruningStudyOptions& options);
// Text table and JSON (units in key names).
std::string format_pruning_study_text(const PruningStudy& study);
std::string format_pruning_study_json(const PruningStudy& study);

}  // namespace moesim::sim
