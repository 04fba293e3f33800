#include "sim/policy/hot_expert_replication_policy.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/placement/expert_placement.h"
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
    for (int32_t r = 0; r < ctx.num_replicas(); ++r) {
      const ExpertPlacement* p = ctx.placement(r);
      if (!p) continue;
      State s;
      s.planner = std::make_unique<HotExpertReplication>(config_, *p, replica_weight_bytes_);
      s.window.emplace(s.planner->make_window());
      states_.emplace(r, std::move(s));
    }
    if (!states_.empty()) ctx.schedule_timer(this, from_seconds(config_.period_s), 0);
  }

  void on_expert_loads(PolicyContext& ctx, int32_t replica, int32_t moe_layer_idx,
                       std::span<const double> selections) override {
    auto it = states_.find(replica);
    if (it != states_.end()) it->second.window->add(ctx.now(), selections);
  }

  void on_timer(PolicyContext& ctx, int64_t tag) override {
    for (auto& [r, s] : states_) {
      if (s.transfer_id >= 0) {
        ctx.count_action("replication_skip_busy");
        continue;
      }
      ctx.count_action("replication_refresh");
      ReplicationPlan plan = s.planner->plan(s.window->loads(ctx.now()), *ctx.placement(r));
      for (const ReplicaRemoval& rm : plan.removals) {
        ctx.remove_expert_replica(r, rm.expert_idx, rm.gpu_idx);
        s.replicas_on_gpu[rm.gpu_idx]--;
      }
      if (plan.additions.empty()) continue;
      s.pending = plan;
      std::vector<double> traffic = s.planner->transfer_traffic(plan);
      for (double b : traffic) weight_bytes_copied_ += b;
      s.transfer_id = ctx.start_weight_transfer(this, r, std::move(traffic));
    }
    ctx.schedule_timer(this, from_seconds(config_.period_s), tag + 1);
  }

  // What the policy cost: weight bytes sent by its transfers, and HBM its replicas hold at the end
  // (per GPU of the replicas it manages: the most and the mean).
  void on_finish(PolicyContext& ctx) override {
    int32_t max_replicas = 0, gpus = 0;
    int64_t total_replicas = 0;
    for (const auto& [r, s] : states_) {
      gpus += ctx.placement(r)->num_gpus();
      for (const auto& [gpu, n] : s.replicas_on_gpu) {
        max_replicas = std::max(max_replicas, n);
        total_replicas += n;
      }
    }
    ctx.report_metric("hot_expert_replication.weight_bytes_copied", weight_bytes_copied_);
    ctx.report_metric("hot_expert_replication.replica_hbm_bytes_max_gpu",
                      max_replicas * replica_weight_bytes_);
    ctx.report_metric(
        "hot_expert_replication.replica_hbm_bytes_mean_gpu",
        gpus > 0 ? static_cast<double>(total_replicas) * replica_weight_bytes_ / gpus : 0.0);
  }

  void on_transfer_done(PolicyContext& ctx, int64_t transfer_id) override {
    for (auto& [r, s] : states_) {
      if (s.transfer_id != transfer_id) continue;
      for (const ReplicaAddition& a : s.pending.additions) {
        if (!ctx.add_expert_replica(r, a.expert_idx, a.dst_gpu_idx)) {
          ctx.count_action("replica_add_no_memory");
        } else {
          s.replicas_on_gpu[a.dst_gpu_idx]++;
        }
      }
      s.transfer_id = -1;
      s.pending = ReplicationPlan{};
    }
  }

 private:
  struct State {
    std::unique_ptr<HotExpertReplication> planner;
    std::optional<ExpertLoadWindow> window;
    int64_t transfer_id = -1;
    ReplicationPlan pending;
    std::map<int32_t, int32_t> replicas_on_gpu;  // replica-local GPU -> replicas added, held
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
  double bytes = expert_weight_bytes(card, *moe) * static_cast<double>(num_moe_layers(card));
  return std::make_unique<HotExpertReplicationPolicy>(config, bytes);
}

}  // namespace moesim::sim
