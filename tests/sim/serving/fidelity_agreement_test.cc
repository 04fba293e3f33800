// The fast fidelity agrees with the exact fidelity on the same steps (docs/fast_fidelity.md): every
// shipped scenario and a 1,024-GPU deployment run on the exact fidelity with the fidelity check on
// (every second step of every replica also timed on the fast fidelity, fidelity_check.h), and the
// sampled step durations must agree: mean within 1%, p50 and p99 within 3%.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/policy/policy_registry.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/cluster.h"

namespace moesim::sim {
namespace {

constexpr double kMeanBound = 0.01;
constexpr double kPercentileBound = 0.03;

std::vector<std::string> shipped_scenarios() {
  std::vector<std::string> out;
  const std::filesystem::path root = std::filesystem::path(MOESIM_SOURCE_DIR) / "scenarios";
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (e.is_regular_file() && e.path().extension() == ".toml") {
      out.push_back(std::filesystem::relative(e.path(), MOESIM_SOURCE_DIR).string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

FidelityAgreement check_tiers(const Scenario& sc) {
  RunOptions opt;
  opt.fidelity_check_every = 2;
  RunOutput out = run_scenario(sc, opt, -1, make_policies(sc));
  EXPECT_TRUE(out.conservation_ok) << out.conservation_message;
  EXPECT_TRUE(out.fidelity_checked);
  return fidelity_agreement(out.fidelity_samples, out.fidelity_samples_skipped);
}

void expect_agreement(const FidelityAgreement& a, const std::string& what) {
  ASSERT_GT(a.count, 0) << what << ": no sampled steps";
  EXPECT_LE(std::abs(a.mean_rel), kMeanBound)
      << what << ": mean step " << a.exact_mean_ms << " ms exact, " << a.fast_mean_ms << " fast";
  EXPECT_LE(std::abs(a.p50_rel), kPercentileBound)
      << what << ": p50 step " << a.exact_p50_ms << " ms exact, " << a.fast_p50_ms << " fast";
  EXPECT_LE(std::abs(a.p99_rel), kPercentileBound)
      << what << ": p99 step " << a.exact_p99_ms << " ms exact, " << a.fast_p99_ms << " fast";
}

class FidelityAgreementShipped : public ::testing::TestWithParam<std::string> {};

TEST_P(FidelityAgreementShipped, SampledStepsAgree) {
  Scenario sc = load_scenario(std::string(MOESIM_SOURCE_DIR) + "/" + GetParam());
  sc.run.duration_s = std::min(sc.run.duration_s, 10.0);
  const FidelityAgreement a = check_tiers(sc);
  expect_agreement(a, GetParam());
  RecordProperty("fast_layer_share", std::to_string(a.fast_layer_share));
}

INSTANTIATE_TEST_SUITE_P(Shipped, FidelityAgreementShipped,
                         ::testing::ValuesIn(shipped_scenarios()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

// 8 x EP128 DeepSeek-V3 decode-heavy on the 1,024-GPU rail-optimised fat tree (the speed
// benchmark's BM_SimScale/gpus:1024 deployment, bench/sim_speed_bench.cc), where every MoE layer
// is on the fast fidelity: the agreement holds at scale, through the spines.
TEST(FidelityAgreement, ThousandGpuDecodeHeavyDeploymentAgrees) {
  const std::string text =
      "name = \"tier-1024\"\n"
      "model = \"" MOESIM_SOURCE_DIR
      "/models/deepseek-v3.toml\"\n"
      "topology = \"" MOESIM_SOURCE_DIR
      "/topologies/h800-128x8.toml\"\n"
      "[deployment]\nreplicas = 8\ngpus_per_replica = 128\nattention = \"dp\"\n"
      "dispatch = \"hierarchical\"\n"
      "[scheduler]\nmax_seqs = 8192\nmax_batch_tokens_per_gpu = 2048\nworkspace_gib = 6\n"
      "[workload]\nkind = \"synthetic\"\nduration_s = 1000\n"
      "[workload.arrival]\nrate_per_s = 3072\n"
      "[workload.prompt_tokens]\ndistribution = \"lognormal\"\np50 = 256\np99 = 1024\nmax = 2048\n"
      "[workload.output_tokens]\ndistribution = \"lognormal\"\nmean = 400\nsigma = 0.6\n"
      "max = 2000\n"
      "[routing]\npreset = \"deepseek-v3-decode\"\n"
      "[run]\nseed = 1\nduration_s = 3\n";
  const Scenario sc = parse_scenario_text(text, "tier-1024.toml", MOESIM_SOURCE_DIR "/scenarios");
  const FidelityAgreement a = check_tiers(sc);
  expect_agreement(a, "8 x EP128");
  EXPECT_EQ(a.fast_layer_share, 1.0);
}

// Low-latency dispatch (every selection sent, no per-GPU deduplication) with the public H800
// profile's kernel costs: 2 x EP32 DeepSeek-V3 on the 64-GPU fat tree, every MoE layer on the fast
// tier, where the reach is the selections per source token.
TEST(FidelityAgreement, LowLatencyDeploymentAgrees) {
  const std::string text =
      "name = \"tier-ll\"\n"
      "model = \"" MOESIM_SOURCE_DIR
      "/models/deepseek-v3.toml\"\n"
      "topology = \"" MOESIM_SOURCE_DIR
      "/topologies/h800-8x8.toml\"\n"
      "[deployment]\nreplicas = 2\ngpus_per_replica = 32\nattention = \"dp\"\n"
      "dispatch = \"low_latency\"\n"
      "[cost]\nmodel = \"calibrated\"\nprofile = \"" MOESIM_SOURCE_DIR
      "/profiles/h800-public.toml\"\n"
      "[scheduler]\nmax_seqs = 2048\nmax_batch_tokens_per_gpu = 1024\nworkspace_gib = 6\n"
      "[workload]\nkind = \"synthetic\"\nduration_s = 1000\n"
      "[workload.arrival]\nrate_per_s = 512\n"
      "[workload.prompt_tokens]\ndistribution = \"lognormal\"\np50 = 256\np99 = 1024\nmax = 2048\n"
      "[workload.output_tokens]\ndistribution = \"lognormal\"\nmean = 400\nsigma = 0.6\n"
      "max = 2000\n"
      "[routing]\npreset = \"deepseek-v3-decode\"\n"
      "[run]\nseed = 1\nduration_s = 3\n";
  const Scenario sc = parse_scenario_text(text, "tier-ll.toml", MOESIM_SOURCE_DIR "/scenarios");
  const FidelityAgreement a = check_tiers(sc);
  expect_agreement(a, "2 x EP32 low latency");
  EXPECT_EQ(a.fast_layer_share, 1.0);
}

TEST(FidelityAgreement, TheCheckDoesNotChangeTheRun) {
  Scenario sc = load_scenario(MOESIM_SOURCE_DIR "/scenarios/quickstart.toml");
  sc.run.duration_s = 3;
  RunOptions checked;
  checked.fidelity_check_every = 1;
  const RunOutput plain = run_scenario(sc, RunOptions{}, -1, {});
  const RunOutput with_check = run_scenario(sc, checked, -1, {});
  EXPECT_EQ(plain.digest_hex, with_check.digest_hex);
  EXPECT_FALSE(plain.fidelity_checked);
  EXPECT_GT(with_check.fidelity_samples.size(), 0u);
}

TEST(FidelityAgreement, FastRunsSayHowManyLayersTheyTimed) {
  Scenario sc = load_scenario(MOESIM_SOURCE_DIR "/scenarios/quickstart.toml");
  sc.run.duration_s = 2;
  sc.run.fidelity = Fidelity::kFast;
  const RunOutput fast = run_scenario(sc, RunOptions{}, -1, {});
  EXPECT_GT(fast.counters.fast_fidelity_layers, 0);
  EXPECT_EQ(fast.counters.exact_fidelity_layers, 0);
  sc.run.fidelity = Fidelity::kExact;
  const RunOutput exact = run_scenario(sc, RunOptions{}, -1, {});
  EXPECT_EQ(exact.counters.fast_fidelity_layers, 0);
  EXPECT_NE(fast.digest_hex, exact.digest_hex);
}

}  // namespace
}  // namespace moesim::sim
