// The eplb policy in the serving loop: configuration errors with key paths, rebalances that copy
// weights and apply the new placement, HBM charged for the redundant slots, and actions in the
// summary and the trace.
#include "sim/policy/eplb_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/config/config_error.h"
#include "sim/model/model_card.h"
#include "tests/sim/policy/policy_test_util.h"

namespace moesim::sim {
namespace {

using testing::action_count;
using testing::tiny_scenario;

// Skewed routing so that balancing has something to do.
const char kSkew[] = "\n[routing]\npopularity = \"zipf\"\nzipf_s = 1.5\n";

std::string key_path_of_error(const std::string& table) {
  return testing::policy_config_error(kSkew + std::string("\n[policies.eplb]\n") + table);
}

TEST(EplbPolicy, BadConfigNamesTheKey) {
  EXPECT_EQ(key_path_of_error("period_s = 1\n"), "");
  EXPECT_EQ(key_path_of_error("perod_s = 1\n").rfind("policies.eplb.perod_s: unknown key", 0), 0u)
      << key_path_of_error("perod_s = 1\n");
  EXPECT_EQ(key_path_of_error("ema_alpha = 1.5\n").rfind("policies.eplb.ema_alpha", 0), 0u);
  EXPECT_EQ(key_path_of_error("min_imbalance_gain = -0.1\n").rfind("policies.eplb.min_imb", 0), 0u);
  // 16 experts + 3 slots do not divide over 4 GPUs.
  EXPECT_EQ(key_path_of_error("redundant_slots = 3\n").rfind("policies.eplb.redundant_slots", 0),
            0u);
  // One node per replica: no hierarchical variant.
  EXPECT_EQ(key_path_of_error("variant = \"hierarchical\"\n").rfind("policies.eplb.variant", 0),
            0u);
  EXPECT_EQ(key_path_of_error("average = \"median\"\n").rfind("policies.eplb.average", 0), 0u);
  // Two policies that both own the placement.
  const std::string both = key_path_of_error("\n[policies.hot_expert_replication]\n");
  EXPECT_NE(both.find("cannot be combined"), std::string::npos) << both;
}

RunOutput run(const std::string& extra) {
  const Scenario sc = tiny_scenario(kSkew + extra, "", 40);
  return run_scenario(sc, RunOptions{}, -1, make_policies(sc));
}

TEST(EplbPolicy, RebalancesCopiesWeightsAndAppliesThePlacement) {
  const RunOutput out = run("\n[policies.eplb]\nperiod_s = 0.3\nema_alpha = 0.5\n");
  ASSERT_TRUE(out.conservation_ok) << out.conservation_message;
  EXPECT_GE(action_count(out, "eplb_rebalance"), 2);
  EXPECT_GE(action_count(out, "weight_transfer_start"), 2);  // one per replica at least
  EXPECT_EQ(action_count(out, "eplb_expert_copy"),
            out.counters.policy_metrics.at("eplb.expert_copies"));
  // Copies ride along with steps: a replica that goes idle before its copy lands applies later
  // (or never), and skips rebalances meanwhile.
  EXPECT_GE(action_count(out, "eplb_apply"), 1);
  EXPECT_EQ(action_count(out, "expert_placement_set"), action_count(out, "eplb_apply"));
  EXPECT_GE(action_count(out, "eplb_unchanged"), 1);  // alignment: same loads, nothing moves
  EXPECT_EQ(action_count(out, "eplb_apply_no_memory"), 0);
  EXPECT_EQ(out.counters.policy_metrics.at("eplb.rebalances_applied"),
            static_cast<double>(action_count(out, "eplb_apply")));
  // The predicted imbalance of the final placement is below the static one.
  EXPECT_LT(out.counters.policy_metrics.at("eplb.predicted_imbalance_final"),
            out.counters.policy_metrics.at("eplb.predicted_imbalance_static"));
  // Actions are marked in the trace.
  EXPECT_TRUE(std::any_of(out.trace.begin(), out.trace.end(),
                          [](const TraceSlice& s) { return s.name == "policy:eplb_apply"; }));
  // Deterministic.
  EXPECT_EQ(run("\n[policies.eplb]\nperiod_s = 0.3\nema_alpha = 0.5\n").digest, out.digest);
}

TEST(EplbPolicy, LowersMeasuredExpertImbalance) {
  const RunOutput without = run("");
  const RunOutput with = run("\n[policies.eplb]\nperiod_s = 0.2\nema_alpha = 0.5\n");
  EXPECT_LT(with.summary.expert_imbalance, without.summary.expert_imbalance);
}

// Expert weights of one slot (all MoE layers) in KV blocks of the tiny scenario.
int64_t slot_blocks(const RunOutput& out) {
  const Scenario sc = tiny_scenario("");
  const ModelCard& card = *sc.model;
  const MoeSpec* moe = nullptr;
  for (const LayerSpec& l : card.layers) {
    if (l.ffn.is_moe && !moe) moe = &l.ffn.moe;
  }
  const double bytes = expert_weight_bytes(card, *moe) * static_cast<double>(num_moe_layers(card));
  return static_cast<int64_t>(std::ceil(bytes / out.gpus[0].kv_block_bytes));
}

TEST(EplbPolicy, RedundantSlotsAreChargedToTheKvPool) {
  // Roomy HBM: the redundant slot (one per GPU) is taken from the KV pool and shows in the
  // high-water mark of every GPU's pool.
  const RunOutput roomy = run("\n[policies.eplb]\nperiod_s = 0.3\n");
  ASSERT_GE(action_count(roomy, "eplb_apply"), 1);
  const int64_t blocks = slot_blocks(roomy);
  int64_t charged_gpus = 0;
  for (const GpuRecord& g : roomy.gpus) charged_gpus += g.kv_high_water_blocks >= blocks ? 1 : 0;
  EXPECT_GE(charged_gpus, 4 * action_count(roomy, "eplb_apply"));  // 4 GPUs per replica

  // A pool smaller than one slot: the placement is never applied (and counted as such).
  const GpuRecord& g0 = roomy.gpus[0];
  const int64_t keep_blocks = blocks - 1;
  ASSERT_GT(keep_blocks, 12);  // room for a request or two
  const double workspace_gib =
      1.0 + static_cast<double>(g0.num_kv_blocks - keep_blocks) * g0.kv_block_bytes / 1073741824.0;
  Scenario sc = tiny_scenario(kSkew + std::string("\n[policies.eplb]\nperiod_s = 0.3\n"), "", 40);
  sc.scheduler.workspace_gib = workspace_gib;
  const RunOutput tight = run_scenario(sc, RunOptions{}, -1, make_policies(sc));
  ASSERT_LT(tight.gpus[0].num_kv_blocks, blocks);
  EXPECT_GE(action_count(tight, "eplb_apply_no_memory"), 1);
  EXPECT_EQ(action_count(tight, "eplb_apply"), 0);
  EXPECT_EQ(action_count(tight, "expert_placement_set"), 0);
}

TEST(EplbPolicy, ShippedScenarioLowersStepTime) {
  Scenario sc = load_scenario(MOESIM_SOURCE_DIR "/scenarios/policies/eplb.toml");
  // The first rebalance copies most experts (about 0.5 TB over NVLink, slowing steps while it
  // travels); over the scenario's 30 s the balanced steps more than pay for it.
  const RunOutput with = run_scenario(sc, RunOptions{}, -1, make_policies(sc));
  sc.policies.clear();
  const RunOutput without = run_scenario(sc, RunOptions{}, -1, {});
  ASSERT_TRUE(with.conservation_ok) << with.conservation_message;
  EXPECT_GE(action_count(with, "eplb_apply"), 1);
  EXPECT_LT(with.summary.expert_imbalance, without.summary.expert_imbalance);
  EXPECT_LT(with.summary.tpot_ms.p50, without.summary.tpot_ms.p50);
  EXPECT_LT(with.summary.tpot_ms.p99, without.summary.tpot_ms.p99);
  EXPECT_LT(with.summary.ttft_ms.p50, without.summary.ttft_ms.p50);
}

}  // namespace
}  // namespace moesim::sim
