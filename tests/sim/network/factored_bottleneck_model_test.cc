#include "sim/network/factored_bottleneck_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>

#include "sim/network/bottleneck_model.h"
#include "sim/topology/topology_parser.h"
#include "tests/sim/network/collective_expect.h"
#include "tests/sim/network/test_traffic.h"
#include "tests/support/test_topologies.h"

namespace moesim::sim {
namespace {

// Largest relative difference of the collective duration against the exact model on 2 MB
// patterns (docs/network.md): 0 on non-oversubscribed trees, -7.7% on a small 2:1 oversubscribed
// fat tree (two spines: a pair's flow takes one spine, the factored model spreads it).
constexpr double kDurationBound = 0.04;
constexpr double kOversubscribedDurationBound = 0.08;

Topology shipped(const std::string& stem) { return testing::shipped_topology(stem); }

using testing::expect_identical;

TEST(FactoredBottleneckModel, IsRegisteredByName) {
  const Topology topo = testing::h800_like(2, 4);
  EXPECT_EQ(NetworkModelRegistry().make("bottleneck_factored", topo)->name(),
            "bottleneck_factored");
  EXPECT_TRUE(FactoredBottleneckModel(topo).factored());
}

TEST(FactoredBottleneckModel, ExactOnOneNvlinkDomain) {
  // The study's dispatch and combine on one domain: tests/sim/study/collective_study_test.cc.
  for (const char* stem : {"h200-node", "gb200-nvl72"}) {
    const Topology topo = shipped(stem);
    BottleneckModel exact(topo);
    FactoredBottleneckModel factored(topo);
    ASSERT_TRUE(factored.factored()) << stem;
    const int32_t n = topo.num_gpus();
    // Non-integral and sparse bytes: the same sums in the same order.
    TrafficMatrix zipf = testing::zipf_pairs(n, 1e6, 1.2, 7);
    for (int32_t s = 0; s < n; ++s) {
      for (int32_t d = 0; d < n; ++d) zipf.set_bytes(s, d, zipf.bytes(s, d) * 0.37 * ((s + d) % 3));
    }
    expect_identical(factored.run(zipf), exact.run(zipf));
  }
}

TEST(FactoredBottleneckModel, WithinBoundOnSmallFatTrees) {
  // Two spines and one leaf per rail, or four nodes per leaf and cross-leaf same-rail traffic.
  // Oversubscribed 2:1, where the leaf -> spine links can be the bottleneck. The study's layers
  // on these trees: tests/sim/study/collective_study_test.cc.
  for (auto [nodes, leaf_nodes, oversubscription] :
       {std::tuple{4, 4, 1.0}, std::tuple{8, 2, 1.0}, std::tuple{8, 2, 2.0}}) {
    TopologySpec spec = testing::h800_like_spec(nodes, 4);
    spec.leaf_gpus = leaf_nodes;
    spec.oversubscription = oversubscription;
    spec.name += "-leaf" + std::to_string(leaf_nodes) + (oversubscription > 1 ? "-os2" : "");
    const Topology topo = build_topology(spec);
    BottleneckModel exact(topo);
    FactoredBottleneckModel factored(topo);
    for (const TrafficMatrix& m : {testing::uniform_all_to_all(topo.num_gpus(), 2e6),
                                   testing::hot_destination(topo.num_gpus(), 2e6, 5, 6.0)}) {
      const CollectiveResult e = exact.run(m);
      const CollectiveResult f = factored.run(m);
      const double err =
          static_cast<double>(f.duration_ns - e.duration_ns) / static_cast<double>(e.duration_ns);
      std::printf("%s 2 MB pattern: factored %+.4f%%\n", topo.name().c_str(), 100 * err);
      EXPECT_LE(std::abs(err), oversubscription > 1 ? kOversubscribedDurationBound : kDurationBound)
          << topo.name();
    }
  }
}

TEST(FactoredBottleneckModel, FallsBackToTheExactModel) {
  // A full-mesh domain (one link per pair) and participants out of order.
  const Topology mesh = shipped("mi355x-node");
  FactoredBottleneckModel mesh_model(mesh);
  EXPECT_FALSE(mesh_model.factored());
  BottleneckModel mesh_exact(mesh);
  const TrafficMatrix zipf = testing::zipf_pairs(mesh.num_gpus(), 1e6, 1.0, 3);
  expect_identical(mesh_model.run(zipf), mesh_exact.run(zipf));

  const Topology topo = testing::h800_like(2, 4);
  FactoredBottleneckModel factored(topo);
  BottleneckModel exact(topo);
  const std::vector<GpuId> order = {GpuId(5), GpuId(0), GpuId(7), GpuId(2)};
  TrafficMatrix shuffled(order);
  for (int32_t s = 0; s < 4; ++s) {
    for (int32_t d = 0; d < 4; ++d) {
      if (s != d) shuffled.set_bytes(s, d, 1e6 * (1 + s + 2 * d));
    }
  }
  expect_identical(factored.run(shuffled), exact.run(shuffled));
  EXPECT_TRUE(factored.link_bytes().empty());
}

TEST(FactoredBottleneckModel, ReusesResultsAcrossParticipantSets) {
  const Topology topo = testing::h800_like(4, 4);
  FactoredBottleneckModel factored(topo);
  BottleneckModel exact(topo);
  const TrafficMatrix all = testing::uniform_all_to_all(16, 1e6);
  const TrafficMatrix half = testing::uniform_all_to_all(8, 1e6);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(factored.run(all).num_flows, 16 * 15);
    EXPECT_EQ(factored.run(half).num_flows, 8 * 7);
  }
  const std::vector<GpuId> four = testing::first_n_gpus(4);
  const CollectiveResult empty_result = factored.run(TrafficMatrix(four));
  EXPECT_EQ(empty_result.duration_ns, 0);
  EXPECT_EQ(empty_result.bottleneck_link, -1);
}

}  // namespace
}  // namespace moesim::sim
