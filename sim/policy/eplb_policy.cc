#include "sim/policy/eplb_policy.h"

#include <algorithm>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/placement/expert_placement.h"
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
    for (int32_t r = 0; r < ctx.num_replicas(); ++r) {
      const ExpertPlacement* p = ctx.placement(r);
      if (!p) continue;
      State s;
      s.rebalancer = std::make_unique<EplbRebalancer>(config_, num_moe_layers_, *p, num_groups_,
                                                      slot_weight_bytes_);
      s.initial = std::make_unique<ExpertPlacement>(*p);
      states_.emplace(r, std::move(s));
    }
    if (!states_.empty()) ctx.schedule_timer(this, from_seconds(config_.balance.period_s), 0);
  }

  void on_expert_loads(PolicyContext& ctx, int32_t replica, int32_t moe_layer_idx,
                       std::span<const double> selections) override {
    auto it = states_.find(replica);
    if (it != states_.end()) it->second.rebalancer->observe(moe_layer_idx, selections);
  }

  void on_timer(PolicyContext& ctx, int64_t tag) override {
    for (auto& [r, s] : states_) {
      if (s.transfer_id >= 0) {
        ctx.count_action("eplb_skip_busy");
        continue;
      }
      ctx.count_action("eplb_rebalance");
      EplbPlan plan = s.rebalancer->plan(*ctx.placement(r));
      switch (plan.decision) {
        case EplbPlan::Decision::kNoLoad:
          ctx.count_action("eplb_skip_no_load");
          continue;
        case EplbPlan::Decision::kUnchanged:
          ctx.count_action("eplb_unchanged");
          continue;
        case EplbPlan::Decision::kNoGain:
          ctx.count_action("eplb_skip_no_gain");
          continue;
        case EplbPlan::Decision::kApply:
          break;
      }
      if (plan.copies.empty()) {
        apply(ctx, r, s, plan);
        continue;
      }
      ctx.count_action("eplb_expert_copy", static_cast<int64_t>(plan.copies.size()));
      num_copies_ += static_cast<int64_t>(plan.copies.size());
      bytes_copied_ += slot_weight_bytes_ * static_cast<double>(plan.copies.size());
      std::vector<double> traffic = s.rebalancer->transfer_traffic(plan);
      s.pending = std::move(plan);
      s.transfer_id = ctx.start_weight_transfer(this, r, std::move(traffic));
    }
    ctx.schedule_timer(this, from_seconds(config_.balance.period_s), tag + 1);
  }

  void on_transfer_done(PolicyContext& ctx, int64_t transfer_id) override {
    for (auto& [r, s] : states_) {
      if (s.transfer_id != transfer_id) continue;
      s.transfer_id = -1;
      EplbPlan plan = std::move(*s.pending);
      s.pending.reset();
      apply(ctx, r, s, plan);
    }
  }

  void on_finish(PolicyContext& ctx) override {
    // Predicted imbalance (max / mean GPU load, layers summed) under each replica's final
    // averaged loads: its static placement vs the placement it ends with; means over replicas.
    double static_sum = 0.0, final_sum = 0.0;
    // The measured quantity (expert_gpu_imbalance_mean): per layer, (max - mean) / mean of the
    // predicted GPU loads; averaged over the replicas' layers that saw load.
    double static_layers_sum = 0.0, final_layers_sum = 0.0;
    int64_t num_layers = 0;
    for (const auto& [r, s] : states_) {
      const std::vector<double> loads = s.rebalancer->expert_loads();
      static_sum += EplbRebalancer::imbalance(*s.initial, loads);
      final_sum += EplbRebalancer::imbalance(*ctx.placement(r), loads);
      const ExpertLoadAverage& average = s.rebalancer->load_average();
      for (int32_t l = 0; l < average.num_layers(); ++l) {
        if (average.num_samples(l) == 0) continue;
        const std::vector<double> layer_loads = average.average(l);
        const std::optional<double> at_static = gpu_imbalance(*s.initial, layer_loads);
        if (!at_static) continue;
        static_layers_sum += *at_static;
        final_layers_sum += gpu_imbalance(*ctx.placement(r), layer_loads).value_or(0.0);
        ++num_layers;
      }
    }
    const double n = static_cast<double>(std::max<size_t>(states_.size(), 1));
    ctx.report_metric("eplb.rebalances_applied", static_cast<double>(num_applied_));
    ctx.report_metric("eplb.expert_copies", static_cast<double>(num_copies_));
    ctx.report_metric("eplb.weight_bytes_copied", bytes_copied_);
    ctx.report_metric("eplb.predicted_imbalance_static", static_sum / n);
    ctx.report_metric("eplb.predicted_imbalance_final", final_sum / n);
    if (num_layers > 0) {
      const auto m = static_cast<double>(num_layers);
      ctx.report_metric("eplb.predicted_gpu_imbalance_static", static_layers_sum / m);
      ctx.report_metric("eplb.predicted_gpu_imbalance_final", final_layers_sum / m);
    }
  }

 private:
  struct State {
    std::unique_ptr<EplbRebalancer> rebalancer;
    std::unique_ptr<ExpertPlacement> initial;
    int64_t transfer_id = -1;
    std::optional<EplbPlan> pending;
  };

  void apply(PolicyContext& ctx, int32_t replica, State& s, const EplbPlan& plan) {
    if (!ctx.set_expert_placement(replica, *plan.target)) {
      ctx.count_action("eplb_apply_no_memory");
      return;
    }
    ctx.count_action("eplb_apply");
    if (!plan.drops.empty()) {
      ctx.count_action("eplb_expert_drop", static_cast<int64_t>(plan.drops.size()));
    }
    ++num_applied_;
  }

  EplbPolicyConfig config_;
  int32_t num_moe_layers_;
  int32_t num_groups_;
  double slot_weight_bytes_;
  std::map<int32_t, State> states_;
  int64_t num_applied_ = 0;
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
  const double bytes = expert_weight_bytes(card, *moe) * static_cast<double>(num_moe);
  return std::make_unique<EplbPolicy>(config, num_moe, num_groups, bytes);
}

}  // namespace moesim::sim
