#include "sim/policy/hot_expert_replication_policy.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/placement/expert_placement.h"
#include "sim/placement/layer_placements.h"
#include "sim/policy/hot_expert_replication.h"

namespace moesim::sim {
namespace {

class HotExpertReplicationPolicy final : public ServingPolicy {
 public:
  HotExpertReplicationPolicy(HotExpertReplicationConfig config, double replica_weight_bytes)
      : config_(config), replica_weight_bytes_(replica_weight_bytes) {}

  std::string_view name() const override { return "hot_expert_replication"; }
  bool wants_expert_loads() const override { return true; }

  void on_start(PolicyContext& ctx) override {
    for (int32_t r = 0; r < ctx.view.num_replicas(); ++r) {
      const LayerPlacements* p = ctx.view.placements(r);
      if (!p) continue;
      State s;
      for (int32_t l = 0; l < p->num_layers(); ++l) {
        s.layers.push_back(
            std::make_unique<HotExpertReplication>(config_, p->layer(l), replica_weight_bytes_));
        s.windows.push_back(s.layers.back()->make_window());
      }
      states_.emplace(r, std::move(s));
    }
    if (!states_.empty()) ctx.actions.schedule_timer(this, from_seconds(config_.period_s), 0);
  }

  void on_expert_loads(PolicyContext& ctx, int32_t replica, int32_t moe_layer_idx,
                       std::span<const double> selections) override {
    auto it = states_.find(replica);
    if (it != states_.end()) it->second.windows[moe_layer_idx].add(ctx.view.now(), selections);
  }

  // Every period: each MoE layer's hot set from that layer's window, its replicas in that layer.
  void on_timer(PolicyContext& ctx, int64_t tag) override {
    for (auto& [r, s] : states_) {
      if (s.transfer_id >= 0) {
        ctx.actions.count_action("replication_skip_busy");
        continue;
      }
      ctx.actions.count_action("replication_refresh");
      const LayerPlacements& current = *ctx.view.placements(r);
      std::vector<Addition> additions;
      std::vector<double> traffic;
      for (int32_t l = 0; l < current.num_layers(); ++l) {
        const ReplicationPlan plan =
            s.layers[l]->plan(s.windows[l].loads(ctx.view.now()), current.layer(l));
        for (const ReplicaRemoval& rm : plan.removals) {
          ctx.actions.remove_expert_replica(r, l, rm.expert_idx, rm.gpu_idx);
          s.replicas_on_gpu[rm.gpu_idx]--;
        }
        if (plan.additions.empty()) continue;
        const std::vector<double> t = s.layers[l]->transfer_traffic(plan);
        if (traffic.empty()) traffic.assign(t.size(), 0.0);
        for (size_t i = 0; i < t.size(); ++i) traffic[i] += t[i];
        for (const ReplicaAddition& a : plan.additions) additions.push_back(Addition{l, a});
      }
      if (additions.empty()) continue;
      for (double b : traffic) weight_bytes_copied_ += b;
      s.pending = std::move(additions);
      s.transfer_id = ctx.actions.start_weight_transfer(this, r, std::move(traffic));
    }
    ctx.actions.schedule_timer(this, from_seconds(config_.period_s), tag + 1);
  }

  // What the policy cost: weight bytes sent by its transfers, and HBM its replicas hold at the end
  // (per GPU of the replicas it manages: the most and the mean).
  void on_finish(PolicyContext& ctx) override {
    int32_t max_replicas = 0, gpus = 0;
    int64_t total_replicas = 0;
    for (const auto& [r, s] : states_) {
      gpus += ctx.view.placements(r)->num_gpus();
      for (const auto& [gpu, n] : s.replicas_on_gpu) {
        max_replicas = std::max(max_replicas, n);
        total_replicas += n;
      }
    }
    ctx.actions.report_metric("hot_expert_replication.weight_bytes_copied", weight_bytes_copied_);
    ctx.actions.report_metric("hot_expert_replication.replica_hbm_bytes_max_gpu",
                              max_replicas * replica_weight_bytes_);
    ctx.actions.report_metric(
        "hot_expert_replication.replica_hbm_bytes_mean_gpu",
        gpus > 0 ? static_cast<double>(total_replicas) * replica_weight_bytes_ / gpus : 0.0);
  }

  void on_transfer_done(PolicyContext& ctx, int64_t transfer_id) override {
    for (auto& [r, s] : states_) {
      if (s.transfer_id != transfer_id) continue;
      for (const Addition& a : s.pending) {
        if (!ctx.actions.add_expert_replica(r, a.moe_layer_idx, a.add.expert_idx,
                                            a.add.dst_gpu_idx)) {
          ctx.actions.count_action("replica_add_no_memory");
        } else {
          s.replicas_on_gpu[a.add.dst_gpu_idx]++;
        }
      }
      s.transfer_id = -1;
      s.pending.clear();
    }
  }

 private:
  struct Addition {
    int32_t moe_layer_idx = 0;
    ReplicaAddition add;
  };
  struct State {
    std::vector<std::unique_ptr<HotExpertReplication>> layers;  // per MoE layer
    std::vector<ExpertLoadWindow> windows;                      // per MoE layer
    int64_t transfer_id = -1;
    std::vector<Addition> pending;
    std::map<int32_t, int32_t> replicas_on_gpu;  // replica-local GPU -> replicas added, all layers
  };
  HotExpertReplicationConfig config_;
  double replica_weight_bytes_;
  std::map<int32_t, State> states_;
  double weight_bytes_copied_ = 0;
};

}  // namespace

std::unique_ptr<ServingPolicy> make_hot_expert_replication_policy(TomlTable& table,
                                                                  const Scenario& scenario) {
  HotExpertReplicationConfig config = parse_hot_expert_replication_config(table);
  const ModelCard& card = *scenario.model;
  const MoeSpec* moe = nullptr;
  for (const LayerSpec& l : card.layers) {
    if (l.ffn.is_moe) {
      moe = &l.ffn.moe;
      break;
    }
  }
  if (!moe) table.fail_table("hot_expert_replication needs a model with MoE layers");
  return std::make_unique<HotExpertReplicationPolicy>(config, expert_weight_bytes(card, *moe));
}

}  // namespace moesim::sim
