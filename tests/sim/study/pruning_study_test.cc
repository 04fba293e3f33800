#include "sim/study/pruning_study.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "sim/cost/profile.h"
#include "tests/sim/policy/pruning_test_util.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim::study {
namespace {

using testing::config_error_of;

Scenario tiny_prune_scenario() {
  const std::string file = scratch::path("tiny_prune.toml");
  {
    std::ofstream f(file);
    f << "name = \"tiny_prune\"\n"
      << "model = \"" << MOESIM_SOURCE_DIR << "/models/tiny.toml\"\n"
      << "topology = \"" << MOESIM_SOURCE_DIR << "/topologies/h200-node.toml\"\n"
      << "[deployment]\nreplicas = 1\ngpus_per_replica = 8\n"
      << "[scheduler]\nworkspace_gib = 1\n"
      << "[workload]\nkind = \"synthetic\"\nduration_s = 1\n"
      << "[workload.arrival]\nrate_per_s = 10\n"
      << "[workload.prompt_tokens]\ndistribution = \"lognormal\"\np50 = 600\np99 = 2500\n"
      << "max = 3000\n"
      << "[workload.output_tokens]\ndistribution = \"lognormal\"\nmean = 60\nsigma = 0.8\n"
      << "max = 400\n"
      << "[routing]\npopularity = \"zipf\"\nzipf_s = 1.2\n"
      << "[run]\nseed = 3\nduration_s = 1\n";
  }
  return load_scenario(file);
}

PruningStudyOptions small_options() {
  PruningStudyOptions opt;
  opt.fractions = {0.0, 0.25, 0.5};
  opt.batch_per_gpu = 16;
  opt.context_tokens = 512;
  opt.num_timed_steps = 2;
  opt.profile.profile_steps = 2;
  opt.profile.tokens_per_step = 2000;
  return opt;
}

// The whole study on the tiny model: pruning frees weight memory and loses routing mass
// monotonically; the unpruned row loses none.
TEST(PruningStudy, StudyOnTinyScenario) {
  const Scenario sc = tiny_prune_scenario();
  PruningStudyOptions opt = small_options();
  const PruningStudy s = run_pruning_study(sc, opt);
  ASSERT_EQ(s.rows.size(), 3u);
  EXPECT_EQ(s.num_experts, 16);
  EXPECT_EQ(s.rows[0].experts_kept_per_layer, 16);
  EXPECT_EQ(s.rows[1].experts_kept_per_layer, 12);
  EXPECT_EQ(s.rows[2].experts_kept_per_layer, 8);
  EXPECT_EQ(s.rows[0].routing_mass_lost, 0.0);
  EXPECT_EQ(s.rows[0].tokens_rerouted, 0.0);
  for (size_t i = 1; i < s.rows.size(); ++i) {
    EXPECT_LT(s.rows[i].weight_bytes_per_gpu, s.rows[i - 1].weight_bytes_per_gpu);
    EXPECT_GT(s.rows[i].kv_pool_bytes_per_gpu, s.rows[i - 1].kv_pool_bytes_per_gpu);
    EXPECT_GT(s.rows[i].routing_mass_lost, s.rows[i - 1].routing_mass_lost);
    EXPECT_GE(s.rows[i].max_layer_mass_lost, s.rows[i].routing_mass_lost);
    EXPECT_GT(s.rows[i].decode_step_s, 0.0);
  }
  // Zipf 1.2 over 16 experts: the least-activated half carries well under half the mass.
  EXPECT_LT(s.rows[2].routing_mass_lost, 0.35);
  EXPECT_NE(format_pruning_study_text(s).find("mass lost"), std::string::npos);
  EXPECT_NE(format_pruning_study_json(s).find("\"routing_mass_lost\""), std::string::npos);
  // A fraction keeping fewer than top_k experts is an input error.
  opt.fractions = {0.95};
  EXPECT_NE(config_error_of([&] { run_pruning_study(sc, opt); }).find("fractions"),
            std::string::npos);
}

// [cost] model = "calibrated" prices the decode step with the scenario's profile (the study
// once always used the roofline): a profile whose RMSNorm fit costs 1 ms makes every step at
// least half a millisecond slower (each norm costs half of the two-norm fit), and changes
// nothing but the step time.
TEST(PruningStudy, PricesWithTheScenarioCostModel) {
  const Scenario roofline = tiny_prune_scenario();
  Scenario calibrated = roofline;
  CalibrationProfile profile;
  profile.name = "slow-norms";
  OpFit norm;
  norm.kind = "rmsnorm";
  norm.dtype = "bf16";
  norm.features = {FitFeature::kBytes};
  norm.segments.push_back(FitSegment{});
  norm.segments[0].intercept_s = 1e-3;
  norm.range = FitRange{0, 1e12, 0, 1e12, 0, 1e12};
  profile.ops.push_back(norm);
  calibrated.cost.kind = CostModelKind::kCalibrated;
  calibrated.cost.profile = std::make_shared<const CalibrationProfile>(profile);
  const PruningStudy a = run_pruning_study(roofline, small_options());
  const PruningStudy b = run_pruning_study(calibrated, small_options());
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) {
    EXPECT_GT(b.rows[i].decode_step_s, a.rows[i].decode_step_s + 0.5e-3) << i;
    EXPECT_EQ(b.rows[i].weight_bytes_per_gpu, a.rows[i].weight_bytes_per_gpu);
    EXPECT_EQ(b.rows[i].kv_pool_bytes_per_gpu, a.rows[i].kv_pool_bytes_per_gpu);
    EXPECT_EQ(b.rows[i].max_decode_batch_per_gpu, a.rows[i].max_decode_batch_per_gpu);
    EXPECT_EQ(b.rows[i].routing_mass_lost, a.rows[i].routing_mass_lost);
    EXPECT_EQ(b.rows[i].tokens_rerouted, a.rows[i].tokens_rerouted);
  }
}

// A deployment whose weights do not fit is a ConfigError at "deployment" naming the pruned model.
TEST(PruningStudy, DeploymentThatDoesNotFitIsAnInputError) {
  Scenario sc = tiny_prune_scenario();
  sc.scheduler.workspace_gib = 1e6;
  const std::string error = config_error_of([&] { run_pruning_study(sc, small_options()); });
  EXPECT_NE(error.find("deployment"), std::string::npos) << error;
  EXPECT_NE(error.find("tiny pruned to 16 experts per layer"), std::string::npos) << error;
}

}  // namespace
}  // namespace moesim::sim::study
