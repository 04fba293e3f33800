#include "sim/policy/eplb_policy.h"

#include <algorithm>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/placement/expert_placement.h"
#include "sim/placement/layer_placements.h"
#include "sim/policy/eplb_rebalance.h"

namespace moesim::sim {
namespace {

// (max - mean) / mean of the GPU loads of `placement` under one layer's expert loads (each split
// evenly over the expert's replicas); nullopt when the loads sum to 0.
std::optional<double> gpu_imbalance(const ExpertPlacement& placement,
                                    std::span<const double> expert_loads) {
  const std::vector<double> g = EplbRebalancer::gpu_loads(placement, expert_loads);
  double total = 0.0, max_load = 0.0;
  for (double x : g) {
    total += x;
    max_load = std::max(max_load, x);
  }
  if (total <= 0.0) return std::nullopt;
  const double mean = total / static_cast<double>(g.size());
  return (max_load - mean) / mean;
}

class EplbPolicy final : public ServingPolicy {
 public:
  EplbPolicy(EplbPolicyConfig config, int32_t num_moe_layers, int32_t num_groups,
             double slot_weight_bytes)
      : config_(config),
        num_moe_layers_(num_moe_layers),
        num_groups_(num_groups),
        slot_weight_bytes_(slot_weight_bytes) {}

  std::string_view name() const override { return "eplb"; }
  bool wants_expert_loads() const override { return true; }

  void on_start(PolicyContext& ctx) override {
    for (int32_t r = 0; r < ctx.view.num_replicas(); ++r) {
      const LayerPlacements* p = ctx.view.placements(r);
      if (!p) continue;
      State s;
      s.rebalancer = std::make_unique<EplbRebalancer>(config_, num_moe_layers_, p->layer(0),
                                                      num_groups_, slot_weight_bytes_);
      s.initial = std::make_unique<LayerPlacements>(*p);
      states_.emplace(r, std::move(s));
    }
    if (!states_.empty())
      ctx.actions.schedule_timer(this, from_seconds(config_.balance.period_s), 0);
  }

  void on_expert_loads(PolicyContext& ctx, int32_t replica, int32_t moe_layer_idx,
                       std::span<const double> selections) override {
    auto it = states_.find(replica);
    if (it != states_.end()) it->second.rebalancer->observe(moe_layer_idx, selections);
  }

  // Every period: each MoE layer of each replica is planned on its own; the layers whose plan
  // applies change together, when the copies of all of them have landed.
  void on_timer(PolicyContext& ctx, int64_t tag) override {
    for (auto& [r, s] : states_) {
      if (s.transfer_id >= 0) {
        ctx.actions.count_action("eplb_skip_busy");
        continue;
      }
      ctx.actions.count_action("eplb_rebalance");
      const LayerPlacements& current = *ctx.view.placements(r);
      std::vector<EplbPlan> apply_plans;
      int64_t num_copies = 0;
      for (int32_t l = 0; l < current.num_layers(); ++l) {
        EplbPlan plan = s.rebalancer->plan(l, current.layer(l));
        switch (plan.decision) {
          case EplbPlan::Decision::kNoLoad:
            ctx.actions.count_action("eplb_layer_skip_no_load");
            continue;
          case EplbPlan::Decision::kUnchanged:
            ctx.actions.count_action("eplb_layer_unchanged");
            continue;
          case EplbPlan::Decision::kNoGain:
            ctx.actions.count_action("eplb_layer_skip_no_gain");
            continue;
          case EplbPlan::Decision::kApply:
            break;
        }
        num_copies += static_cast<int64_t>(plan.copies.size());
        apply_plans.push_back(std::move(plan));
      }
      if (apply_plans.empty()) continue;
      if (num_copies == 0) {
        apply(ctx, r, apply_plans);
        continue;
      }
      ctx.actions.count_action("eplb_expert_copy", num_copies);
      num_copies_ += num_copies;
      bytes_copied_ += slot_weight_bytes_ * static_cast<double>(num_copies);
      std::vector<double> traffic = s.rebalancer->transfer_traffic(apply_plans);
      s.pending = std::move(apply_plans);
      s.transfer_id = ctx.actions.start_weight_transfer(this, r, std::move(traffic));
    }
    ctx.actions.schedule_timer(this, from_seconds(config_.balance.period_s), tag + 1);
  }

  void on_transfer_done(PolicyContext& ctx, int64_t transfer_id) override {
    for (auto& [r, s] : states_) {
      if (s.transfer_id != transfer_id) continue;
      s.transfer_id = -1;
      std::vector<EplbPlan> plans = std::move(s.pending);
      s.pending.clear();
      apply(ctx, r, plans);
    }
  }

