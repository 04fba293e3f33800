// The scenario parser: every shipped scenario and every test scenario loads; the bad-input corpus
// (tests/data/bad/scenarios/) raises exactly the listed messages ({dir} stands for the corpus
// directory), and every corpus file is listed, so a new one cannot go unchecked.
#include "sim/scenario/scenario.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "sim/config/config_error.h"

namespace moesim::sim {
namespace {

namespace fs = std::filesystem;

const std::string kSource = MOESIM_SOURCE_DIR;
const std::string kBadDir = kSource + "/tests/data/bad/scenarios";

const std::map<std::string, std::string>& expected_messages() {
  static const std::map<std::string, std::string> kMessages = {
      {"attention_tp_not_dividing.toml",
       "{dir}/attention_tp_not_dividing.toml:9:16: deployment.attention_tp: must divide "
       "gpus_per_replica (8)"},
  };
  return kMessages;
}

std::string load_error(const std::string& path) {
  try {
    load_scenario(path);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(loaded without error)";
}

TEST(BadScenarioTest, EveryCorpusFileFailsWithItsMessage) {
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(kBadDir)) {
    const std::string file = entry.path().filename().string();
    auto it = expected_messages().find(file);
    std::string actual = load_error(entry.path().string());
    if (it == expected_messages().end()) {
      ADD_FAILURE() << "unlisted corpus file " << file << ": " << actual;
      continue;
    }
    std::string expected = it->second;
    expected.replace(expected.find("{dir}"), 5, kBadDir);
    EXPECT_EQ(actual, expected) << file;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(expected_messages().size()));
  EXPECT_GE(checked, 10);
}

TEST(ScenarioTest, EveryShippedScenarioLoads) {
  int loaded = 0;
  for (const std::string dir : {kSource + "/scenarios", kSource + "/tests/data/scenarios"}) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".toml") continue;
      SCOPED_TRACE(entry.path().string());
      Scenario s = load_scenario(entry.path().string());
      EXPECT_EQ(s.name, entry.path().stem().string());
      EXPECT_TRUE(s.model);
      EXPECT_TRUE(s.topology);
      EXPECT_LE(s.deployment.num_replicas * s.deployment.gpus_per_replica,
                s.topology->num_gpus());
      ++loaded;
    }
  }
  EXPECT_GE(loaded, 10);
}

TEST(ScenarioTest, QuickstartValues) {
  Scenario s = load_scenario(kSource + "/scenarios/quickstart.toml");
  EXPECT_EQ(s.name, "quickstart");
  EXPECT_EQ(s.model->name, "deepseek-v3");
  EXPECT_EQ(s.topology->num_gpus(), 8);
  EXPECT_EQ(s.model_path, kSource + "/models/deepseek-v3.toml");
  EXPECT_EQ(s.topology_path, kSource + "/topologies/h200-node.toml");
  EXPECT_EQ(s.deployment.num_replicas, 1);
  EXPECT_EQ(s.deployment.gpus_per_replica, 8);
  EXPECT_EQ(s.deployment.attention, AttentionParallel::kData);
  EXPECT_EQ(s.deployment.dispatch_dtype, WireDtype::kFp8);
  EXPECT_EQ(s.deployment.combine_dtype, WireDtype::kBf16);
  EXPECT_EQ(s.scheduler.router, RouterPolicy::kLeastOutstanding);
  EXPECT_EQ(s.scheduler.max_batch_tokens_per_gpu, 4096);
  EXPECT_EQ(s.scheduler.workspace_gib, 4.0);
  EXPECT_EQ(s.workload.kind, WorkloadKind::kSynthetic);
  EXPECT_EQ(s.routing.preset, "deepseek-v3-decode");
  EXPECT_EQ(s.network_model, "bottleneck");
  EXPECT_EQ(s.cost.kind, CostModelKind::kRoofline);
  EXPECT_EQ(s.slo.tpot_ms, 80);
  EXPECT_EQ(s.run.seed, 1u);
  EXPECT_EQ(s.run.duration_s, 20);
  EXPECT_EQ(s.outputs.trace_start_s, 5.0);
  EXPECT_EQ(s.outputs.trace_end_s, 5.2);
}

TEST(ScenarioTest, DefaultsWhenTablesAreAbsent) {
  Scenario s = load_scenario(kSource + "/tests/data/scenarios/tiny_dense.toml");
  EXPECT_EQ(s.network_model, "bottleneck");
  EXPECT_EQ(s.cost.kind, CostModelKind::kRoofline);
  EXPECT_EQ(s.slo.ttft_ms, 2000);
  EXPECT_EQ(s.scheduler.kv_block_tokens, 64);
  EXPECT_TRUE(s.scheduler.prefix_caching);
  EXPECT_EQ(s.deployment.prefill_replicas, 0);
  EXPECT_FALSE(s.deployment.microbatch_overlap);
  EXPECT_TRUE(s.outputs.requests_csv);
}

TEST(ScenarioTest, TensorParallelAndDisaggregatedDeployments) {
  Scenario tp = load_scenario(kSource + "/tests/data/scenarios/tiny_tp.toml");
  EXPECT_EQ(tp.deployment.attention, AttentionParallel::kTensor);
  EXPECT_EQ(tp.deployment.attention_tp, 2);
  EXPECT_TRUE(tp.deployment.microbatch_overlap);
  Scenario pd = load_scenario(kSource + "/tests/data/scenarios/tiny_pd.toml");
  EXPECT_EQ(pd.deployment.prefill_replicas, 1);
  EXPECT_EQ(pd.deployment.num_replicas, 2);
}

TEST(ScenarioTest, RouterPolicyNames) {
  EXPECT_STREQ(router_policy_name(RouterPolicy::kRoundRobin), "round_robin");
  EXPECT_STREQ(router_policy_name(RouterPolicy::kLeastOutstanding), "least_outstanding");
  EXPECT_STREQ(router_policy_name(RouterPolicy::kSessionAffinity), "session_affinity");
}

}  // namespace
}  // namespace moesim::sim
