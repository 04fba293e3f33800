#include "sim/policy/expert_pruning_policy.h"

#include <utility>
#include <vector>

#include "base/check.h"
#include "sim/placement/expert_placement.h"
#include "sim/placement/layer_placements.h"
#include "sim/policy/activation_profile.h"
#include "sim/policy/expert_pruning_deployment.h"
#include "sim/policy/pruned_routing.h"
#include "sim/routing/synthetic_routing.h"

namespace moesim::sim {
namespace {

// Root seed of the held-out re-routing draws (they never touch the run's streams).
constexpr uint64_t kHeldOutSeed = 1;

class ExpertPruningPolicy final : public ServingPolicy {
 public:
  ExpertPruningPolicy(const ExpertPruningSettings& settings, const ModelCard& card)
      : config_(settings.config), card_(card), plan_(settings.plan) {}

  std::string_view name() const override { return "expert_pruning"; }

  void on_start(PolicyContext& ctx) override {
    if (ctx.view.num_replicas() == 0 || !ctx.view.placements(0)) return;
    auto* sampler = dynamic_cast<SyntheticRoutingModel*>(ctx.actions.routing_model(0));
    MOESIM_CHECK(sampler != nullptr, "synthetic routing (checked by the factory)");
    const RoutingShape& shape = sampler->shape();
    if (!plan_) {
      const ActivationProfile profile =
          profile_activations(*sampler, 0, config_.profile_steps, config_.tokens_per_step, {});
      plan_ = std::make_shared<const PruningPlan>(
          PruningPlan::least_activated(profile, config_.fraction, shape.top_k));
    }
    const RerouteStats held_out =
        held_out_reroute(*sampler, *plan_, config_.profile_steps, config_.profile_steps,
                         config_.tokens_per_step, kHeldOutSeed);
    const int32_t kept = plan_->num_kept_per_layer();
    const ExpertPlacement& before = ctx.view.placements(0)->layer(0);
    const int32_t slots_before = before.max_slots_per_gpu();
    pruned_card_ = std::make_unique<ModelCard>(pruned_model_card(card_, kept));
    const ExpertPlacement placement = repacked_placement(
        kept, before.num_gpus(), before.gpus_per_node(), before.num_shared_experts());
    for (int32_t r = 0; r < ctx.view.num_replicas(); ++r) {
      auto* synth = dynamic_cast<SyntheticRoutingModel*>(ctx.actions.routing_model(r));
      MOESIM_CHECK(synth != nullptr, "synthetic routing on every replica");
      routings_.push_back(std::make_unique<PrunedRoutingModel>(*synth, *plan_));
      ctx.actions.replace_routed_experts(r, *pruned_card_, placement, routings_.back().get());
      ctx.actions.count_action("expert_pruning_apply");
    }
    ctx.actions.count_action("experts_pruned", static_cast<int64_t>(plan_->num_pruned_per_layer()) *
                                                   plan_->num_moe_layers());
    const MoeSpec* moe = nullptr;
    for (const LayerSpec& l : card_.layers) {
      if (l.ffn.is_moe && !moe) moe = &l.ffn.moe;
    }
    const int32_t slots_after = placement.max_slots_per_gpu();
    ctx.actions.report_metric("expert_pruning.experts_pruned_per_layer",
                              plan_->num_pruned_per_layer());
    ctx.actions.report_metric("expert_pruning.experts_kept_per_layer", kept);
    ctx.actions.report_metric("expert_pruning.expert_slots_per_gpu_before", slots_before);
    ctx.actions.report_metric("expert_pruning.expert_slots_per_gpu_after", slots_after);
    ctx.actions.report_metric("expert_pruning.weight_bytes_freed_per_gpu",
                              static_cast<double>(slots_before - slots_after) *
                                  expert_weight_bytes(card_, *moe) *
                                  static_cast<double>(plan_->num_moe_layers()));
    ctx.actions.report_metric("expert_pruning.mass_lost_held_out", held_out.mass_lost());
    ctx.actions.report_metric("expert_pruning.tokens_rerouted_held_out",
                              held_out.tokens_affected_fraction());
  }

  void on_finish(PolicyContext& ctx) override {
    int64_t selections = 0, rerouted = 0;
    for (const auto& r : routings_) {
      selections += r->num_selections();
      rerouted += r->num_rerouted_selections();
    }
    ctx.actions.report_metric(
        "expert_pruning.mass_lost_served",
        selections == 0 ? 0.0 : static_cast<double>(rerouted) / static_cast<double>(selections));
  }

 private:
  ExpertPruningConfig config_;
  const ModelCard& card_;  // the scenario's card (outlives the run)
  // Read from plan_file (shared with the settings) or planned at the start; referenced by the
  // replicas' step models until the run ends (the policy outlives them).
  std::shared_ptr<const PruningPlan> plan_;
  std::unique_ptr<ModelCard> pruned_card_;
  std::vector<std::unique_ptr<PrunedRoutingModel>> routings_;
};

}  // namespace

std::unique_ptr<ServingPolicy> make_expert_pruning_policy(const ExpertPruningSettings& settings,
                                                          const ModelCard& card) {
  return std::make_unique<ExpertPruningPolicy>(settings, card);
}

std::shared_ptr<const PolicySettings> parse_expert_pruning_policy_settings(
    TomlTable& table, const Scenario& scenario) {
  return std::make_shared<const ExpertPruningSettings>(
      parse_expert_pruning_settings(table, scenario));
}

std::unique_ptr<ServingPolicy> make_expert_pruning_policy(const PolicySettings& settings,
                                                          const Scenario& scenario) {
  const auto* resolved = dynamic_cast<const ExpertPruningSettings*>(&settings);
  MOESIM_CHECK(resolved != nullptr, "expert_pruning settings");
  return make_expert_pruning_policy(*resolved, *scenario.model);
}

}  // namespace moesim::sim