  void on_finish(PolicyContext& ctx) override {
    // The measured quantity (expert_gpu_imbalance_mean) predicted from the final averaged loads:
    // per MoE layer, (max - mean) / mean of the GPU loads (each expert's load split evenly over
    // its replicas) under the layer's static placement and under the one it ends with; averaged
    // over the replicas' layers that saw load. Balancedness is mean / max, averaged the same way.
    double static_sum = 0.0, final_sum = 0.0, static_bal = 0.0, final_bal = 0.0;
    int64_t num_layers = 0;
    for (const auto& [r, s] : states_) {
      const ExpertLoadAverage& average = s.rebalancer->load_average();
      const LayerPlacements& now = *ctx.view.placements(r);
      for (int32_t l = 0; l < average.num_layers(); ++l) {
        if (average.num_samples(l) == 0) continue;
        const std::vector<double> loads = average.average(l);
        const std::optional<double> at_static = gpu_imbalance(s.initial->layer(l), loads);
        if (!at_static) continue;
        const double at_final = gpu_imbalance(now.layer(l), loads).value_or(0.0);
        static_sum += *at_static;
        final_sum += at_final;
        static_bal += 1.0 / (1.0 + *at_static);
        final_bal += 1.0 / (1.0 + at_final);
        ++num_layers;
      }
    }
    ctx.actions.report_metric("eplb.rebalances_applied", static_cast<double>(num_applied_));
    ctx.actions.report_metric("eplb.layer_placements_applied",
                              static_cast<double>(num_layers_applied_));
    ctx.actions.report_metric("eplb.expert_copies", static_cast<double>(num_copies_));
    ctx.actions.report_metric("eplb.weight_bytes_copied", bytes_copied_);
    if (num_layers > 0) {
      const auto m = static_cast<double>(num_layers);
      ctx.actions.report_metric("eplb.predicted_gpu_imbalance_static", static_sum / m);
      ctx.actions.report_metric("eplb.predicted_gpu_imbalance_final", final_sum / m);
      ctx.actions.report_metric("eplb.predicted_gpu_balancedness_static", static_bal / m);
      ctx.actions.report_metric("eplb.predicted_gpu_balancedness_final", final_bal / m);
    }
  }

 private:
  struct State {
    std::unique_ptr<EplbRebalancer> rebalancer;
    std::unique_ptr<LayerPlacements> initial;
    int64_t transfer_id = -1;
    std::vector<EplbPlan> pending;  // the layers whose copies are in flight
  };

  void apply(PolicyContext& ctx, int32_t replica, const std::vector<EplbPlan>& plans) {
    std::vector<std::pair<int32_t, ExpertPlacement>> layers;
    int64_t drops = 0;
    for (const EplbPlan& plan : plans) {
      layers.emplace_back(plan.moe_layer_idx, *plan.target);
      drops += static_cast<int64_t>(plan.drops.size());
    }
    if (!ctx.actions.set_layer_placements(replica, layers)) {
      ctx.actions.count_action("eplb_apply_no_memory");
      return;
    }
    ctx.actions.count_action("eplb_apply");
    if (drops > 0) ctx.actions.count_action("eplb_expert_drop", drops);
    ++num_applied_;
    num_layers_applied_ += static_cast<int64_t>(plans.size());
  }

  EplbPolicyConfig config_;
  int32_t num_moe_layers_;
  int32_t num_groups_;
  double slot_weight_bytes_;
  std::map<int32_t, State> states_;
  int64_t num_applied_ = 0;
  int64_t num_layers_applied_ = 0;
  int64_t num_copies_ = 0;
  double bytes_copied_ = 0.0;
};

}  // namespace

std::unique_ptr<ServingPolicy> make_eplb_policy(TomlTable& table, const Scenario& scenario) {
  const ModelCard& card = *scenario.model;
  const MoeSpec* moe = nullptr;
  for (const LayerSpec& l : card.layers) {
    if (l.ffn.is_moe && !moe) moe = &l.ffn.moe;
  }
  if (!moe) table.fail_table("eplb needs a model with MoE layers");
  for (const PolicyConfig& other : scenario.policies) {
    if (other.name == "hot_expert_replication" || other.name == "expert_pruning") {
      table.fail_table("eplb cannot be combined with [policies." + other.name +
                       "] (both change the expert placement)");
    }
  }
  const int32_t num_gpus = scenario.deployment.gpus_per_replica;
  const int32_t gpus_per_node = std::min(num_gpus, scenario.topology->gpus_per_node());
  const auto num_experts = static_cast<int32_t>(moe->num_routed_experts);
  const auto num_groups = static_cast<int32_t>(moe->num_expert_groups);
  EplbPolicyConfig config =
      parse_eplb_policy_config(table, num_experts, num_groups, num_gpus / gpus_per_node, num_gpus);
  const auto num_moe = static_cast<int32_t>(num_moe_layers(card));
  return std::make_unique<EplbPolicy>(config, num_moe, num_groups, expert_weight_bytes(card, *moe));
}

}  // namespace moesim::sim
