// The scenario parser: every shipped scenario and every test scenario loads; the bad-input corpus
// (tests/data/bad/scenarios/) raises exactly the listed messages ({dir} stands for the corpus
// directory, {src} for the source tree), and every corpus file is listed, so a new one cannot go
// unchecked.
#include "sim/scenario/scenario.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "sim/config/config_error.h"
#include "sim/scenario/comm_sms.h"
#include "tests/support/config_errors.h"
#include "tests/support/scratch_files.h"

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
      {"attention_tp_with_dp.toml",
       "{dir}/attention_tp_with_dp.toml:8:16: deployment.attention_tp: must be 1 with "
       "attention = \"dp\""},
      {"bad_attention_enum.toml",
       "{dir}/bad_attention_enum.toml:8:13: deployment.attention: unknown value 'pp' "
       "(valid: dp, tp)"},
      {"bad_network_model.toml",
       "{dir}/bad_network_model.toml:22:9: network.model: unknown value 'ideal' (valid: "
       "bottleneck, bottleneck_factored, fluid, simgrid)"},
      {"bad_router.toml",
       "{dir}/bad_router.toml:22:10: scheduler.router: unknown value 'random' (valid: "
       "round_robin, least_outstanding, session_affinity, cache_aware)"},
      {"cache_aware_without_prefix_caching.toml",
       "{dir}/cache_aware_without_prefix_caching.toml:23:10: scheduler.router: \"cache_aware\" "
       "routes by cached prefixes: it needs prefix_caching = true"},
      {"kv_tiers_dram_above_host.toml",
       "{dir}/kv_tiers_dram_above_host.toml:23:15: kv_tiers.dram_gbytes: exceeds the node's host "
       "DRAM (2048 GB in the topology 'h800-8x8' [host] table)"},
      {"kv_tiers_bad_scope.toml",
       "{dir}/kv_tiers_bad_scope.toml:24:9: kv_tiers.scope: unknown value 'rack' (valid: node, "
       "cluster)"},
      {"kv_tiers_cluster_without_network.toml",
       "{dir}/kv_tiers_cluster_without_network.toml:24:9: kv_tiers.scope: \"cluster\" reaches "
       "other nodes' tiers over the network: the topology 'h200-node-host' has no NICs"},
      {"kv_tiers_factored_network.toml",
       "{dir}/kv_tiers_factored_network.toml:29:9: network.model: [kv_tiers] copies contend with "
       "the all-to-all on the GPUs' PCIe links, which the \"bottleneck\" and \"fluid\" models "
       "apply; \"bottleneck_factored\" does not"},
      {"kv_tiers_ssd_above_host.toml",
       "{dir}/kv_tiers_ssd_above_host.toml:23:14: kv_tiers.ssd_gbytes: exceeds the node's NVMe "
       "capacity (1000 GB in the topology 'h200-node-host' [host] table)"},
      {"kv_tiers_no_tier.toml",
       "{dir}/kv_tiers_no_tier.toml:22:1: kv_tiers.dram_gbytes: no tier: give dram_gbytes and/or "
       "ssd_gbytes > 0 (per node)"},
      {"kv_tiers_without_host.toml",
       "{dir}/kv_tiers_without_host.toml:23:15: kv_tiers.dram_gbytes: needs pcie_gbytes_per_s "
       "(the GPU's host link) in the topology 'h200-node' [host] table"},
      {"kv_tiers_without_prefix_caching.toml",
       "{dir}/kv_tiers_without_prefix_caching.toml:26:15: kv_tiers.dram_gbytes: KV tiers hold "
       "prefix-cache entries: they need [scheduler] prefix_caching = true"},
      {"comm_sms_all_of_the_gpu.toml",
       "{dir}/comm_sms_all_of_the_gpu.toml:9:12: deployment.comm_sms: value 132 is out of range "
       "[0, 131] (the GPU 'h200-sxm' has 132 SMs; compute keeps at least one)"},
      {"comm_sms_negative.toml",
       "{dir}/comm_sms_negative.toml:9:12: deployment.comm_sms: value -1 is out of range [0, 131] "
       "(the GPU 'h200-sxm' has 132 SMs; compute keeps at least one)"},
      {"comm_sms_not_an_integer.toml",
       "{dir}/comm_sms_not_an_integer.toml:9:12: deployment.comm_sms: expected an integer, got "
       "float"},
      {"calibrated_profile_not_found.toml",
       "{dir}/calibrated_profile_not_found.toml:23:11: cost.profile: file not found: "
       "{dir}/no-such-profile.json"},
      {"eplb_slots_not_dividing.toml",
       "{dir}/eplb_slots_not_dividing.toml:7:20: deployment.gpus_per_replica: 16 routed "
       "experts + 4 redundant slots do not divide over 8 GPUs"},
      {"eplb_with_expert_pruning.toml",
       "{dir}/eplb_with_expert_pruning.toml:23:1: policies.expert_pruning: cannot be combined "
       "with [deployment] placement = \"eplb\" (one layout per MoE layer): pruning repacks the "
       "kept experts into one placement for every layer"},
      {"redundant_slots_without_eplb.toml",
       "{dir}/redundant_slots_without_eplb.toml:8:19: deployment.redundant_slots: needs placement "
       "= \"eplb\" (the static layouts have one slot per expert)"},
      {"experts_not_divisible.toml",
       "{dir}/experts_not_divisible.toml:7:20: deployment.gpus_per_replica: 16 routed "
       "experts do not divide over 6 GPUs"},
      {"kv_block_tokens_not_dividing.toml",
       "{dir}/kv_block_tokens_not_dividing.toml:22:19: scheduler.kv_block_tokens: must "
       "divide 512 (the prefix-block size of traces)"},
      {"missing_model.toml", "{dir}/missing_model.toml:1:1: model: missing required key (string)"},
      {"model_not_found.toml",
       "{dir}/model_not_found.toml:2:9: model: file not found: {src}/models/tiny-v2.toml"},
      {"more_gpus_than_experts.toml",
       "{dir}/more_gpus_than_experts.toml:7:20: deployment.gpus_per_replica: 16 routed "
       "experts do not divide over 32 GPUs"},
      {"node_limited_without_hierarchical.toml",
       "{dir}/node_limited_without_hierarchical.toml:8:24: deployment.node_limited_traffic: "
       "needs dispatch = \"hierarchical\" (it changes the unique (token, node) pairs that "
       "hierarchical dispatch sends)"},
      {"node_limited_with_low_latency.toml",
       "{dir}/node_limited_with_low_latency.toml:9:24: deployment.node_limited_traffic: "
       "needs dispatch = \"hierarchical\" (it changes the unique (token, node) pairs that "
       "hierarchical dispatch sends)"},
      {"node_limited_without_groups.toml",
       "{dir}/node_limited_without_groups.toml:9:24: deployment.node_limited_traffic: the "
       "model's routing is not group-limited (topk_groups = num_expert_groups = 1)"},
      {"overlap_conflicts_microbatch_overlap.toml",
       "{dir}/overlap_conflicts_microbatch_overlap.toml:9:11: deployment.overlap: overlap = "
       "\"two_microbatch\" conflicts with microbatch_overlap = true (microbatch_overlap = true "
       "means overlap = \"simple\"; set one key)"},
      {"negative_seed.toml",
       "{dir}/negative_seed.toml:22:8: run.seed: value -1 is out of range [0, "
       "9223372036854775807]"},
      {"prefill_replicas_without_decode.toml",
       "{dir}/prefill_replicas_without_decode.toml:8:20: deployment.prefill_replicas: 1 "
       "prefill replicas leave no decode replica (replicas = 1)"},
      {"replicas_exceed_topology.toml",
       "{dir}/replicas_exceed_topology.toml:6:12: deployment.replicas: 2 replicas x 8 "
       "GPUs exceed the topology's 8 GPUs"},
      {"roofline_efficiency_out_of_range.toml",
       "{dir}/roofline_efficiency_out_of_range.toml:22:22: "
       "cost.roofline.expert_ffn.compute_efficiency: value 1.5 is out of range [1e-06, 1]"},
      {"roofline_unknown_op.toml",
       "{dir}/roofline_unknown_op.toml:21:1: cost.roofline.attn_mla: unknown op kind "
       "'attn_mla' (valid: rmsnorm, attn_mla_prefill, attn_mla_decode, attn_gqa_prefill, "
       "attn_gqa_decode, attn_kda_prefill, attn_kda_decode, router, permute, expert_ffn, "
       "shared_expert, "
       "dense_ffn, combine, lm_head, dispatch_a2a, combine_a2a)"},
      {"routing_on_dense_model.toml",
       "{dir}/routing_on_dense_model.toml:22:1: routing: the model has no MoE layer"},
      {"toml_syntax_error.toml",
       "{dir}/toml_syntax_error.toml:2:38: TOML syntax error: Error while parsing "
       "string: unescaped control characters other than TAB (U+0009) are explicitly "
       "prohibited"},
      {"topology_not_found.toml",
       "{dir}/topology_not_found.toml:3:12: topology: file not found: "
       "{dir}/h200-node.toml"},
      {"trace_replica_out_of_range.toml",
       "{dir}/trace_replica_out_of_range.toml:22:18: outputs.trace_replicas: replica 1 is not "
       "in [0, 0]"},
      {"trace_window_reversed.toml",
       "{dir}/trace_window_reversed.toml:23:15: outputs.trace_end_s: must be >= "
       "trace_start_s"},
      {"unknown_key.toml",
       "{dir}/unknown_key.toml:22:1: scheduler.max_seq: unknown key 'max_seq' (did you "
       "mean 'max_seqs'?)"},
      {"wrong_type.toml",
       "{dir}/wrong_type.toml:22:14: run.duration_s: expected a number, got string"},
      {"zero_slo.toml",
       "{dir}/zero_slo.toml:22:11: slo.ttft_ms: value 0 is out of range [0.001, "
       "1000000000]"},
  };
  return kMessages;
}

