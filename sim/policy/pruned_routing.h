// Routing around pruned experts: token-level re-routing (to measure the routing mass a plan
// loses) and a counts-level pruned routing model (to serve the pruned model).
//
// A token keeps its picks that survive and replaces each pruned one with its next choice, drawn
// in proportion to popularity among the experts neither pruned nor picked (the continuation of
// the token sampler's Plackett-Luce ranking; exact for plain top-k, an approximation under group
// limits or co-activation). PrunedRoutingModel draws counts from the full model and moves the
// pruned experts' selections to kept experts in proportion to their popularity.
// docs/policies/expert_pruning.md has the model and the mass lost on held-out tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/core/rng.h"
#include "sim/policy/pruning_plan.h"
#include "sim/routing/routing_model.h"
#include "sim/routing/synthetic_routing.h"

namespace moesim::sim {

// Counts of one re-routing pass.
struct RerouteStats {
  int64_t num_tokens = 0;
  int64_t num_selections = 0;
  int64_t num_pruned_selections = 0;  // selections that hit pruned experts (and were re-routed)
  int64_t num_tokens_affected = 0;    // tokens with at least one pruned pick
  // num_pruned_selections / num_selections (0 without selections).
  double mass_lost() const;
  // num_tokens_affected / num_tokens (0 without tokens).
  double tokens_affected_fraction() const;
  void add(const RerouteStats& other);
};

// Re-routes token sets of one layer in place (token t owns experts[t * top_k, (t + 1) * top_k))
// by the next-choice rule of the file comment; popularity has one positive weight per expert.
// Precondition (checked): at least top_k experts kept.
RerouteStats reroute_token_sets(const PruningPlan& plan, int32_t moe_layer_idx,
                                std::span<const double> popularity, int32_t top_k,
                                std::span<int32_t> experts, RngStream& rng);

// Re-routes every plan on held-out steps [first_step, first_step + num_steps): every MoE layer's
// token sets sampled as profile_activations does (once, shared by the plans), re-routed by
// reroute_token_sets with streams "prune.reroute.L<l>.S<step>.D<d>" of root_seed (each plan
// re-routes from a fresh stream of that name, so a plan's counts do not depend on the others).
// Returns [plan][moe layer]. Precondition (checked): every plan matches the sampler's shape.
std::vector<std::vector<RerouteStats>> held_out_reroute_per_layer(
    SyntheticRoutingModel& sampler, std::span<const PruningPlan> plans, int64_t first_step,
    int32_t num_steps, int32_t tokens_per_step, uint64_t root_seed);
// held_out_reroute_per_layer of one plan, all layers summed.
RerouteStats held_out_reroute(SyntheticRoutingModel& sampler, const PruningPlan& plan,
                              int64_t first_step, int32_t num_steps, int32_t tokens_per_step,
                              uint64_t root_seed);

// A routing model over the kept experts (compacted ids, kept(layer) order) that draws from an
// inner synthetic model and re-routes the selections of pruned experts, per source row, to kept
// experts in proportion to their popularity (the domains' popularity mixed by domain weight),
// never above the source's tokens per expert (the excess moves on); deterministic (largest
// remainder rounding, no extra draws). A counts-level form of the next-choice rule, for the
// step model's hot path. References must outlive the model.
class PrunedRoutingModel final : public RoutingModel {
 public:
  // Precondition (checked): the plan matches the inner model's shape.
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

}  // namespace moesim::sim
