#include "sim/network/traffic_matrix.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "sim/core/rng.h"
#include "tests/support/test_topologies.h"

namespace moesim::sim {
namespace {

std::vector<GpuId> first_gpus(int32_t n) {
  std::vector<GpuId> gpus;
  for (int32_t i = 0; i < n; ++i) gpus.push_back(GpuId(i));
  return gpus;
}

TokenCounts zero_counts(int32_t n, int64_t tokens_per_src) {
  TokenCounts c;
  c.gpus = first_gpus(n);
  c.tokens.assign(static_cast<size_t>(n) * n, 0);
  c.tokens_per_src.assign(n, tokens_per_src);
  return c;
}

void set(TokenCounts& c, int32_t s, int32_t d, int64_t n) {
  c.tokens[static_cast<size_t>(s) * c.gpus.size() + d] = n;
}

TEST(TokenBytes, Fp8CarriesOneScalePer128ChannelsBf16TwoBytes) {
  EXPECT_DOUBLE_EQ(token_bytes(7168, WireDtype::kFp8), 7168 + 56 * 4);
  EXPECT_DOUBLE_EQ(token_bytes(7168, WireDtype::kBf16), 14336);
  EXPECT_DOUBLE_EQ(token_bytes(129, WireDtype::kFp8), 129 + 2 * 4);
}

TEST(TrafficMatrix, SentAndReceivedExcludeTheDiagonal) {
  TrafficMatrix m(first_gpus(3));
  m.set_bytes(0, 0, 100);
  m.set_bytes(0, 1, 5);
  m.add_bytes(0, 1, 5);
  m.set_bytes(2, 1, 7);
  EXPECT_DOUBLE_EQ(m.sent_bytes(0), 10);
  EXPECT_DOUBLE_EQ(m.received_bytes(1), 17);
  EXPECT_DOUBLE_EQ(m.received_bytes(0), 0);
  EXPECT_DOUBLE_EQ(m.total_bytes(), 17);
  EXPECT_EQ(m.row(0).size(), 3u);
}

TEST(TrafficMatrix, DirectDispatchIsCountsTimesBytesAndCombineItsTranspose) {
  const Topology topo = testing::h800_like(2, 4);
  TokenCounts c = zero_counts(8, 100);
  set(c, 0, 5, 10);
  set(c, 3, 1, 4);
  set(c, 2, 2, 9);
  TrafficMatrix dispatch, combine;
  build_dispatch_traffic(topo, c, 3.0, DispatchAlgorithm::kDirect, dispatch);
  build_combine_traffic(topo, c, 2.0, DispatchAlgorithm::kDirect, combine);
  EXPECT_DOUBLE_EQ(dispatch.bytes(0, 5), 30);
  EXPECT_DOUBLE_EQ(dispatch.bytes(3, 1), 12);
  EXPECT_DOUBLE_EQ(dispatch.bytes(2, 2), 27);
  EXPECT_DOUBLE_EQ(dispatch.total_bytes(), 42);
  EXPECT_DOUBLE_EQ(combine.bytes(5, 0), 20);
  EXPECT_DOUBLE_EQ(combine.bytes(1, 3), 8);
  EXPECT_DOUBLE_EQ(combine.bytes(0, 5), 0);
}

TEST(TrafficMatrix, HierarchicalCrossesTheNetworkOncePerNodeToTheSameRailGpu) {
  const Topology topo = testing::h800_like(2, 4);
  TokenCounts c = zero_counts(8, 100);
  // GPU 1 (node 0, rail 1) sends 10 tokens to each GPU of node 1 and 6 to GPU 2 (same node).
  for (int32_t d = 4; d < 8; ++d) set(c, 1, d, 10);
  set(c, 1, 2, 6);
  c.unique_node_tokens.assign(8 * 2, 0);
  c.unique_node_tokens[1 * 2 + 1] = 15;
  TrafficMatrix m;
  build_dispatch_traffic(topo, c, 1.0, DispatchAlgorithm::kHierarchical, m);
  EXPECT_DOUBLE_EQ(m.bytes(1, 5), 15);  // the network stage, to the relay (node 1, rail 1)
  EXPECT_DOUBLE_EQ(m.bytes(5, 4), 10);  // NVLink forwards from the relay
  EXPECT_DOUBLE_EQ(m.bytes(5, 6), 10);
  EXPECT_DOUBLE_EQ(m.bytes(5, 7), 10);
  EXPECT_DOUBLE_EQ(m.bytes(1, 4), 0);
  EXPECT_DOUBLE_EQ(m.bytes(1, 2), 6);  // intra-node traffic goes straight
  EXPECT_DOUBLE_EQ(m.total_bytes(), 15 + 30 + 6);
}

TEST(TrafficMatrix, HierarchicalApproximatesUniqueNodeTokensByIndependence) {
  const Topology topo = testing::h800_like(2, 4);
  TokenCounts c = zero_counts(8, 100);
  for (int32_t d = 4; d < 8; ++d) set(c, 0, d, 10);
  TrafficMatrix m;
  build_dispatch_traffic(topo, c, 1.0, DispatchAlgorithm::kHierarchical, m);
  EXPECT_NEAR(m.bytes(0, 4), 100 * (1 - 0.9 * 0.9 * 0.9 * 0.9), 1e-9);
}

TEST(TrafficMatrix, ApproximateUniqueTokensStayWithinTheirBounds) {
  const Topology topo = testing::h800_like(4, 4);
  RngStream rng(3, "traffic_bounds");
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t tokens = 1 + static_cast<int64_t>(rng.uniform_int(200));
    TokenCounts c = zero_counts(16, tokens);
    for (int64_t& n : c.tokens) n = static_cast<int64_t>(rng.uniform_int(tokens + 1));
    TrafficMatrix m;
    build_dispatch_traffic(topo, c, 1.0, DispatchAlgorithm::kHierarchical, m);
    for (int32_t s = 0; s < 16; ++s) {
      for (int32_t node = 0; node < 4; ++node) {
        if (node == s / 4) continue;
        const int32_t relay = node * 4 + s % 4;
        int64_t max_n = 0, sum_n = 0;
        for (int32_t d = node * 4; d < node * 4 + 4; ++d) {
          max_n = std::max(max_n, c.at(s, d));
          sum_n += c.at(s, d);
        }
        EXPECT_GE(m.bytes(s, relay), static_cast<double>(max_n) - 1e-9);
        EXPECT_LE(m.bytes(s, relay), static_cast<double>(std::min(tokens, sum_n)) + 1e-9);
      }
    }
  }
}

TEST(TrafficMatrix, HierarchicalCombineIsTheTransposeOfDispatch) {
  const Topology topo = testing::h800_like(4, 4);
  RngStream rng(5, "traffic_transpose");
  TokenCounts c = zero_counts(16, 64);
  for (int64_t& n : c.tokens) n = static_cast<int64_t>(rng.uniform_int(65));
  TrafficMatrix dispatch, combine;
  build_dispatch_traffic(topo, c, 1.0, DispatchAlgorithm::kHierarchical, dispatch);
  build_combine_traffic(topo, c, 1.0, DispatchAlgorithm::kHierarchical, combine);
  for (int32_t a = 0; a < 16; ++a) {
    for (int32_t b = 0; b < 16; ++b) EXPECT_DOUBLE_EQ(combine.bytes(b, a), dispatch.bytes(a, b));
  }
}

TEST(TrafficMatrix, HierarchicalMovesFewerNetworkBytesThanDirectWhenTokensRepeatPerNode) {
  const Topology topo = testing::h800_like(2, 4);
  TokenCounts c = zero_counts(8, 100);
  for (int32_t s = 0; s < 8; ++s) {
    for (int32_t d = 0; d < 8; ++d) set(c, s, d, 30);
  }
  TrafficMatrix direct, hier;
  build_dispatch_traffic(topo, c, 1.0, DispatchAlgorithm::kDirect, direct);
  build_dispatch_traffic(topo, c, 1.0, DispatchAlgorithm::kHierarchical, hier);
  auto network_bytes = [](const TrafficMatrix& m) {
    double sum = 0;
    for (int32_t s = 0; s < 8; ++s) {
      for (int32_t d = 0; d < 8; ++d) {
        if (s / 4 != d / 4) sum += m.bytes(s, d);
      }
    }
    return sum;
  };
  EXPECT_DOUBLE_EQ(network_bytes(direct), 8 * 4 * 30);
  // Per (source, node): 100 x (1 - 0.7^4) = 75.99 instead of 120.
  EXPECT_NEAR(network_bytes(hier), 8 * 100 * (1 - 0.7 * 0.7 * 0.7 * 0.7), 1e-6);
}

// The hierarchical rule written out plainly (traffic_matrix.h's file comment): per source in
// order, direct NVLink rows within its node, relay forwards for other nodes, then one network
// row per (source, destination node).
TrafficMatrix reference_hierarchical(const Topology& topo, const TokenCounts& c, double row_bytes,
                                     bool combine) {
  TrafficMatrix out(c.gpus);
  const int32_t p = c.size();
  auto idx_of = [&](int32_t gpu) {
    for (int32_t i = 0; i < p; ++i) {
      if (c.gpus[i].value == gpu) return i;
    }
    return -1;
  };
  auto add = [&](int32_t from, int32_t to, double bytes) {
    combine ? out.add_bytes(to, from, bytes) : out.add_bytes(from, to, bytes);
  };
  for (int32_t s = 0; s < p; ++s) {
    const int32_t src_node = topo.node_of(c.gpus[s]).value;
    const double t = static_cast<double>(c.tokens_per_src[s]);
    std::vector<double> not_reached(topo.num_nodes(), 1.0);
    std::vector<bool> reached(topo.num_nodes(), false);
    for (int32_t d = 0; d < p; ++d) {
      const int64_t n = c.at(s, d);
      if (n <= 0) continue;
      const int32_t node = topo.node_of(c.gpus[d]).value;
      if (node == src_node) {
        add(s, d, static_cast<double>(n) * row_bytes);
        continue;
      }
      reached[node] = true;
      not_reached[node] *= 1.0 - static_cast<double>(n) / t;
      const int32_t relay = idx_of(node * topo.gpus_per_node() + topo.rail_of(c.gpus[s]));
      if (relay != d) add(relay, d, static_cast<double>(n) * row_bytes);
    }
    for (int32_t node = 0; node < topo.num_nodes(); ++node) {
      if (!reached[node]) continue;
      const double unique =
          c.unique_node_tokens.empty()
              ? t * (1.0 - not_reached[node])
              : static_cast<double>(
                    c.unique_node_tokens[static_cast<size_t>(s) * topo.num_nodes() + node]);
      add(s, idx_of(node * topo.gpus_per_node() + topo.rail_of(c.gpus[s])), unique * row_bytes);
    }
  }
  return out;
}

// Whole consecutive nodes (not starting at GPU 0) take the table-free path, other participant
// sets the general one; both must equal the plain rule bit for bit, with and without given
// unique (token, node) counts, for dispatch and combine.
TEST(TrafficMatrix, HierarchicalBuildersEqualThePlainRuleBitForBit) {
  const Topology topo = testing::h800_like(4, 4);
  RngStream rng(11, "traffic_reference");
  std::vector<std::vector<GpuId>> participant_sets;
  participant_sets.push_back(
      {GpuId(4), GpuId(5), GpuId(6), GpuId(7), GpuId(8), GpuId(9), GpuId(10), GpuId(11)});
  participant_sets.push_back({GpuId(0), GpuId(1), GpuId(4), GpuId(5), GpuId(12), GpuId(13)});
  participant_sets.push_back(first_gpus(16));
  for (const std::vector<GpuId>& gpus : participant_sets) {
    const auto p = static_cast<int32_t>(gpus.size());
    for (bool given_unique : {false, true}) {
      TokenCounts c;
      c.gpus = gpus;
      c.tokens.assign(static_cast<size_t>(p) * p, 0);
      c.tokens_per_src.assign(p, 0);
      for (int32_t s = 0; s < p; ++s) {
        c.tokens_per_src[s] = 1 + static_cast<int64_t>(rng.uniform_int(200));
        for (int32_t d = 0; d < p; ++d) {
          if (rng.uniform01() < 0.3) continue;
          c.tokens[static_cast<size_t>(s) * p + d] =
              static_cast<int64_t>(rng.uniform_int(c.tokens_per_src[s] + 1));
        }
      }
      if (given_unique) {
        c.unique_node_tokens.resize(static_cast<size_t>(p) * topo.num_nodes());
        for (int64_t& u : c.unique_node_tokens) u = static_cast<int64_t>(rng.uniform_int(50));
      }
      for (bool combine : {false, true}) {
        TrafficMatrix built;
        if (combine) {
          build_combine_traffic(topo, c, 7392.0, DispatchAlgorithm::kHierarchical, built);
        } else {
          build_dispatch_traffic(topo, c, 7392.0, DispatchAlgorithm::kHierarchical, built);
        }
        const TrafficMatrix expected = reference_hierarchical(topo, c, 7392.0, combine);
        for (int32_t a = 0; a < p; ++a) {
          for (int32_t b = 0; b < p; ++b) {
            EXPECT_EQ(built.bytes(a, b), expected.bytes(a, b))
                << "participants " << p << " entry " << a << "," << b;
          }
        }
        double total = 0;
        for (int32_t a = 0; a < p; ++a) total += built.sent_bytes(a);
        EXPECT_EQ(built.total_bytes(), total);
      }
    }
  }
}

TEST(DispatchAlgorithm, NamesRoundTrip) {
  EXPECT_EQ(parse_dispatch_algorithm("direct"), DispatchAlgorithm::kDirect);
  EXPECT_EQ(parse_dispatch_algorithm(dispatch_algorithm_name(DispatchAlgorithm::kHierarchical)),
            DispatchAlgorithm::kHierarchical);
  EXPECT_FALSE(parse_dispatch_algorithm("pxn").has_value());
  EXPECT_EQ(parse_wire_dtype("fp8"), WireDtype::kFp8);
  EXPECT_FALSE(parse_wire_dtype("fp16").has_value());
}

}  // namespace
}  // namespace moesim::sim