std::string load_error(const std::string& path) {
  return testing::config_error_of([&] { load_scenario(path); }, "(loaded without error)");
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
    for (auto [tag, value] :
         {std::pair<std::string, std::string>{"{dir}", kBadDir}, {"{src}", kSource}}) {
      for (size_t at; (at = expected.find(tag)) != std::string::npos;) {
        expected.replace(at, tag.size(), value);
      }
    }
    EXPECT_EQ(actual, expected) << file;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(expected_messages().size()));
  EXPECT_GE(checked, 10);
}

void expect_loads(const fs::path& file) {
  SCOPED_TRACE(file.string());
  try {
    Scenario s = load_scenario(file.string());
    EXPECT_FALSE(s.name.empty());
    EXPECT_TRUE(s.model);
    EXPECT_TRUE(s.topology);
    EXPECT_LE(s.deployment.num_replicas * s.deployment.gpus_per_replica, s.topology->num_gpus());
  } catch (const ConfigError& e) {
    ADD_FAILURE() << e.what();
  }
}

TEST(ScenarioTest, EveryShippedScenarioLoads) {
  int loaded = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kSource + "/scenarios")) {
    if (entry.path().extension() != ".toml") continue;
    expect_loads(entry.path());
    ++loaded;
  }
  EXPECT_GE(loaded, 1);
}

