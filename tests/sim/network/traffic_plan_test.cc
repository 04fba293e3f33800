#include "sim/network/traffic_plan.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/rng.h"
#include "tests/support/test_topologies.h"

namespace moesim::sim {
namespace {

std::vector<GpuId> gpu_range(int32_t first, int32_t count) {
  std::vector<GpuId> gpus;
  for (int32_t i = 0; i < count; ++i) gpus.push_back(GpuId(first + i));
  return gpus;
}

// Random counts over `gpus`: a share `zero_share` of the entries zero, the rest up to the
// source's tokens; unique (token, node) counts when `given_unique`.
TokenCounts random_counts(const Topology& topo, std::vector<GpuId> gpus, RngStream& rng,
                          bool given_unique, double zero_share = 0.3) {
  TokenCounts c;
  c.gpus = std::move(gpus);
  const auto p = static_cast<int32_t>(c.gpus.size());
  c.tokens.assign(static_cast<size_t>(p) * p, 0);
  c.tokens_per_src.assign(p, 0);
  for (int32_t s = 0; s < p; ++s) {
    // Some sources hold no tokens at all.
    c.tokens_per_src[s] =
        rng.uniform01() < 0.1 ? 0 : 1 + static_cast<int64_t>(rng.uniform_int(200));
    for (int32_t d = 0; d < p; ++d) {
      if (c.tokens_per_src[s] == 0 || rng.uniform01() < zero_share) continue;
      c.tokens[static_cast<size_t>(s) * p + d] =
          static_cast<int64_t>(rng.uniform_int(c.tokens_per_src[s] + 1));
    }
  }
  if (given_unique) {
    c.unique_node_tokens.resize(static_cast<size_t>(p) * topo.num_nodes());
    for (int64_t& u : c.unique_node_tokens) u = static_cast<int64_t>(rng.uniform_int(50));
  }
  return c;
}

uint64_t bits(double x) { return std::bit_cast<uint64_t>(x); }

// Same participants and the same bits in every entry.
void expect_same_bits(const TrafficMatrix& a, const TrafficMatrix& b) {
  ASSERT_EQ(a.gpus(), b.gpus());
  for (int32_t s = 0; s < a.size(); ++s) {
    for (int32_t d = 0; d < a.size(); ++d) {
      EXPECT_EQ(bits(a.bytes(s, d)), bits(b.bytes(s, d))) << "entry " << s << "," << d;
    }
  }
}

// total_bytes() written out: rows in order, each in column order, diagonal excluded.
double plain_total(const TrafficMatrix& m) {
  double total = 0;
  for (int32_t s = 0; s < m.size(); ++s) {
    double row = 0;
    for (int32_t d = 0; d < m.size(); ++d) {
      if (d != s) row += m.bytes(s, d);
    }
    total += row;
  }
  return total;
}

struct Case {
  Topology topo;
  std::vector<GpuId> gpus;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  // Whole nodes not starting at GPU 0 (the supported path), a participant set that is not whole
  // nodes (the general path), all GPUs, and 3 nodes of 2 GPUs (6 rows: total_bytes()'s rows
  // past the last group of four).
  out.push_back({testing::h800_like(4, 4), gpu_range(4, 8)});
  out.push_back(
      {testing::h800_like(4, 4), {GpuId(0), GpuId(1), GpuId(4), GpuId(5), GpuId(12), GpuId(13)}});
  out.push_back({testing::h800_like(4, 4), gpu_range(0, 16)});
  out.push_back({testing::h800_like(3, 2), gpu_range(0, 6)});
  return out;
}

// The plan's matrices against the builders (whose rule traffic_matrix_test.cc checks against
// the plain rule), bit for bit, for both algorithms, with and without given unique counts and
// with row sizes that make the relay rows' bytes non-integral.
TEST(TrafficPlan, MatricesEqualTheBuildersBitForBit) {
  RngStream rng(21, "traffic_plan");
  TrafficPlan plan;  // reused across cases: storage and support are rebuilt as needed
  for (const Case& tc : cases()) {
    for (const DispatchAlgorithm algorithm :
         {DispatchAlgorithm::kHierarchical, DispatchAlgorithm::kDirect}) {
      for (const bool given_unique : {false, true}) {
        const TokenCounts c = random_counts(tc.topo, tc.gpus, rng, given_unique);
        plan.build(tc.topo, c, algorithm);
        for (const double row_bytes : {7392.0, 14336.0, 1000.25}) {
          SCOPED_TRACE(std::string(dispatch_algorithm_name(algorithm)) + " participants " +
                       std::to_string(c.size()) + " row bytes " + std::to_string(row_bytes));
          TrafficMatrix built, planned;
          build_dispatch_traffic(tc.topo, c, row_bytes, algorithm, built);
          plan.dispatch_traffic(row_bytes, planned);
          expect_same_bits(planned, built);
          EXPECT_EQ(bits(planned.total_bytes()), bits(built.total_bytes()));
          EXPECT_EQ(bits(planned.total_bytes()), bits(plain_total(built)));
          build_combine_traffic(tc.topo, c, row_bytes, algorithm, built);
          plan.combine_traffic(row_bytes, planned);
          expect_same_bits(planned, built);
          EXPECT_EQ(bits(planned.total_bytes()), bits(plain_total(built)));
        }
      }
    }
  }
}

// Hierarchical matrices of whole nodes carry a row support (ascending, within range) outside
// which every entry is +0.0; other participant sets and direct traffic carry none.
TEST(TrafficPlan, WholeNodeHierarchicalMatricesCarryTheirRowSupport) {
  RngStream rng(22, "traffic_plan_support");
  TrafficPlan plan;
  for (const Case& tc : cases()) {
    const TokenCounts c = random_counts(tc.topo, tc.gpus, rng, false, 0.1);
    const bool whole_nodes = c.gpus[0].value % tc.topo.gpus_per_node() == 0 &&
                             c.gpus.back().value - c.gpus[0].value == c.size() - 1;
    plan.build(tc.topo, c, DispatchAlgorithm::kHierarchical);
    for (const bool combine : {false, true}) {
      TrafficMatrix m;
      combine ? plan.combine_traffic(7392, m) : plan.dispatch_traffic(7392, m);
      SCOPED_TRACE("participants " + std::to_string(c.size()) + (combine ? " combine" : ""));
      ASSERT_EQ(m.has_support(), whole_nodes);
      if (!whole_nodes) continue;
      const int32_t gpn = tc.topo.gpus_per_node();
      for (int32_t s = 0; s < m.size(); ++s) {
        std::vector<bool> in_support(m.size(), false);
        int32_t last = -1;
        for (const int32_t d : m.support(s)) {
          EXPECT_GT(d, last);
          EXPECT_LT(d, m.size());
          last = d;
          in_support[d] = true;
        }
        // Own node plus the source's rail GPU on every other node.
        EXPECT_EQ(static_cast<int32_t>(m.support(s).size()), gpn + m.size() / gpn - 1);
        for (int32_t d = 0; d < m.size(); ++d) {
          if (!in_support[d]) {
            EXPECT_EQ(bits(m.bytes(s, d)), 0u) << s << "," << d;
          }
        }
      }
    }
  }
  // Direct traffic: none.
  const Case tc = cases()[0];
  plan.build(tc.topo, random_counts(tc.topo, tc.gpus, rng, false), DispatchAlgorithm::kDirect);
  TrafficMatrix m;
  plan.dispatch_traffic(7392, m);
  EXPECT_FALSE(m.has_support());
}

// A write can fall outside the support: every write drops it, and total_bytes() then sums the
// whole matrix.
TEST(TrafficPlan, WritesAndResetsDropTheSupport) {
  const Case tc = cases()[0];
  RngStream rng(23, "traffic_plan_writes");
  TrafficPlan plan;
  plan.build(tc.topo, random_counts(tc.topo, tc.gpus, rng, false),
             DispatchAlgorithm::kHierarchical);
  TrafficMatrix m;
  plan.dispatch_traffic(7392, m);
  ASSERT_TRUE(m.has_support());
  m.add_bytes(0, m.size() - 1, 5.0);  // outside row 0's support (another node, another rail)
  EXPECT_FALSE(m.has_support());
  EXPECT_EQ(bits(m.total_bytes()), bits(plain_total(m)));
  plan.dispatch_traffic(7392, m);
  m.set_bytes(0, 0, 1.0);
  EXPECT_FALSE(m.has_support());
  plan.dispatch_traffic(7392, m);
  m.reset(tc.gpus);
  EXPECT_FALSE(m.has_support());
  EXPECT_EQ(m.total_bytes(), 0.0);
}

}  // namespace
}  // namespace moesim::sim
