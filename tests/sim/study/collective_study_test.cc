#include "sim/study/collective_study.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <tuple>

#include "sim/network/bottleneck_model.h"
#include "sim/network/factored_bottleneck_model.h"
#include "sim/topology/topology_parser.h"
#include "tests/sim/network/collective_expect.h"
#include "tests/support/test_topologies.h"

namespace moesim::sim::study {
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

// The factored bottleneck model (sim/network/factored_bottleneck_model.h) against the exact one on
// the study's layers: every skew and dispatch algorithm, dispatch and combine. Documented in
// docs/network.md. Largest relative difference of the collective duration against
// the exact model measured over the sweeps below: 0 on the shipped (non-oversubscribed)
// topologies, where no leaf <-> spine link is the bottleneck; -7.7% on a small 2:1
// oversubscribed fat tree (two spines: a pair's flow takes one spine, the factored model spreads
// it). Largest difference of a GPU's send / receive completion: 9.6% of the duration on the
// shipped topologies, 21.8% with oversubscription (hierarchical, sparse spine traffic).
constexpr double kDurationBound = 0.04;
constexpr double kOversubscribedDurationBound = 0.08;
constexpr double kPerGpuBound = 0.25;

Topology shipped(const std::string& stem) { return testing::shipped_topology(stem); }

using testing::expect_identical;

CollectiveStudySpec study_spec(int32_t ep, const char* skew, DispatchAlgorithm algorithm,
                               int64_t tokens_per_gpu) {
  CollectiveStudySpec spec;
  spec.ep_size = ep;
  spec.tokens_per_gpu = tokens_per_gpu;
  spec.hidden = 7168;
  spec.top_k = 8;
  spec.num_experts = ep * ((256 + ep - 1) / ep);  // a multiple of ep, at least 256
  std::string error;
  spec.skew = *parse_expert_skew(skew, &error);
  spec.algorithm = algorithm;
  return spec;
}

constexpr const char* kSkews[] = {"uniform", "zipf:1.2", "hot:0.5"};
constexpr DispatchAlgorithm kAlgorithms[] = {DispatchAlgorithm::kDirect,
                                             DispatchAlgorithm::kHierarchical};

struct Errors {
  double duration = 0;  // largest |factored - exact| / exact duration
  double per_gpu = 0;   // largest |factored - exact| send / recv completion / duration
};

// Dispatch and combine of every skew and algorithm on `topo` with EP `ep`: both models, the
// largest relative differences; prints one line per case.
Errors sweep(const Topology& topo, int32_t ep, int64_t tokens_per_gpu) {
  BottleneckModel exact(topo);
  FactoredBottleneckModel factored(topo);
  Errors worst;
  for (const char* skew : kSkews) {
    for (DispatchAlgorithm algorithm : kAlgorithms) {
      if (algorithm == DispatchAlgorithm::kHierarchical && ep % topo.gpus_per_node() != 0) continue;
      const CollectiveStudy study =
          run_collective_study(topo, exact, study_spec(ep, skew, algorithm, tokens_per_gpu));
      for (const CollectivePhase* phase : {&study.dispatch, &study.combine}) {
        const CollectiveResult& e = phase->result;
        const CollectiveResult f = factored.run(phase->traffic);
        EXPECT_EQ(f.num_flows, e.num_flows);
        const double duration = static_cast<double>(e.duration_ns);
        const double err = (static_cast<double>(f.duration_ns) - duration) / duration;
        double per_gpu = 0;
        for (int32_t i = 0; i < phase->traffic.size(); ++i) {
          per_gpu = std::max(
              per_gpu,
              std::abs(static_cast<double>(f.recv_done_ns[i] - e.recv_done_ns[i])) / duration);
          per_gpu = std::max(
              per_gpu,
              std::abs(static_cast<double>(f.send_done_ns[i] - e.send_done_ns[i])) / duration);
        }
        std::printf(
            "%-12s ep%-5d %-9s %-13s %-8s exact %10.1f us  factored %+.4f%%  per-GPU %.4f%%\n",
            topo.name().c_str(), ep, skew, dispatch_algorithm_name(algorithm),
            phase == &study.dispatch ? "dispatch" : "combine", duration / 1e3, 100 * err,
            100 * per_gpu);
        EXPECT_LE(std::abs(err),
                  topo.spec().oversubscription > 1 ? kOversubscribedDurationBound : kDurationBound)
            << topo.name() << " " << skew;
        EXPECT_LE(per_gpu, kPerGpuBound) << topo.name() << " " << skew;
        worst.duration = std::max(worst.duration, std::abs(err));
        worst.per_gpu = std::max(worst.per_gpu, per_gpu);
      }
    }
  }
  return worst;
}

TEST(FactoredBottleneckModel, ExactOnTheStudysLayersOfOneNvlinkDomain) {
  for (const char* stem : {"h200-node", "gb200-nvl72"}) {
    const Topology topo = shipped(stem);
    BottleneckModel exact(topo);
    FactoredBottleneckModel factored(topo);
    ASSERT_TRUE(factored.factored()) << stem;
    const int32_t n = topo.num_gpus();
    for (const char* skew : kSkews) {
      const CollectiveStudy study =
          run_collective_study(topo, exact, study_spec(n, skew, DispatchAlgorithm::kDirect, 512));
      expect_identical(factored.run(study.dispatch.traffic), study.dispatch.result);
      expect_identical(factored.run(study.combine.traffic), study.combine.result);
    }
  }
}

TEST(FactoredBottleneckModel, ExactWithoutSpineTraffic) {
  // One leaf per rail: hierarchical dispatch keeps network traffic on its rail (no spine).
  const Topology topo = shipped("h800-8x8");
  BottleneckModel exact(topo);
  FactoredBottleneckModel factored(topo);
  for (const char* skew : kSkews) {
    const CollectiveStudy study = run_collective_study(
        topo, exact, study_spec(64, skew, DispatchAlgorithm::kHierarchical, 512));
    const CollectiveResult f = factored.run(study.dispatch.traffic);
    const CollectiveResult& e = study.dispatch.result;
    const double rel = std::abs(static_cast<double>(f.duration_ns - e.duration_ns)) /
                       static_cast<double>(e.duration_ns);
    EXPECT_LE(rel, 1e-9) << skew;
    EXPECT_EQ(f.num_flows, e.num_flows);
    EXPECT_EQ(f.bottleneck_link, e.bottleneck_link);
    for (size_t i = 0; i < f.recv_done_ns.size(); ++i) {
      EXPECT_NEAR(f.recv_done_ns[i], e.recv_done_ns[i], 1) << skew << " gpu " << i;
    }
  }
}

TEST(FactoredBottleneckModel, WithinBoundOnH800x64) {
  const Topology topo = shipped("h800-8x8");
  const Errors e64 = sweep(topo, 64, 1024);
  const Errors e32 = sweep(topo, 32, 1024);  // participants: the first 4 nodes
  std::printf("h800-8x8 worst duration error %.4f%%, per-GPU %.4f%%\n",
              100 * std::max(e64.duration, e32.duration), 100 * std::max(e64.per_gpu, e32.per_gpu));
}

TEST(FactoredBottleneckModel, WithinBoundOnH800x1024) {
  const Topology topo = shipped("h800-128x8");
  const Errors e = sweep(topo, 1024, 256);
  std::printf("h800-128x8 worst duration error %.4f%%, per-GPU %.4f%%\n", 100 * e.duration,
              100 * e.per_gpu);
}

TEST(FactoredBottleneckModel, WithinBoundOnTheStudysLayersOfSmallFatTrees) {
  // Two spines and one leaf per rail, or four nodes per leaf and cross-leaf same-rail traffic.
  // Oversubscribed 2:1, where the leaf -> spine links can be the bottleneck.
  for (auto [nodes, leaf_nodes, oversubscription] :
       {std::tuple{4, 4, 1.0}, std::tuple{8, 2, 1.0}, std::tuple{8, 2, 2.0}}) {
    TopologySpec spec = testing::h800_like_spec(nodes, 4);
    spec.leaf_gpus = leaf_nodes;
    spec.oversubscription = oversubscription;
    spec.name += "-leaf" + std::to_string(leaf_nodes) + (oversubscription > 1 ? "-os2" : "");
    const Topology topo = build_topology(spec);
    sweep(topo, topo.num_gpus(), 256);
  }
}

}  // namespace
}  // namespace moesim::sim::study