TEST(ScenarioTest, EveryTestScenarioLoads) {
  int loaded = 0;
  // Top level only: models/ and topologies/ hold the files the scenarios name.
  for (const auto& entry : fs::directory_iterator(kSource + "/tests/data/scenarios")) {
    if (entry.path().extension() != ".toml") continue;
    expect_loads(entry.path());
    ++loaded;
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
  EXPECT_EQ(s.deployment.overlap, OverlapMode::kNone);
  EXPECT_TRUE(s.outputs.requests_csv);
  EXPECT_TRUE(s.outputs.steps_csv);
}

// [deployment] overlap: each schedule by name; microbatch_overlap = true alone is "simple", and
// agreeing keys are accepted.
TEST(ScenarioTest, OverlapSchedules) {
  const std::string base =
      kSource + "/tests/data/bad/scenarios/node_limited_without_hierarchical.toml";
  std::ifstream in(base);
  std::stringstream text;
  text << in.rdbuf();
  const std::string model = "\"" + kSource + "/models/tiny.toml\"";
  const std::string topo = "\"" + kSource + "/topologies/h200-node.toml\"";
  auto load_with = [&](const std::string& keys) {
    std::string t = text.str();
    t.replace(t.find("node_limited_traffic = true"), 27, keys);
    t.replace(t.find("\"../../../../models/tiny.toml\""), 30, model);
    t.replace(t.find("\"../../../../topologies/h200-node.toml\""), 39, topo);
    return load_scenario(scratch::write("overlap.toml", t)).deployment.overlap;
  };
  EXPECT_EQ(load_with("overlap = \"none\""), OverlapMode::kNone);
  EXPECT_EQ(load_with("overlap = \"simple\""), OverlapMode::kSimple);
  EXPECT_EQ(load_with("overlap = \"two_microbatch\""), OverlapMode::kTwoMicrobatch);
  EXPECT_EQ(load_with("overlap = \"decode_pipeline\""), OverlapMode::kDecodePipeline);
  EXPECT_EQ(load_with("microbatch_overlap = true"), OverlapMode::kSimple);
  EXPECT_EQ(load_with("microbatch_overlap = true\noverlap = \"simple\""), OverlapMode::kSimple);
  EXPECT_EQ(load_with("microbatch_overlap = false\noverlap = \"decode_pipeline\""),
            OverlapMode::kDecodePipeline);
  EXPECT_THROW(load_with("microbatch_overlap = false\noverlap = \"simple\""), ConfigError);
  EXPECT_THROW(load_with("overlap = \"dual\""), ConfigError);
}

// [deployment] comm_sms: the kernel family's default (sim/scenario/comm_sms.h) unless given.
TEST(ScenarioTest, CommSmsDefaultByKernelFamily) {
  EXPECT_EQ(default_comm_sms(DispatchAlgorithm::kHierarchical, true), 24);  // DeepEP normal
  EXPECT_EQ(default_comm_sms(DispatchAlgorithm::kHierarchical, false), 24);
  EXPECT_EQ(default_comm_sms(DispatchAlgorithm::kLowLatency, false), 0);  // IBGDA: no SMs
  EXPECT_EQ(default_comm_sms(DispatchAlgorithm::kDirect, true), 32);      // NCCL p2p channels
  EXPECT_EQ(default_comm_sms(DispatchAlgorithm::kDirect, false), 16);
  const std::string base =
      kSource + "/tests/data/bad/scenarios/node_limited_without_hierarchical.toml";
  std::ifstream in(base);
  std::stringstream text;
  text << in.rdbuf();
  auto load_with = [&](const std::string& keys) {
    std::string t = text.str();
    t.replace(t.find("node_limited_traffic = true"), 27, keys);
    t.replace(t.find("\"../../../../models/tiny.toml\""), 30,
              "\"" + kSource + "/models/tiny.toml\"");
    t.replace(t.find("\"../../../../topologies/h200-node.toml\""), 39,
              "\"" + kSource + "/topologies/h200-node.toml\"");
    return load_scenario(scratch::write("comm_sms.toml", t)).deployment.comm_sms;
  };
  EXPECT_EQ(load_with(""), 32);  // direct, one node of 8 H200
  EXPECT_EQ(load_with("dispatch = \"hierarchical\""), 24);
  EXPECT_EQ(load_with("dispatch = \"low_latency\""), 0);
  EXPECT_EQ(load_with("dispatch = \"hierarchical\"\ncomm_sms = 20"), 20);
  EXPECT_EQ(load_with("dispatch = \"low_latency\"\ncomm_sms = 131"), 131);
}

TEST(ScenarioTest, TensorParallelAndDisaggregatedDeployments) {
  Scenario tp = load_scenario(kSource + "/tests/data/scenarios/tiny_tp.toml");
  EXPECT_EQ(tp.deployment.attention, AttentionParallel::kTensor);
  EXPECT_EQ(tp.deployment.attention_tp, 2);
  EXPECT_EQ(tp.deployment.overlap, OverlapMode::kSimple);
  Scenario pd = load_scenario(kSource + "/tests/data/scenarios/tiny_pd.toml");
  EXPECT_EQ(pd.deployment.prefill_replicas, 1);
  EXPECT_EQ(pd.deployment.num_replicas, 2);
}

TEST(ScenarioTest, RouterPolicyNames) {
  EXPECT_STREQ(router_policy_name(RouterPolicy::kRoundRobin), "round_robin");
  EXPECT_STREQ(router_policy_name(RouterPolicy::kLeastOutstanding), "least_outstanding");
  EXPECT_STREQ(router_policy_name(RouterPolicy::kSessionAffinity), "session_affinity");
  EXPECT_STREQ(router_policy_name(RouterPolicy::kCacheAware), "cache_aware");
}

TEST(ScenarioTest, KvTiersTakeCapacitiesFromTheTableAndLinksFromTheTopology) {
  Scenario off = load_scenario(kSource + "/scenarios/deepseek-v3-h800-mooncake-hbm.toml");
  EXPECT_FALSE(off.kv_tiers.enabled);
  Scenario s = load_scenario(kSource + "/scenarios/deepseek-v3-h800-mooncake-tiered.toml");
  EXPECT_EQ(s.scheduler.router, RouterPolicy::kCacheAware);
  const KvTierSpec& k = s.kv_tiers;
  EXPECT_TRUE(k.enabled);
  EXPECT_EQ(k.dram_bytes_per_node, 16'000'000'000);
  EXPECT_TRUE(k.cluster_scope);
  EXPECT_EQ(k.nic_bytes_per_s, 50e9);
  EXPECT_EQ(k.nic_latency_ns, 1000);
  EXPECT_EQ(k.ssd_bytes_per_node, 8'192'000'000'000);
  // topologies/h800-8x8.toml [host]
  EXPECT_EQ(k.pcie_bytes_per_s, 50e9);
  EXPECT_EQ(k.pcie_latency_ns, 10'000);
  EXPECT_EQ(k.nvme_bytes_per_s, 40e9);
  EXPECT_EQ(k.nvme_latency_ns, 100'000);
  EXPECT_EQ(s.topology->spec().host.dram_bytes, 2'048'000'000'000);
}

}  // namespace
}  // namespace moesim::sim
