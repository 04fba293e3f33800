// The cluster as the policies see it (ClusterPolicyView: read-only) and act on it
// (ClusterPolicyActions: timers, action counters, weight transfers, expert replicas and
// placements with their memory, replacing a replica's routed experts through the replica
// builder). Internal to sim/serving: ClusterSim owns both and hands the policies a PolicyContext.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/simulation.h"
#include "sim/metrics/run_recorder.h"
#include "sim/serving/cluster_router.h"
#include "sim/serving/replica.h"
#include "sim/serving/replica_builder.h"
#include "sim/serving/serving_policy.h"

namespace moesim::sim::detail {

// What the policy view and actions work on. References must outlive them.
struct ClusterPolicyParts {
  Simulation& sim;
  RunRecorder& recorder;
  ClusterRouter& router;
  std::vector<Replica>& replicas;
  const ReplicaBuilder& builder;
  const ReplicaRunSetup& setup;
  const std::vector<std::unique_ptr<ServingPolicy>>& policies;
  EventKind timer_kind;                // its events call policies[id0]->on_timer(id1)
  std::function<void(Replica&)> wake;  // tries to start the replica's next step
};

class ClusterPolicyView final : public PolicyView {
 public:
  explicit ClusterPolicyView(const ClusterPolicyParts& parts) : p_(parts) {}
  SimTime now() const override { return p_.sim.now(); }
  std::vector<std::string> pool_names() const override { return p_.router.pool_names(); }
  int64_t pool_outstanding(const std::string& pool) const override {
    return p_.router.pool_outstanding(pool);
  }
  const LayerPlacements* placements(int32_t replica) const override {
    return p_.replicas[replica].placements();
  }
  int32_t num_replicas() const override { return static_cast<int32_t>(p_.replicas.size()); }

 private:
  const ClusterPolicyParts& p_;
};

class ClusterPolicyActions final : public PolicyActions {
 public:
  explicit ClusterPolicyActions(const ClusterPolicyParts& parts) : p_(parts) {}
  void count_action(const std::string& name, int64_t n = 1) override;
  void schedule_timer(ServingPolicy* policy, SimTime delay_ns, int64_t tag) override;
  int64_t start_weight_transfer(ServingPolicy* policy, int32_t replica,
                                std::vector<double> bytes) override;
  bool add_expert_replica(int32_t replica, int32_t moe_layer_idx, int32_t expert,
                          int32_t gpu_idx) override;
  void remove_expert_replica(int32_t replica, int32_t moe_layer_idx, int32_t expert,
                             int32_t gpu_idx) override;
  bool set_layer_placements(
      int32_t replica, const std::vector<std::pair<int32_t, ExpertPlacement>>& layers) override;
  RoutingModel* routing_model(int32_t replica) override {
    return p_.replicas[replica].parts.routing.get();
  }
  void replace_routed_experts(int32_t replica, const ModelCard& card,
                              const ExpertPlacement& placement, RoutingModel* routing) override;
  void set_concurrency_limit(int32_t replica, int32_t max_seqs, int64_t max_step_tokens) override {
    p_.replicas[replica].scheduler->set_limits(max_seqs, max_step_tokens);
  }
  void report_metric(const std::string& name, double value) override {
    p_.recorder.counters().policy_metrics[name] = value;
  }

 private:
  // Takes or returns KV blocks so that every rank of `r` holds its GPUs' routed-expert slots
  // beyond the layout's (the most of any of its GPUs); false, changing nothing, when a rank lacks
  // the blocks.
  bool settle_expert_memory(Replica& r);

  const ClusterPolicyParts& p_;
  int64_t next_transfer_id_ = 0;
};

}  // namespace moesim::sim::detail
