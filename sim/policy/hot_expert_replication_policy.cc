#include "sim/policy/hot_expert_replication_policy.h"

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
      }
      if (plan.additions.empty()) continue;
      s.pending = plan;
      s.transfer_id = ctx.start_weight_transfer(this, r, s.planner->transfer_traffic(plan));
    }
    ctx.schedule_timer(this, from_seconds(config_.period_s), tag + 1);
  }

  void on_transfer_done(PolicyContext& ctx, int64_t transfer_id) override {
    for (auto& [r, s] : states_) {
      if (s.transfer_id != transfer_id) continue;
      for (const ReplicaAddition& a : s.pending.additions) {
        if (!ctx.add_expert_replica(r, a.expert_idx, a.dst_gpu_idx)) {
          ctx.count_action("replica_add_no_memory");
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
  };
  HotExpertReplicationConfig config_;
  double replica_weight_bytes_;
  std::map<int32_t, State> states_;
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
