// Load-driven policies take expert loads from the step result, not from a concrete routing
// class: a replayed routing trace (ReplayRoutingModel) drives them as synthetic routing does.
// The replay's recording sends every token to experts 0 .. top_k - 1, so those are the only
// loaded experts, and hot-expert replication copies them.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "sim/policy/policy_registry.h"
#include "sim/routing/replay_routing.h"
#include "sim/serving/replica_builder.h"
#include "tests/sim/policy/policy_test_util.h"

namespace moesim::sim {
namespace {

constexpr int32_t kTokensPerSource = 8;

// One recorded step: every source's tokens pick experts 0 .. top_k - 1 in every MoE layer.
RoutingTrace hot_trace(const RoutingShape& shape, int32_t num_src) {
  RoutingTrace t;
  t.file = "hot_trace.jsonl";
  t.header = RoutingTraceHeader{shape.num_moe_layers, shape.num_experts, num_src, shape.top_k};
  t.num_steps = 1;
  for (int32_t l = 0; l < shape.num_moe_layers; ++l) {
    CountMatrix m(num_src, shape.num_experts);
    for (int32_t s = 0; s < num_src; ++s) {
      for (int32_t e = 0; e < shape.top_k; ++e) m.at(s, e) = kTokensPerSource;
    }
    t.counts.push_back(std::move(m));
  }
  return t;
}

// Serves every replica with the replayed routing from the start.
class ReplayRouting final : public ServingPolicy {
 public:
  explicit ReplayRouting(const Scenario& sc) : sc_(sc), builder_(sc) {
    const RoutingShape shape = routing_shape_of(*sc.model);
    for (int32_t r = 0; r < sc.deployment.num_replicas; ++r) {
      routing_.push_back(std::make_unique<ReplayRoutingModel>(
          hot_trace(shape, sc.deployment.gpus_per_replica), shape, sc.deployment.gpus_per_replica));
    }
    placement_ = builder_.static_placement();
  }
  std::string_view name() const override { return "replay_routing"; }
  void on_start(PolicyContext& ctx) override {
    for (int32_t r = 0; r < ctx.num_replicas(); ++r) {
      ctx.replace_routed_experts(r, *sc_.model, *placement_, routing_[r].get());
    }
  }

 private:
  const Scenario& sc_;
  ReplicaBuilder builder_;
  std::unique_ptr<ExpertPlacement> placement_;
  std::vector<std::unique_ptr<RoutingModel>> routing_;
};

// Sums the loads it is given per expert (replica 0, MoE layer 0).
class LoadSpy final : public ServingPolicy {
 public:
  explicit LoadSpy(std::vector<double>* totals) : totals_(totals) {}
  std::string_view name() const override { return "load_spy"; }
  bool wants_expert_loads() const override { return true; }
  void on_expert_loads(PolicyContext&, int32_t replica, int32_t moe_layer_idx,
                       std::span<const double> selections) override {
    if (replica != 0 || moe_layer_idx != 0) return;
    totals_->resize(selections.size(), 0.0);
    for (size_t e = 0; e < selections.size(); ++e) (*totals_)[e] += selections[e];
  }

 private:
  std::vector<double>* totals_;
};

const char* kReplication = R"(
[routing]
popularity = "uniform"
[policies.hot_expert_replication]
window_s = 0.2
top_fraction = 0.25
target = "k_gpus"
k = 1
period_s = 0.2
max_extra_slots_per_gpu = 4
)";

RunOutput run_with(const Scenario& sc, bool replay, std::vector<double>* loads) {
  std::vector<std::unique_ptr<ServingPolicy>> policies;
  if (replay) policies.push_back(std::make_unique<ReplayRouting>(sc));
  policies.push_back(std::make_unique<LoadSpy>(loads));
  for (auto& p : make_policies(sc)) policies.push_back(std::move(p));
  return run_scenario(sc, RunOptions{}, -1, std::move(policies));
}

TEST(ReplayDrivenPolicies, LoadsFollowTheReplayedRouting) {
  const Scenario sc = testing::tiny_scenario(kReplication);
  const int32_t top_k = routing_shape_of(*sc.model).top_k;
  std::vector<double> loads;
  const RunOutput out = run_with(sc, true, &loads);
  ASSERT_FALSE(loads.empty());
  double hot = 0, cold = 0;
  for (size_t e = 0; e < loads.size(); ++e)
    (static_cast<int32_t>(e) < top_k ? hot : cold) += loads[e];
  EXPECT_GT(hot, 0);
  EXPECT_EQ(cold, 0);
  // Each of the hot experts gets one selection per token: equal loads.
  for (int32_t e = 1; e < top_k; ++e) EXPECT_DOUBLE_EQ(loads[e], loads[0]);
  // Replication reacts to the replayed hot set.
  EXPECT_GT(out.counters.actions.count("expert_replica_add"), 0u);
  EXPECT_TRUE(out.conservation_ok) << out.conservation_message;
}

TEST(ReplayDrivenPolicies, SyntheticRoutingSpreadsTheSameLoads) {
  const Scenario sc = testing::tiny_scenario(kReplication);
  std::vector<double> loads;
  run_with(sc, false, &loads);
  ASSERT_FALSE(loads.empty());
  int32_t loaded = 0;
  for (double l : loads) loaded += l > 0 ? 1 : 0;
  EXPECT_EQ(loaded, static_cast<int32_t>(loads.size()));  // uniform: every expert is loaded
}

}  // namespace
}  // namespace moesim::sim
