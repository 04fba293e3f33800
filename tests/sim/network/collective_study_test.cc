#include "sim/network/collective_study.h"

#include <gtest/gtest.h>

#include <numeric>

#include "sim/network/bottleneck_model.h"
#include "tests/support/test_topologies.h"

namespace moesim::sim {
namespace {

CollectiveStudySpec deepep_like(int32_t ep) {
  CollectiveStudySpec spec;
  spec.ep_size = ep;
  spec.tokens_per_gpu = 4096;
  spec.hidden = 7168;
  spec.top_k = 8;
  spec.num_experts = 256;
  return spec;
}

TEST(ExpertSkew, ParsesTheThreeFormsAndRejectsTheRest) {
  std::string error;
  EXPECT_EQ(parse_expert_skew("uniform", &error)->kind, ExpertSkew::Kind::kUniform);
  const auto zipf = parse_expert_skew("zipf:1.2", &error);
  ASSERT_TRUE(zipf.has_value());
  EXPECT_DOUBLE_EQ(zipf->zipf_exponent, 1.2);
  EXPECT_EQ(expert_skew_name(*zipf), "zipf:1.2");
  const auto hot = parse_expert_skew("hot:0.5", &error);
  ASSERT_TRUE(hot.has_value());
  EXPECT_DOUBLE_EQ(hot->hot_token_fraction, 0.5);
  EXPECT_FALSE(parse_expert_skew("hot:1.5", &error).has_value());
  EXPECT_NE(error.find("0 < F <= 1"), std::string::npos);
  EXPECT_FALSE(parse_expert_skew("zipf:", &error).has_value());
  EXPECT_FALSE(parse_expert_skew("zipf:-1", &error).has_value());
  EXPECT_FALSE(parse_expert_skew("pareto:2", &error).has_value());
  EXPECT_NE(error.find("valid: uniform, zipf:S, hot:F"), std::string::npos);
}

TEST(ExpertPopularity, SumsToOneAndGivesTheHotExpertItsShareOfChoices) {
  RngStream rng(1, "popularity");
  for (const char* text : {"uniform", "zipf:1.0", "hot:0.8"}) {
    std::string error;
    const std::vector<double> p = expert_popularity(*parse_expert_skew(text, &error), 64, 8, rng);
    EXPECT_NEAR(std::accumulate(p.begin(), p.end(), 0.0), 1.0, 1e-12) << text;
  }
  std::string error;
  const std::vector<double> hot =
      expert_popularity(*parse_expert_skew("hot:0.8", &error), 64, 8, rng);
  EXPECT_NEAR(*std::max_element(hot.begin(), hot.end()), 0.8 / 8, 1e-12);
}

TEST(CollectiveStudySpec, ChecksEveryOption) {
  const Topology topo = testing::h800_like(2, 4);
  EXPECT_EQ(check_collective_study_spec(deepep_like(8), topo), "");
  EXPECT_NE(check_collective_study_spec(deepep_like(9), topo).find("--ep"), std::string::npos);
  CollectiveStudySpec spec = deepep_like(8);
  spec.num_experts = 100;
  EXPECT_NE(check_collective_study_spec(spec, topo).find("--experts"), std::string::npos);
  spec = deepep_like(6);
  spec.num_experts = 96;
  spec.algorithm = DispatchAlgorithm::kHierarchical;
  EXPECT_NE(check_collective_study_spec(spec, topo).find("hierarchical"), std::string::npos);
  spec = deepep_like(8);
  spec.top_k = 0;
  EXPECT_NE(check_collective_study_spec(spec, topo).find("--top-k"), std::string::npos);
}

TEST(DrawTokenCounts, IsDeterministicPerSeedAndBoundedByTokens) {
  const Topology topo = testing::h800_like(2, 4);
  CollectiveStudySpec spec = deepep_like(8);
  const TokenCounts a = draw_token_counts(topo, spec);
  const TokenCounts b = draw_token_counts(topo, spec);
  EXPECT_EQ(a.tokens, b.tokens);
  spec.seed = 2;
  EXPECT_NE(draw_token_counts(topo, spec).tokens, a.tokens);
  for (int32_t s = 0; s < 8; ++s) {
    int64_t row = 0;
    for (int32_t d = 0; d < 8; ++d) {
      EXPECT_LE(a.at(s, d), 4096);
      row += a.at(s, d);
    }
    // Uniform top-8 of 256 experts, 32 per GPU: with independent inclusions (1/32 each) a token
    // reaches a GPU with probability 1 - (31/32)^32 = 0.6377; the exact without-replacement
    // value is 1 - C(224, 8) / C(256, 8) = 0.6619, 3.6% more (documented approximation).
    double miss = 1;
    for (int i = 0; i < 8; ++i) miss *= (224.0 - i) / (256.0 - i);
    EXPECT_NEAR(static_cast<double>(row), 4096 * 8 * (1 - std::pow(31.0 / 32, 32)), 8);
    EXPECT_NEAR(static_cast<double>(row), 4096 * 8 * (1 - miss), 0.04 * 4096 * 8 * (1 - miss));
  }
}

TEST(RunCollectiveStudy, UniformInternodeDispatchIsBoundByTheNicsAtLineRate) {
  const Topology topo = testing::h800_like(4, 4);
  BottleneckModel model(topo);
  const CollectiveStudy study = run_collective_study(topo, model, deepep_like(16));
  EXPECT_EQ(study.dispatch.result.bottleneck_class, LinkClass::kNic);
  EXPECT_DOUBLE_EQ(study.dispatch.bytes_per_token, 7392);
  EXPECT_DOUBLE_EQ(study.combine.bytes_per_token, 14336);
  // Milliseconds of transfer against microseconds of latency: close to the 50 GB/s line rate.
  EXPECT_GT(study.dispatch.result.bottleneck_bytes_per_s(), 0.98 * 50e9);
  EXPECT_LE(study.dispatch.result.bottleneck_bytes_per_s(), 50e9);
  // BF16 combine moves 14336 / 7392 times the dispatch bytes.
  EXPECT_NEAR(study.combine.traffic.total_bytes() / study.dispatch.traffic.total_bytes(),
              14336.0 / 7392.0, 1e-9);
}

TEST(RunCollectiveStudy, AHotExpertMakesEveryOtherGpuWaitAtTheBarrier) {
  const Topology topo = testing::h800_like(4, 4);
  BottleneckModel model(topo);
  CollectiveStudySpec spec = deepep_like(16);
  std::string error;
  const CollectiveStudy uniform = run_collective_study(topo, model, spec);
  spec.skew = *parse_expert_skew("hot:1.0", &error);
  const CollectiveStudy hot = run_collective_study(topo, model, spec);
  // Every token reaches the hot GPU: it receives 4096 tokens from each of its 12 remote peers
  // through one NIC, against about 4096 x 0.4 under uniform routing.
  EXPECT_GT(hot.dispatch.result.duration_ns, uniform.dispatch.result.duration_ns * 2);
  const double hot_nic_s = 12 * 4096 * 7392 / 50e9;
  EXPECT_GT(to_seconds(hot.dispatch.result.duration_ns), 0.98 * hot_nic_s);  // draw noise
  EXPECT_GT(hot.dispatch.received_bytes.max, 2 * hot.dispatch.received_bytes.mean);
  EXPECT_GT(hot.dispatch.barrier_wait_ns.mean, 0.4 * hot.dispatch.result.duration_ns);
  EXPECT_EQ(hot.dispatch.barrier_wait_ns.min, 0);
}

TEST(RunCollectiveStudy, HierarchicalDispatchCrossesTheNetworkLess) {
  const Topology topo = testing::h800_like(4, 4);
  BottleneckModel model(topo);
  CollectiveStudySpec spec = deepep_like(16);
  const CollectiveStudy direct = run_collective_study(topo, model, spec);
  spec.algorithm = DispatchAlgorithm::kHierarchical;
  const CollectiveStudy hier = run_collective_study(topo, model, spec);
  EXPECT_LT(hier.dispatch.result.bottleneck_bytes, direct.dispatch.result.bottleneck_bytes);
  EXPECT_LT(hier.dispatch.result.duration_ns, direct.dispatch.result.duration_ns);
}

}  // namespace
}  // namespace moesim::sim

