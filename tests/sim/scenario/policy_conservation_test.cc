// Whole runs with the policies that change what the serving loop holds:
// - conservation with requests held outside every replica: a session rebuild's summary delays
//   the next turn's admission, and a run that ends inside that delay still counts the turn in
//   flight (once). Regression: the check compared in-flight requests with the replicas'
//   holdings only and reported a broken conservation for these runs;
// - step traces of runs whose expert placement changes (replication, EPLB): every routing entry
//   goes to a GPU that holds the expert under the placement in force (the header's, then the
//   replica's placement records), and no source sends an expert more selections than it has
//   tokens, summed over the expert's replicas. Regression: the recorder capped per destination
//   and wrote one destination per expert, and the trace carried no placement changes, so the
//   engine refused these traces.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "sim/policy/policy_registry.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/cluster.h"

namespace moesim::sim {
namespace {

TEST(PolicyConservationTest, RequestsInAnAdmissionDelayAreCountedInFlight) {
  Scenario sc = load_scenario(MOESIM_SOURCE_DIR "/scenarios/policies/session_coupling.toml");
  // 30 s ends while rebuilt sessions wait out their summaries' generation delay.
  sc.run.duration_s = 30.0;
  RunOutput out = run_scenario(sc, {}, 1, make_policies(sc));
  EXPECT_TRUE(out.conservation_ok) << out.conservation_message;
  EXPECT_GT(out.summary.num_in_flight, 0);
  EXPECT_GT(out.counters.actions.count("coupling_fuse"), 0u)
      << "the scenario no longer rebuilds sessions; the test needs another duration";
}

void check_recorded_placements(const std::string& scenario) {
  Scenario sc = load_scenario(MOESIM_SOURCE_DIR "/scenarios/policies/" + scenario);
  sc.run.duration_s = 30.0;  // long enough for the policy to move experts
  RunOptions opt;
  opt.record_steps = true;
  opt.record_max_steps = 1'000'000;
  RunOutput out = run_scenario(sc, opt, 1, make_policies(sc));
  ASSERT_TRUE(out.conservation_ok) << out.conservation_message;
  ASSERT_FALSE(out.placement_changes.empty()) << scenario << ": no placement change recorded";
  ASSERT_FALSE(out.expert_gpus.empty());
  std::map<int32_t, int32_t> moe_of_layer;  // model layer -> MoE layer
  for (size_t i = 0; i < sc.model->layers.size(); ++i) {
    if (sc.model->layers[i].ffn.is_moe) {
      const auto next = static_cast<int32_t>(moe_of_layer.size());
      moe_of_layer[static_cast<int32_t>(i)] = next;
    }
  }
  // replica -> MoE layer -> expert -> GPUs
  std::map<int32_t, std::vector<ExpertGpus>> in_force;
  size_t next_change = 0;
  int64_t checked = 0, per_layer_changes = 0;
  for (const StepRecord& s : out.steps) {
    if (!in_force.count(s.replica))
      in_force[s.replica].assign(moe_of_layer.size(), out.expert_gpus);
    std::vector<ExpertGpus>& layers = in_force[s.replica];
    while (next_change < out.placement_changes.size() &&
           out.placement_changes[next_change].replica == s.replica &&
           out.placement_changes[next_change].step == s.step) {
      const PlacementChange& c = out.placement_changes[next_change++];
      if (c.moe_layer < 0) {
        layers.assign(layers.size(), c.expert_gpus);
      } else {
        layers.at(static_cast<size_t>(c.moe_layer)) = c.expert_gpus;
        ++per_layer_changes;
      }
    }
    std::map<int32_t, int64_t> tokens_of_gpu;
    for (const StepRecord::Seq& q : s.seqs) tokens_of_gpu[q.gpu] += q.new_tokens;
    for (const StepRecord::Layer& l : s.layers) {
      const ExpertGpus& placement = layers.at(static_cast<size_t>(moe_of_layer.at(l.layer)));
      std::map<std::pair<int64_t, int64_t>, int64_t> per_src_expert;
      for (const auto& [src, expert, dst, count] : l.routing) {
        const auto& gpus = placement.at(static_cast<size_t>(expert));
        ASSERT_NE(std::find(gpus.begin(), gpus.end(), static_cast<int32_t>(dst)), gpus.end())
            << scenario << " step " << s.step << ": GPU " << dst << " holds no replica of expert "
            << expert;
        per_src_expert[{src, expert}] += count;
        ++checked;
      }
      for (const auto& [key, count] : per_src_expert) {
        ASSERT_LE(count, tokens_of_gpu[static_cast<int32_t>(key.first)])
            << scenario << " step " << s.step << ": GPU " << key.first << " picks expert "
            << key.second << " more often than it has tokens";
      }
    }
  }
  EXPECT_EQ(next_change, out.placement_changes.size()) << "a placement change matched no step";
  EXPECT_GT(checked, 0);
  EXPECT_GT(per_layer_changes, 0) << scenario << ": the policy places MoE layers separately";
}

TEST(PolicyStepTraceTest, HotExpertReplicationRecordsItsPlacements) {
  check_recorded_placements("hot_expert_replication.toml");
}

// The replication policy reports what it cost: the bytes it copied cover the replicas it holds
// at the end (8 GPUs), and the busiest GPU holds at least the mean.
TEST(PolicyMetricsTest, HotExpertReplicationReportsCopiesAndHbm) {
  Scenario sc = load_scenario(MOESIM_SOURCE_DIR "/scenarios/policies/hot_expert_replication.toml");
  RunOutput out = run_scenario(sc, {}, 1, make_policies(sc));
  const auto& m = out.counters.policy_metrics;
  ASSERT_TRUE(m.count("hot_expert_replication.weight_bytes_copied"));
  const double copied = m.at("hot_expert_replication.weight_bytes_copied");
  const double mean = m.at("hot_expert_replication.replica_hbm_bytes_mean_gpu");
  const double max = m.at("hot_expert_replication.replica_hbm_bytes_max_gpu");
  EXPECT_GT(mean, 0);
  EXPECT_GE(max, mean);
  EXPECT_GE(copied, mean * 8 * (1 - 1e-12));
}

TEST(PolicyStepTraceTest, EplbRecordsItsPlacements) { check_recorded_placements("eplb.toml"); }

}  // namespace
}  // namespace moesim::sim
