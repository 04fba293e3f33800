// Expert pruning applied in a run: the plan frees weight memory (a larger KV pool), tokens of
// pruned experts are re-routed, and the routing mass lost is reported; bad tables are errors.
#include "sim/policy/expert_pruning_policy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "sim/config/config_error.h"
#include "sim/policy/pruning_plan.h"
#include "sim/study/pruning_study.h"
#include "tests/sim/policy/policy_test_util.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim {
namespace {

using study::PruningStudy;
using study::PruningStudyOptions;
using study::run_pruning_study;
using testing::action_count;
using testing::tiny_scenario;

const char kSkew[] = "\n[routing]\npopularity = \"zipf\"\nzipf_s = 1.2\n";

std::string error_of(const std::string& table) {
  return testing::policy_config_error(kSkew + std::string("\n[policies.expert_pruning]\n") + table);
}

RunOutput run(const std::string& extra) {
  const Scenario sc = tiny_scenario(kSkew + extra);
  return run_scenario(sc, RunOptions{}, -1, make_policies(sc));
}

TEST(ExpertPruningPolicy, BadConfigNamesTheKey) {
  EXPECT_EQ(error_of("fraction = 0.25\n"), "");
  EXPECT_EQ(error_of("fracton = 0.25\n").rfind("policies.expert_pruning.fracton: unknown key", 0),
            0u);
  EXPECT_EQ(error_of("fraction = 1.0\n").rfind("policies.expert_pruning.fraction", 0), 0u);
  // 16 experts, top_k 2: pruning 15 leaves one.
  const std::string too_many = error_of("fraction = 0.95\n");
  EXPECT_EQ(too_many.rfind("policies.expert_pruning.fraction", 0), 0u) << too_many;
  EXPECT_NE(too_many.find("top_k"), std::string::npos) << too_many;
  EXPECT_EQ(error_of("profile_steps = 0\n").rfind("policies.expert_pruning.profile_steps", 0), 0u);
  const std::string both = error_of("\n[policies.eplb]\n");
  EXPECT_NE(both.find("cannot be combined"), std::string::npos) << both;
}

TEST(ExpertPruningPolicy, FreesWeightsReroutesAndReportsMassLost) {
  const RunOutput base = run("");
  const RunOutput pruned = run("\n[policies.expert_pruning]\nfraction = 0.25\n");
  ASSERT_TRUE(pruned.conservation_ok) << pruned.conservation_message;
  const auto& m = pruned.counters.policy_metrics;
  EXPECT_EQ(m.at("expert_pruning.experts_pruned_per_layer"), 4.0);
  EXPECT_EQ(m.at("expert_pruning.experts_kept_per_layer"), 12.0);
  EXPECT_EQ(m.at("expert_pruning.expert_slots_per_gpu_before"), 4.0);  // 16 experts on 4 GPUs
  EXPECT_EQ(m.at("expert_pruning.expert_slots_per_gpu_after"), 3.0);
  EXPECT_GT(m.at("expert_pruning.weight_bytes_freed_per_gpu"), 0.0);
  // The least-activated quarter carries some, but little, routing mass.
  for (const char* k : {"expert_pruning.mass_lost_held_out", "expert_pruning.mass_lost_served"}) {
    EXPECT_GT(m.at(k), 0.0) << k;
    EXPECT_LT(m.at(k), 0.25) << k;
  }
  EXPECT_GT(m.at("expert_pruning.tokens_rerouted_held_out"),
            m.at("expert_pruning.mass_lost_held_out"));
  // Freed weights: less weight memory, a larger KV pool, on every GPU.
  ASSERT_EQ(pruned.gpus.size(), base.gpus.size());
  for (size_t g = 0; g < base.gpus.size(); ++g) {
    EXPECT_NEAR(base.gpus[g].weight_bytes - pruned.gpus[g].weight_bytes,
                m.at("expert_pruning.weight_bytes_freed_per_gpu"),
                0.01 * m.at("expert_pruning.weight_bytes_freed_per_gpu") + 1e6);
    EXPECT_GT(pruned.gpus[g].num_kv_blocks, base.gpus[g].num_kv_blocks);
  }
  EXPECT_EQ(action_count(pruned, "expert_pruning_apply"), 2);  // both replicas
  EXPECT_EQ(action_count(pruned, "routed_experts_replaced"), 2);
  EXPECT_EQ(action_count(pruned, "experts_pruned"), 4 * 3);  // 4 per layer, 3 MoE layers
  // Routing served by 12 experts per layer: the placement the run reports has 12.
  EXPECT_EQ(pruned.expert_gpus.size(), 12u);
  // Deterministic.
  EXPECT_EQ(run("\n[policies.expert_pruning]\nfraction = 0.25\n").digest, pruned.digest);
}

TEST(ExpertPruningPolicy, ZeroFractionLosesNoMass) {
  const RunOutput out = run("\n[policies.expert_pruning]\nfraction = 0\n");
  EXPECT_EQ(out.counters.policy_metrics.at("expert_pruning.mass_lost_served"), 0.0);
  EXPECT_EQ(out.counters.policy_metrics.at("expert_pruning.weight_bytes_freed_per_gpu"), 0.0);
}

// Writes the plan `moesim prune --write-plan` makes for 25% of tiny_scenario(kSkew) to a
// temporary file named `name`; returns its path.
std::string write_study_plan(const std::string& name) {
  PruningStudyOptions opt;
  opt.fractions = {0.25};
  opt.batch_per_gpu = 4;
  opt.num_timed_steps = 1;
  const PruningStudy study = run_pruning_study(tiny_scenario(kSkew), opt);
  EXPECT_EQ(study.plans.size(), 1u);
  const std::string path = scratch::path(name);
  std::ofstream f(path);
  f << format_pruning_plan_json(study.plans.at(0), study.model_name, 0.25);
  return path;
}

TEST(ExpertPruningPolicy, PlanFileFromThePruneStudyGivesTheSameRun) {
  // `moesim prune --write-plan` profiles replica 0's routing as the run policy does: running
  // with the written plan equals running with the fraction.
  const std::string path = write_study_plan("expert_pruning_policy_plan.json");
  const RunOutput from_file = run("\n[policies.expert_pruning]\nplan_file = \"" + path + "\"\n");
  const RunOutput from_fraction = run("\n[policies.expert_pruning]\nfraction = 0.25\n");
  EXPECT_EQ(from_file.digest, from_fraction.digest);
  EXPECT_EQ(from_file.counters.policy_metrics, from_fraction.counters.policy_metrics);
  // Errors name the key.
  EXPECT_EQ(error_of("plan_file = \"/nonexistent/plan.json\"\n")
                .rfind("policies.expert_pruning.plan_file: cannot read", 0),
            0u);
  EXPECT_EQ(error_of("plan_file = \"" + path + "\"\nfraction = 0.25\n")
                .rfind("policies.expert_pruning.plan_file", 0),
            0u);
}

// The plan file is read when the table is resolved: policies built from the settings later (one
// per run) never open it again.
TEST(ExpertPruningPolicy, PoliciesShareThePlanReadOnce) {
  const std::string path = write_study_plan("expert_pruning_policy_plan_once.json");
  const Scenario with_file = tiny_scenario(
      kSkew + std::string("\n[policies.expert_pruning]\nplan_file = \"") + path + "\"\n");
  TomlTable table = with_file.policies.at(0).table;
  const ExpertPruningSettings settings = parse_expert_pruning_settings(table, with_file);
  std::filesystem::remove(path);
  const RunOutput by_fraction = run("\n[policies.expert_pruning]\nfraction = 0.25\n");
  for (int i = 0; i < 2; ++i) {
    std::vector<std::unique_ptr<ServingPolicy>> policies;
    policies.push_back(make_expert_pruning_policy(settings, *with_file.model));
    const RunOutput out = run_scenario(with_file, RunOptions{}, -1, std::move(policies));
    EXPECT_EQ(out.digest, by_fraction.digest) << i;
  }
}

}  // namespace
}  // namespace moesim::sim
