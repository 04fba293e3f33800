// A policy view and actions for unit tests of policies: records actions, limits and metrics, has
// a settable clock and a fixed number of replicas; placement and transfers are not supported.
// Converts to the PolicyContext the hooks take.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "sim/serving/serving_policy.h"

namespace moesim::sim::testing {

class FakePolicyContext final : public PolicyView, public PolicyActions {
 public:
  explicit FakePolicyContext(int32_t num_replicas = 1, std::vector<std::string> pools = {"default"})
      : num_replicas_(num_replicas), pools_(std::move(pools)) {}
  FakePolicyContext(const FakePolicyContext&) = delete;
  FakePolicyContext& operator=(const FakePolicyContext&) = delete;
  operator PolicyContext&() { return ctx_; }  // NOLINT: the hooks' argument

  SimTime now() const override { return now_ns; }
  void count_action(const std::string& name, int64_t n = 1) override { actions[name] += n; }
  void schedule_timer(ServingPolicy* policy, SimTime delay_ns, int64_t tag) override {
    timers.emplace_back(delay_ns, tag);
  }
  std::vector<std::string> pool_names() const override { return pools_; }
  int64_t pool_outstanding(const std::string& pool) const override { return 0; }
  const LayerPlacements* placements(int32_t replica) const override { return nullptr; }
  int32_t num_replicas() const override { return num_replicas_; }
  int64_t start_weight_transfer(ServingPolicy*, int32_t, std::vector<double>) override {
    MOESIM_CHECK(false, "no transfers in FakePolicyContext");
    return -1;
  }
  bool add_expert_replica(int32_t, int32_t, int32_t, int32_t) override { return false; }
  void remove_expert_replica(int32_t, int32_t, int32_t, int32_t) override {}
  bool set_layer_placements(int32_t,
                            const std::vector<std::pair<int32_t, ExpertPlacement>>&) override {
    return false;
  }
  RoutingModel* routing_model(int32_t) override { return nullptr; }
  void replace_routed_experts(int32_t, const ModelCard&, const ExpertPlacement&,
                              RoutingModel*) override {
    MOESIM_CHECK(false, "no routed experts in FakePolicyContext");
  }
  void set_concurrency_limit(int32_t replica, int32_t max_seqs, int64_t max_step_tokens) override {
    limits[replica] = {max_seqs, max_step_tokens};
  }
  void report_metric(const std::string& name, double value) override { metrics[name] = value; }

  int64_t action(const std::string& name) const {
    auto it = actions.find(name);
    return it == actions.end() ? 0 : it->second;
  }

  SimTime now_ns = 0;
  std::map<std::string, int64_t> actions;
  std::map<int32_t, std::pair<int32_t, int64_t>> limits;
  std::map<std::string, double> metrics;
  std::vector<std::pair<SimTime, int64_t>> timers;

 private:
  int32_t num_replicas_;
  std::vector<std::string> pools_;
  PolicyContext ctx_{*this, *this};
};

}  // namespace moesim::sim::testing
