#include "sim/topology/bisection.h"

#include <gtest/gtest.h>

#include "sim/topology/topology_parser.h"
#include "tests/support/test_topologies.h"

namespace moesim::sim {
namespace {

const std::string kTopologies = std::string(MOESIM_SOURCE_DIR) + "/topologies/";

TEST(Bisection, H800EightByEightMatchesHandComputation) {
  // Nodes 0-3 against nodes 4-7. NVLink never crosses (NVSwitches are per node), so every byte
  // leaves through one of the first half's 32 NICs (50 GB/s each) and enters through one of the
  // second half's 32 NICs: 32 x 50 GB/s = 1.6 TB/s, which the non-blocking leaves and spines
  // carry (each rail leaf even passes 4 x 50 GB/s directly between its two halves).
  EXPECT_DOUBLE_EQ(bisection_bytes_per_s(load_topology(kTopologies + "h800-8x8.toml")), 1.6e12);
}

TEST(Bisection, ThousandGpuFatTreeIsFullBisection) {
  // 512 GPUs x 50 GB/s; the rail leaves of nodes 0-63 reach the others only through spines:
  // 16 leaves x 16 spines x 100 GB/s = 25.6 TB/s, the same figure.
  EXPECT_DOUBLE_EQ(bisection_bytes_per_s(load_topology(kTopologies + "h800-128x8.toml")), 25.6e12);
}

TEST(Bisection, SingleNodeSplitsItsGpus) {
  // GPUs 0-3 against 4-7 through the NVSwitch: 4 x 360 GB/s.
  EXPECT_DOUBLE_EQ(bisection_bytes_per_s(load_topology(kTopologies + "h100-node.toml")), 1.44e12);
  // Full mesh: the 16 links from {0..3} to {4..7}, 537.6 x 0.8 / 7 GB/s each (line rate x the
  // default efficiency; rounded to whole bytes/s).
  EXPECT_NEAR(bisection_bytes_per_s(load_topology(kTopologies + "mi355x-node.toml")),
              16 * 537.6e9 * 0.8 / 7, 16.0);
  // NVL72: nodes 0-8 (36 GPUs) against nodes 9-17 in one NVSwitch domain: 36 x 720 GB/s.
  EXPECT_DOUBLE_EQ(bisection_bytes_per_s(load_topology(kTopologies + "gb200-nvl72.toml")),
                   25.92e12);
}

TEST(Bisection, OversubscribedUplinksLimitTheCut) {
  // 4 nodes, not rail-optimised: nodes 0-1 on leaf 0, nodes 2-3 on leaf 1; 2 spines.
  TopologySpec spec = testing::h800_sxm_cluster_spec(4, 16, 2, false);
  spec.oversubscription = 2.0;
  // Leaf 0's uplinks: 16 x 50 GB/s / 2 = 400 GB/s, the whole cut.
  EXPECT_DOUBLE_EQ(bisection_bytes_per_s(Topology(spec)), 400e9);
}

}  // namespace
}  // namespace moesim::sim