namespace moesim::sim {
namespace {

// Low-latency traffic: every selection is a row (no per-GPU deduplication). Over NVLink within a
// node the same-node rows go over NVLink; pure RDMA sends every row through the NICs, on the
// topology with every GPU its own node. Either way a GPU sends its T x k selections but those to
// itself, and a kernel cost adds its fixed time to the duration and to every GPU's completion.
TEST(RunCollectiveStudy, LowLatencySendsEverySelectionOverTheChosenTransport) {
  const Topology topology(testing::h800_like_spec(2, 8));
  CollectiveStudySpec spec = deepep_like(16);
  spec.tokens_per_gpu = 128;
  spec.algorithm = DispatchAlgorithm::kLowLatency;
  ASSERT_EQ(check_collective_study_spec(spec, topology), "");
  BottleneckModel nvlink_model(topology);
  const CollectiveStudy nv = run_collective_study(topology, nvlink_model, spec);
  spec.transport = LowLatencyTransport::kRdma;
  EXPECT_NE(check_collective_study_spec(spec, topology), "");  // not on rdma_only_spec()
  const Topology rdma_topology(rdma_only_spec(topology.spec()));
  EXPECT_EQ(rdma_topology.nvlink_domain_gpus(), 1);
  EXPECT_EQ(rdma_topology.num_gpus(), 16);
  EXPECT_DOUBLE_EQ(rdma_topology.nic_bytes_per_s_per_gpu(), topology.nic_bytes_per_s_per_gpu());
  ASSERT_EQ(check_collective_study_spec(spec, rdma_topology), "");
  BottleneckModel rdma_model(rdma_topology);
  const CollectiveStudy rdma = run_collective_study(rdma_topology, rdma_model, spec);
  // The same draw: the counts are selections, T x k per source.
  EXPECT_EQ(nv.counts.tokens, rdma.counts.tokens);
  const double row = 7392;
  double nv_bytes = 0, rdma_bytes = 0;
  for (int32_t s = 0; s < 16; ++s) {
    int64_t sent = 0;
    for (int32_t d = 0; d < 16; ++d) sent += d == s ? 0 : nv.counts.at(s, d);
    int64_t all = 0;
    for (int32_t d = 0; d < 16; ++d) all += nv.counts.at(s, d);
    EXPECT_EQ(all, 128 * 8);
    EXPECT_DOUBLE_EQ(nv.dispatch.traffic.sent_bytes(s), sent * row);
    EXPECT_DOUBLE_EQ(rdma.dispatch.traffic.sent_bytes(s), sent * row);
    nv_bytes += sent * row;
    rdma_bytes += sent * row;
  }
  EXPECT_DOUBLE_EQ(nv.dispatch.accounting.nvlink_sent_bytes.mean +
                       nv.dispatch.accounting.network_sent_bytes.mean,
                   nv_bytes / 16);
  EXPECT_GT(nv.dispatch.accounting.nvlink_sent_bytes.mean, 0);
  EXPECT_EQ(rdma.dispatch.accounting.nvlink_sent_bytes.max, 0);
  EXPECT_DOUBLE_EQ(rdma.dispatch.accounting.network_sent_bytes.mean, rdma_bytes / 16);
  EXPECT_DOUBLE_EQ(nv.dispatch.accounting.low_latency_logical_bytes, 128.0 * 8 * row);
  // Same-node peers over the NIC: slower than over NVLink.
  EXPECT_GT(rdma.dispatch.result.duration_ns, nv.dispatch.result.duration_ns);

  spec.dispatch_kernel.fixed_s = 20e-6;
  spec.combine_kernel.fixed_s = 7e-6;
  BottleneckModel again(rdma_topology);
  const CollectiveStudy costed = run_collective_study(rdma_topology, again, spec);
  EXPECT_EQ(costed.dispatch.result.duration_ns, rdma.dispatch.result.duration_ns + 20000);
  EXPECT_EQ(costed.combine.result.duration_ns, rdma.combine.result.duration_ns + 7000);
  for (int32_t g = 0; g < 16; ++g) {
    EXPECT_EQ(costed.dispatch.result.recv_done_ns[g], rdma.dispatch.result.recv_done_ns[g] + 20000);
    EXPECT_EQ(costed.dispatch.result.barrier_wait_ns[g], rdma.dispatch.result.barrier_wait_ns[g]);
  }
}

}  // namespace
}  // namespace moesim::sim
