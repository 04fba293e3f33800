#include "sim/network/node_limited_routing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "sim/core/rng.h"
#include "sim/network/traffic_matrix.h"
#include "tests/support/test_topologies.h"

namespace moesim::sim {
namespace {

std::vector<GpuId> gpu_range(int32_t count) {
  std::vector<GpuId> gpus;
  for (int32_t i = 0; i < count; ++i) gpus.push_back(GpuId(i));
  return gpus;
}

// Experts placed contiguously: expert e on participant e / (E / P).
std::vector<int32_t> contiguous(int32_t num_experts, int32_t p) {
  std::vector<int32_t> out(num_experts);
  for (int32_t e = 0; e < num_experts; ++e) out[e] = e / (num_experts / p);
  return out;
}

struct Sampled {
  TokenCounts counts;            // exact unique (token, GPU) counts
  double unique_node_pairs = 0;  // brute force: (token, node) pairs, own node excluded
};

// Brute-force DeepSeek-V3 router, token by token: expert scores log(popularity) + Gumbel noise
// (so that top-k without groups is sampling without replacement by popularity), group score the
// sum of its top-2 expert scores, the top `topk_groups` groups kept, the top `top_k` experts among
// them. Counts unique (token, GPU) and (token, node) pairs over participants 0 .. p-1.
Sampled sample(const Topology& topo, int32_t p, int32_t tokens_per_src,
               const std::vector<double>& popularity, int32_t num_groups, int32_t topk_groups,
               int32_t top_k, uint64_t seed) {
  const auto num_experts = static_cast<int32_t>(popularity.size());
  const int32_t per_group = num_experts / num_groups;
  const int32_t per_gpu = num_experts / p;
  const int32_t gpn = topo.gpus_per_node();
  Sampled out;
  out.counts.gpus = gpu_range(p);
  out.counts.tokens.assign(static_cast<size_t>(p) * p, 0);
  out.counts.tokens_per_src.assign(p, tokens_per_src);
  RngStream rng(seed, "node_limited_test");
  std::vector<double> score(num_experts), group_score(num_groups);
  std::vector<int32_t> groups(num_groups), kept;
  std::vector<uint8_t> gpu_hit(p), node_hit(p / gpn);
  for (int32_t s = 0; s < p; ++s) {
    for (int32_t t = 0; t < tokens_per_src; ++t) {
      for (int32_t e = 0; e < num_experts; ++e) {
        score[e] = std::log(popularity[e]) - std::log(-std::log(rng.uniform01_open()));
      }
      for (int32_t g = 0; g < num_groups; ++g) {
        double a = -INFINITY, b = -INFINITY;  // top two
        for (int32_t e = g * per_group; e < (g + 1) * per_group; ++e) {
          if (score[e] > a) {
            b = a;
            a = score[e];
          } else if (score[e] > b) {
            b = score[e];
          }
        }
        group_score[g] = per_group > 1 ? a + b : a;
      }
      std::iota(groups.begin(), groups.end(), 0);
      std::partial_sort(groups.begin(), groups.begin() + topk_groups, groups.end(),
                        [&](int32_t x, int32_t y) { return group_score[x] > group_score[y]; });
      kept.clear();
      for (int32_t i = 0; i < topk_groups; ++i) {
        for (int32_t e = groups[i] * per_group; e < (groups[i] + 1) * per_group; ++e) {
          kept.push_back(e);
        }
      }
      std::partial_sort(kept.begin(), kept.begin() + top_k, kept.end(),
                        [&](int32_t x, int32_t y) { return score[x] > score[y]; });
      std::fill(gpu_hit.begin(), gpu_hit.end(), 0);
      std::fill(node_hit.begin(), node_hit.end(), 0);
      for (int32_t i = 0; i < top_k; ++i) {
        gpu_hit[kept[i] / per_gpu] = 1;
        node_hit[kept[i] / per_gpu / gpn] = 1;
      }
      for (int32_t d = 0; d < p; ++d)
        out.counts.tokens[static_cast<size_t>(s) * p + d] += gpu_hit[d];
      for (int32_t n = 0; n < p / gpn; ++n) {
        if (n != s / gpn) out.unique_node_pairs += node_hit[n];
      }
    }
  }
  return out;
}

// Sum over sources and other nodes of the estimate the hierarchical dispatch uses: the relay
// rows' bytes at 1 byte per token.
double estimated_pairs(const Topology& topo, const TokenCounts& counts) {
  TrafficMatrix m;
  build_dispatch_traffic(topo, counts, 1.0, DispatchAlgorithm::kHierarchical, m);
  const int32_t p = counts.size();
  const int32_t gpn = topo.gpus_per_node();
  double pairs = 0;
  for (int32_t s = 0; s < p; ++s) {
    for (int32_t n = 0; n < p / gpn; ++n) {
      if (n == s / gpn) continue;
      const int32_t relay = n * gpn + s % gpn;
      pairs += m.bytes(s, relay);
    }
  }
  return pairs;
}

TEST(OpenFraction, HandValues) {
  EXPECT_DOUBLE_EQ(open_fraction(8, 4, 1), 0.5);                // 1 - C(7,4)/C(8,4) = 1 - 35/70
  EXPECT_DOUBLE_EQ(open_fraction(8, 4, 2), 1.0 - 15.0 / 70.0);  // C(6,4) = 15
  EXPECT_DOUBLE_EQ(open_fraction(8, 4, 0), 0.0);
  EXPECT_DOUBLE_EQ(open_fraction(8, 4, 5), 1.0);  // C(3,4) = 0
  EXPECT_DOUBLE_EQ(open_fraction(8, 8, 1), 1.0);
}

TEST(NodeLimit, FromContiguousPlacement) {
  const Topology topo = testing::h800_like(16, 8);
  // EP64: 8 nodes, one whole group each.
  NodeLimit l = node_limit_for_groups(topo, gpu_range(64), contiguous(256, 64), 8, 4, 8);
  ASSERT_EQ(l.open_fraction.size(), 16u);
  EXPECT_DOUBLE_EQ(l.open_fraction[0], 0.5);
  EXPECT_DOUBLE_EQ(l.guaranteed_share[7], 1.0);
  EXPECT_DOUBLE_EQ(l.extra_share, 0.5);       // (8 - 4) / 8
  EXPECT_DOUBLE_EQ(l.open_fraction[8], 1.0);  // not a participant's node: no expert
  // EP32: two whole groups per node.
  l = node_limit_for_groups(topo, gpu_range(32), contiguous(256, 32), 8, 4, 8);
  EXPECT_DOUBLE_EQ(l.open_fraction[3], 55.0 / 70.0);
  EXPECT_DOUBLE_EQ(l.guaranteed_share[3], 1.0);
  // EP128: every group split over two nodes.
  l = node_limit_for_groups(topo, gpu_range(128), contiguous(256, 128), 8, 4, 8);
  EXPECT_DOUBLE_EQ(l.open_fraction[15], 0.5);
  EXPECT_DOUBLE_EQ(l.guaranteed_share[15], 0.5);  // half of its group's 32 experts
  // top_k below topk_groups: no expert is guaranteed.
  l = node_limit_for_groups(topo, gpu_range(64), contiguous(256, 64), 8, 4, 2);
  EXPECT_DOUBLE_EQ(l.guaranteed_share[0], 0.0);
  EXPECT_DOUBLE_EQ(l.extra_share, 1.0);
  // No limit.
  EXPECT_TRUE(node_limit_for_groups(topo, gpu_range(64), contiguous(256, 64), 8, 8, 8).empty());
}

TEST(NodeLimitedEstimate, HandComputedRelayRow) {
  // 2 nodes x 2 GPUs; source 0 has 100 tokens, 30 reach GPU 2 and 40 reach GPU 3.
  const Topology topo = testing::h800_like(2, 2);
  TokenCounts c;
  c.gpus = gpu_range(4);
  c.tokens.assign(16, 0);
  c.tokens_per_src = {100, 0, 0, 0};
  c.tokens[2] = 30;
  c.tokens[3] = 40;
  TrafficMatrix m;
  build_dispatch_traffic(topo, c, 1.0, DispatchAlgorithm::kHierarchical, m);
  EXPECT_DOUBLE_EQ(m.bytes(0, 2), 100.0 * (1.0 - 0.7 * 0.6));  // independent: 58
  c.node_limit.open_fraction = {1.0, 0.5};
  c.node_limit.guaranteed_share = {1.0, 1.0};
  c.node_limit.extra_share = 0.5;
  build_dispatch_traffic(topo, c, 1.0, DispatchAlgorithm::kHierarchical, m);
  EXPECT_DOUBLE_EQ(m.bytes(0, 2), 50.0);  // whole groups: T a
  c.node_limit.open_fraction = {1.0, 0.8};
  c.node_limit.guaranteed_share = {1.0, 0.25};
  build_dispatch_traffic(topo, c, 1.0, DispatchAlgorithm::kHierarchical, m);
  // rho = 30 / 80 and 40 / 80, halved: 80 (1 - 0.75 x (1 - 0.1875) x (1 - 0.25)) = 43.4375.
  EXPECT_DOUBLE_EQ(m.bytes(0, 2), 80.0 * (1.0 - 0.75 * 0.8125 * 0.75));
  c.node_limit.open_fraction = {1.0, 0.3};
  c.node_limit.guaranteed_share = {1.0, 1.0};
  build_dispatch_traffic(topo, c, 1.0, DispatchAlgorithm::kHierarchical, m);
  EXPECT_DOUBLE_EQ(m.bytes(0, 2), 40.0);  // bounded below by max_d t_d
  // The forwarded rows are unchanged.
  EXPECT_DOUBLE_EQ(m.bytes(2, 3), 40.0);
}

// Participants that are not consecutive GPU ids take the general path of the hierarchical rule;
// with the node limit it gives the same relay rows as the whole-node path, bit for bit.
TEST(NodeLimitedEstimate, GeneralPathMatchesTheWholeNodePath) {
  const Topology topo = testing::h800_like(2, 4);
  TokenCounts a;
  a.gpus = gpu_range(8);
  a.tokens_per_src.assign(8, 100);
  a.tokens.resize(64);
  for (int32_t i = 0; i < 64; ++i) a.tokens[i] = (i * 37) % 41;
  a.node_limit.open_fraction = {0.6, 0.7};
  a.node_limit.guaranteed_share = {0.5, 0.25};
  a.node_limit.extra_share = 0.5;
  // b: the same GPUs, node 1 first.
  const std::vector<int32_t> b_of_a = {4, 5, 6, 7, 0, 1, 2, 3};  // index in b of a's participant
  TokenCounts b = a;
  for (int32_t i = 0; i < 8; ++i) b.gpus[b_of_a[i]] = a.gpus[i];
  for (int32_t s = 0; s < 8; ++s) {
    for (int32_t d = 0; d < 8; ++d) b.tokens[b_of_a[s] * 8 + b_of_a[d]] = a.tokens[s * 8 + d];
  }
  TrafficMatrix ma, mb;
  build_dispatch_traffic(topo, a, 1.0, DispatchAlgorithm::kHierarchical, ma);
  build_dispatch_traffic(topo, b, 1.0, DispatchAlgorithm::kHierarchical, mb);
  for (int32_t s = 0; s < 8; ++s) {
    for (int32_t d = 0; d < 8; ++d) {
      EXPECT_EQ(ma.bytes(s, d), mb.bytes(b_of_a[s], b_of_a[d])) << s << " -> " << d;
    }
  }
}

struct Case {
  int32_t ep;
  double tolerance;             // |estimate / brute force - 1|
  double min_unlimited_excess;  // the independent estimate overstates by at least this
};

// Uniform popularity, DeepSeek-V3's router (256 experts, 8 groups, top-4 groups, top-8).
// Measured (seed 7, 128 tokens per source): EP16 +0.2%, EP32 -0.0%, EP64 +0.5%,
// EP128 -2.5% (groups split over two nodes); the independent estimate: -1.4%, +8.9%, +26.8%,
// +10.8%.
TEST(NodeLimitedEstimate, MatchesBruteForceSampler) {
  const Topology topo = testing::h800_like(16, 8);
  const std::vector<double> uniform(256, 1.0 / 256);
  for (const Case& c :
       {Case{16, 0.02, -1.0}, Case{32, 0.02, 0.05}, Case{64, 0.02, 0.20}, Case{128, 0.04, 0.05}}) {
    SCOPED_TRACE("EP" + std::to_string(c.ep));
    Sampled s = sample(topo, c.ep, 128, uniform, 8, 4, 8, 7);
    const double independent = estimated_pairs(topo, s.counts);
    s.counts.node_limit =
        node_limit_for_groups(topo, s.counts.gpus, contiguous(256, c.ep), 8, 4, 8);
    const double limited = estimated_pairs(topo, s.counts);
    std::printf("EP%d: brute force %.0f, limited %+.2f%%, independent %+.2f%%\n", c.ep,
                s.unique_node_pairs, 100 * (limited / s.unique_node_pairs - 1),
                100 * (independent / s.unique_node_pairs - 1));
    EXPECT_NEAR(limited / s.unique_node_pairs, 1.0, c.tolerance);
    EXPECT_GT(independent / s.unique_node_pairs - 1.0, c.min_unlimited_excess);
  }
}

// Skewed popularity (Zipf 0.8 over a random-free ranking: expert e has weight 1 / (e % 32 + 1)^0.8
// so every group has the same profile): the group choice stays balanced and the estimate holds.
TEST(NodeLimitedEstimate, ZipfWithinGroupsWithinTolerance) {
  const Topology topo = testing::h800_like(8, 8);
  std::vector<double> pop(256);
  double sum = 0;
  for (int32_t e = 0; e < 256; ++e) sum += pop[e] = std::pow(e % 32 + 1.0, -0.8);
  for (double& x : pop) x /= sum;
  Sampled s = sample(topo, 64, 128, pop, 8, 4, 8, 11);
  s.counts.node_limit = node_limit_for_groups(topo, s.counts.gpus, contiguous(256, 64), 8, 4, 8);
  const double limited = estimated_pairs(topo, s.counts);
  std::printf("EP64 zipf-in-group: limited %+.2f%%\n", 100 * (limited / s.unique_node_pairs - 1));
  EXPECT_NEAR(limited / s.unique_node_pairs, 1.0, 0.03);
}

}  // namespace
}  // namespace moesim::sim
