#include "sim/network/fast_all_to_all.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sim/network/bottleneck_model.h"
#include "sim/network/factored_bottleneck_model.h"
#include "sim/topology/topology_parser.h"
#include "tests/support/test_topologies.h"

namespace moesim::sim {
namespace {

Topology shipped(const std::string& stem) { return testing::shipped_topology(stem); }

std::vector<GpuId> first_gpus(int32_t n, int32_t first = 0) {
  std::vector<GpuId> g;
  for (int32_t i = 0; i < n; ++i) g.push_back(GpuId(first + i));
  return g;
}

// Product-form counts with whole tokens: tokens(s, d) = T_s x reach_d, T_s a multiple of 64 and
// reach_d = k_d / 64 (skewed: a few hot destinations).
struct ProductForm {
  std::vector<double> tokens, reach;
  TokenCounts counts;
};

ProductForm product_form(const std::vector<GpuId>& gpus, int64_t seed) {
  ProductForm f;
  const auto p = static_cast<int32_t>(gpus.size());
  f.counts.gpus = gpus;
  for (int32_t i = 0; i < p; ++i) {
    f.tokens.push_back(64.0 * static_cast<double>(1 + (i * 7 + seed) % 5));
    const int32_t k = (i % 11 == 3) ? 40 : 1 + (i * 13 + seed) % 9;
    f.reach.push_back(k / 64.0);
  }
  f.counts.tokens.assign(static_cast<size_t>(p) * p, 0);
  for (int32_t s = 0; s < p; ++s) {
    f.counts.tokens_per_src.push_back(static_cast<int64_t>(f.tokens[s]));
    for (int32_t d = 0; d < p; ++d) {
      f.counts.tokens[static_cast<size_t>(s) * p + d] =
          static_cast<int64_t>(f.tokens[s] * f.reach[d]);
    }
  }
  return f;
}

// The fast fidelity's collective against the factored bound (the same even spine spread) and the
// exact bound, on counts that have product form: with one leaf per rail and hierarchical
// dispatch no flow crosses a spine, so all three agree; otherwise fast = factored.
void expect_matches(const Topology& topology, const std::vector<GpuId>& gpus,
                    DispatchAlgorithm algorithm, bool exact_too, const NodeLimit& limit = {}) {
  for (int64_t seed = 0; seed < 3; ++seed) {
    ProductForm f = product_form(gpus, seed);
    f.counts.node_limit = limit;
    FastAllToAll fast(topology, gpus, algorithm);
    ASSERT_TRUE(fast.valid()) << fast.why_not();
    fast.set_node_limit(limit);
    fast.load(f.tokens, f.reach);
    FactoredBottleneckModel factored(topology);
    BottleneckModel exact(topology);
    const double row_bytes = 7168;
    for (const bool combine : {false, true}) {
      TrafficMatrix traffic;
      if (combine) {
        build_combine_traffic(topology, f.counts, row_bytes, algorithm, traffic);
      } else {
        build_dispatch_traffic(topology, f.counts, row_bytes, algorithm, traffic);
      }
      const double want = to_seconds(factored.run(traffic).duration_ns);
      const double got =
          combine ? fast.combine_seconds(row_bytes) : fast.dispatch_seconds(row_bytes);
      EXPECT_NEAR(got, want, 1e-9 * want + 1e-9) << (combine ? "combine" : "dispatch");
      if (exact_too) {
        EXPECT_NEAR(got, to_seconds(exact.run(traffic).duration_ns), 1e-9 * want + 1e-9);
      }
      EXPECT_NEAR(fast.total_tokens() * row_bytes, traffic.total_bytes(),
                  1e-9 * traffic.total_bytes());
    }
  }
}

TEST(FastAllToAll, DirectDispatchMatchesTheFactoredBoundOnAFatTree) {
  const Topology t = shipped("h800-8x8");
  expect_matches(t, first_gpus(64), DispatchAlgorithm::kDirect, false);
  expect_matches(t, first_gpus(32, 16), DispatchAlgorithm::kDirect, false);
}

TEST(FastAllToAll, HierarchicalDispatchMatchesTheFactoredBoundOnAFatTree) {
  const Topology t = shipped("h800-8x8");
  expect_matches(t, first_gpus(64), DispatchAlgorithm::kHierarchical, false);
  expect_matches(t, first_gpus(32, 32), DispatchAlgorithm::kHierarchical, false);
}

// Where every participant's links are alike, both collectives are timed from the largest loads
// of each kind; a slowdown of exactly 1 everywhere forces the per-participant pass, which must
// give the same seconds bit for bit (direct and hierarchical, through spines and not).
TEST(FastAllToAll, LargestLoadsTimeAsThePerParticipantPass) {
  const Topology t = shipped("h800-8x8");
  std::vector<GpuId> one_per_node;  // node i, rail i: no NVLink; every flow through a spine
  for (int32_t node = 0; node < 8; ++node) one_per_node.push_back(GpuId(node * 9));
  for (const DispatchAlgorithm algorithm :
       {DispatchAlgorithm::kDirect, DispatchAlgorithm::kHierarchical}) {
    for (const std::vector<GpuId>& gpus :
         {first_gpus(64), first_gpus(32, 32), first_gpus(8), one_per_node}) {
      if (algorithm == DispatchAlgorithm::kHierarchical && gpus.size() == 8 && gpus[1].value != 1) {
        continue;  // hierarchical dispatch takes whole nodes
      }
      for (int64_t seed = 0; seed < 3; ++seed) {
        const ProductForm f = product_form(gpus, seed);
        FastAllToAll uniform(t, gpus, algorithm), per(t, gpus, algorithm);
        ASSERT_TRUE(uniform.valid()) << uniform.why_not();
        const std::vector<double> ones(gpus.size(), 1.0);
        per.set_nic_slowdown(ones, ones);
        uniform.load(f.tokens, f.reach);
        per.load(f.tokens, f.reach);
        const FastAllToAll::Seconds a = uniform.both_seconds(7168, 3584);
        const FastAllToAll::Seconds b = per.both_seconds(7168, 3584);
        EXPECT_EQ(a.dispatch, b.dispatch) << gpus.size() << " GPUs, seed " << seed;
        EXPECT_EQ(a.combine, b.combine) << gpus.size() << " GPUs, seed " << seed;
        EXPECT_GT(a.dispatch, 0);
      }
    }
  }
}

// One object loaded in turn with different tokens and reaches (a step's layers share their
// tokens; the next step's differ): every figure bit for bit those of a fresh object, so nothing
// kept from a previous load() leaks into the next.
TEST(FastAllToAll, ReloadsGiveAFreshObjectsFigures) {
  const Topology t = shipped("h800-8x8");
  for (const DispatchAlgorithm algorithm :
       {DispatchAlgorithm::kDirect, DispatchAlgorithm::kHierarchical}) {
    const std::vector<GpuId> gpus = first_gpus(64);
    FastAllToAll kept(t, gpus, algorithm);
    const ProductForm a = product_form(gpus, 0), b = product_form(gpus, 1);
    ProductForm a_other_reach = a;
    a_other_reach.reach = b.reach;
    for (const ProductForm* f : std::vector<const ProductForm*>{&a, &a_other_reach, &b, &a}) {
      FastAllToAll fresh(t, gpus, algorithm);
      kept.load(f->tokens, f->reach);
      fresh.load(f->tokens, f->reach);
      const FastAllToAll::Seconds x = kept.both_seconds(7168, 3584);
      const FastAllToAll::Seconds y = fresh.both_seconds(7168, 3584);
      EXPECT_EQ(x.dispatch, y.dispatch);
      EXPECT_EQ(x.combine, y.combine);
      EXPECT_EQ(kept.total_tokens(), fresh.total_tokens());
      std::vector<double> in_x(gpus.size()), out_x(gpus.size()), in_y(gpus.size()),
          out_y(gpus.size());
      kept.add_nic_bytes(1.0, false, in_x, out_x);
      fresh.add_nic_bytes(1.0, false, in_y, out_y);
      EXPECT_EQ(in_x, in_y);
      EXPECT_EQ(out_x, out_y);
    }
    // The tokens differ between the two loads (else the test would not reach the token sums).
    EXPECT_NE(a.tokens, b.tokens);
  }
}

TEST(FastAllToAll, MatchesTheExactBoundWhereNoFlowCrossesASpine) {
  // One leaf per rail: hierarchical traffic stays on its rail; one node: NVLink only.
  const Topology rails = testing::h800_like(4, 8);
  expect_matches(rails, first_gpus(32), DispatchAlgorithm::kHierarchical, true);
  const Topology node = shipped("h200-node");
  expect_matches(node, first_gpus(node.num_gpus()), DispatchAlgorithm::kDirect, true);
}

// Node-limited routing (node_limited_routing.h) in both fidelities: whole groups per node (256
// experts, 8 groups, top-4 groups, top-8) and groups split over two nodes (2 groups, top-1).
TEST(FastAllToAll, NodeLimitedRoutingMatchesTheExactTier) {
  const Topology rails = testing::h800_like(4, 8);
  const std::vector<GpuId> gpus = first_gpus(32);
  std::vector<int32_t> expert_gpu(256);
  for (int32_t e = 0; e < 256; ++e) expert_gpu[e] = e / 8;
  const NodeLimit whole = node_limit_for_groups(rails, gpus, expert_gpu, 8, 4, 8);
  ASSERT_FALSE(whole.empty());
  expect_matches(rails, gpus, DispatchAlgorithm::kHierarchical, true, whole);
  const NodeLimit split = node_limit_for_groups(rails, gpus, expert_gpu, 2, 1, 8);
  ASSERT_DOUBLE_EQ(split.guaranteed_share[0], 0.5);
  expect_matches(rails, gpus, DispatchAlgorithm::kHierarchical, true, split);
  // And it changes the traffic: with DeepSeek-V3's balanced reach (8 experts per GPU: 1 -
  // C(248, 8) / C(256, 8) = 0.2295 without the limit) each other node is reached by
  // 1 - 0.7705^8 = 87.6% of a source's tokens independently, by a = 1 - C(6, 4) / C(8, 4) = 78.6%
  // node-limited.
  const std::vector<double> tokens(32, 128.0), reach(32, 0.2295);
  FastAllToAll fast(rails, gpus, DispatchAlgorithm::kHierarchical);
  fast.load(tokens, reach);
  const double independent = fast.total_tokens();
  fast.set_node_limit(whole);
  fast.load(tokens, reach);
  // Network tokens: 32 sources x 3 other nodes x 128 x g; NVLink tokens unchanged.
  EXPECT_NEAR(independent - fast.total_tokens(),
              32 * 3 * 128 * ((1 - std::pow(1 - 0.2295, 8)) - (1 - 15.0 / 70.0)), 1e-6);
  EXPECT_LT(fast.total_tokens(), independent);
}

TEST(FastAllToAll, RefusesWhatItCannotTime) {
  const Topology t = shipped("h800-8x8");
  // Hierarchical dispatch needs whole nodes.
  FastAllToAll partial(t, first_gpus(12), DispatchAlgorithm::kHierarchical);
  EXPECT_FALSE(partial.valid());
  EXPECT_NE(partial.why_not().find("whole consecutive nodes"), std::string::npos);
  // Participants out of order.
  FastAllToAll unordered(t, {GpuId(3), GpuId(1)}, DispatchAlgorithm::kDirect);
  EXPECT_FALSE(unordered.valid());
  // Direct dispatch over part of a node is fine.
  EXPECT_TRUE(FastAllToAll(t, first_gpus(12), DispatchAlgorithm::kDirect).valid());
}

TEST(FastAllToAll, NoTrafficTakesNoTime) {
  const Topology t = shipped("h800-8x8");
  FastAllToAll fast(t, first_gpus(16), DispatchAlgorithm::kHierarchical);
  const std::vector<double> zeros(16, 0.0);
  fast.load(zeros, zeros);
  EXPECT_EQ(fast.dispatch_seconds(7168), 0.0);
  EXPECT_EQ(fast.combine_seconds(7168), 0.0);
  EXPECT_EQ(fast.total_tokens(), 0.0);
}

}  // namespace
}  // namespace moesim::sim
