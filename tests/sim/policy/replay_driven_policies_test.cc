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

// Serves every replica with a replayed routing trace (hot_trace by default) from the start.
class ReplayRouting final : public ServingPolicy {
 public:
  explicit ReplayRouting(const Scenario& sc, const RoutingTrace* trace = nullptr)
      : sc_(sc), builder_(sc) {
    const RoutingShape shape = routing_shape_of(*sc.model);
    const int32_t num_src = sc.deployment.gpus_per_replica;
    for (int32_t r = 0; r < sc.deployment.num_replicas; ++r) {
      routing_.push_back(std::make_unique<ReplayRoutingModel>(
          trace ? *trace : hot_trace(shape, num_src), shape, num_src));
    }
    placement_ = builder_.static_placement();
  }
  std::string_view name() const override { return "replay_routing"; }
  void on_start(PolicyContext& ctx) override {
    for (int32_t r = 0; r < ctx.view.num_replicas(); ++r) {
      ctx.actions.replace_routed_experts(r, *sc_.model, *placement_, routing_[r].get());
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

RunOutput run_with(const Scenario& sc, bool replay, std::vector<double>* loads,
                   const RoutingTrace* trace = nullptr) {
  std::vector<std::unique_ptr<ServingPolicy>> policies;
  if (replay) policies.push_back(std::make_unique<ReplayRouting>(sc, trace));
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

// A recording of the synthetic routing itself (the replica's model, 64 steps of 4096 tokens per
// source) replayed: EPLB balances the same per-layer loads either way, so it applies the same
// rebalance and predicts the same balance within 2%.
TEST(ReplayDrivenPolicies, EplbBalancesAReplayedRecordingAsTheSyntheticRouting) {
  const Scenario sc = testing::tiny_scenario(R"(
[routing]
popularity = "zipf"
zipf_s = 0.8
[policies.eplb]
period_s = 0.3
ema_alpha = 0.5
)",
                                             "", 40);
  const RoutingShape shape = routing_shape_of(*sc.model);
  const int32_t num_src = sc.deployment.gpus_per_replica;
  ReplicaParts parts = ReplicaBuilder(sc).build(0, sc.run.seed);
  RoutingTrace trace;
  trace.file = "recorded_synthetic.jsonl";
  trace.header = RoutingTraceHeader{shape.num_moe_layers, shape.num_experts, num_src, shape.top_k};
  trace.num_steps = 64;
  const std::vector<int32_t> tokens(static_cast<size_t>(num_src), 4096);
  for (int64_t step = 0; step < trace.num_steps; ++step) {
    for (int32_t l = 0; l < shape.num_moe_layers; ++l) {
      RoutingQuery q;
      q.step_idx = step;
      q.moe_layer_idx = l;
      q.tokens_per_src = tokens;
      CountMatrix m;
      parts.routing->route(q, m);
      trace.counts.push_back(std::move(m));
    }
  }
  std::vector<double> synthetic_loads, replay_loads;
  const RunOutput synthetic = run_with(sc, false, &synthetic_loads);
  const RunOutput replay = run_with(sc, true, &replay_loads, &trace);
  ASSERT_TRUE(replay.conservation_ok) << replay.conservation_message;
  const auto& ms = synthetic.counters.policy_metrics;
  const auto& mr = replay.counters.policy_metrics;
  EXPECT_EQ(testing::action_count(replay, "eplb_apply"),
            testing::action_count(synthetic, "eplb_apply"));
  EXPECT_GE(testing::action_count(replay, "eplb_apply"), 1);
  EXPECT_NEAR(mr.at("eplb.predicted_gpu_balancedness_static"),
              ms.at("eplb.predicted_gpu_balancedness_static"),
              0.02 * ms.at("eplb.predicted_gpu_balancedness_static"));
  EXPECT_NEAR(mr.at("eplb.predicted_gpu_balancedness_final"),
              ms.at("eplb.predicted_gpu_balancedness_final"),
              0.02 * ms.at("eplb.predicted_gpu_balancedness_final"));
  EXPECT_GT(mr.at("eplb.predicted_gpu_balancedness_final"),
            mr.at("eplb.predicted_gpu_balancedness_static"));
}

}  // namespace
}  // namespace moesim::sim
