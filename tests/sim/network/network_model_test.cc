#include "sim/network/network_model.h"

#include <gtest/gtest.h>

#include "sim/config/config_error.h"
#include "tests/sim/network/test_traffic.h"
#include "tests/support/test_topologies.h"

namespace moesim::sim {
namespace {

TEST(NetworkModelRegistry, MakesModelsByName) {
  const Topology topo = testing::h800_like(2, 4);
  NetworkModelRegistry registry;
  EXPECT_EQ(registry.names(),
            (std::vector<std::string>{"bottleneck", "bottleneck_factored", "fluid"}));
  EXPECT_EQ(registry.make("bottleneck", topo)->name(), "bottleneck");
  EXPECT_EQ(registry.make("bottleneck_factored", topo)->name(), "bottleneck_factored");
  EXPECT_EQ(registry.make("fluid", topo)->name(), "fluid");
}

TEST(NetworkModelRegistry, UnknownNameListsTheValidOnes) {
  const Topology topo = testing::h800_like(2, 4);
  NetworkModelRegistry registry;
  try {
    registry.make("ns3", topo, "scenario.network.model");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "scenario.network.model");
    EXPECT_NE(e.reason().find("unknown network model 'ns3'"), std::string::npos);
    EXPECT_NE(e.reason().find("bottleneck, bottleneck_factored, fluid"), std::string::npos);
  }
}

TEST(NetworkModelRegistry, AddedFactoriesAreListedInOrder) {
  const Topology topo = testing::h800_like(2, 4);
  NetworkModelRegistry registry;
  registry.add("copy",
               [](const Topology& t) { return NetworkModelRegistry().make("bottleneck", t); });
  EXPECT_EQ(registry.names(),
            (std::vector<std::string>{"bottleneck", "bottleneck_factored", "copy", "fluid"}));
  EXPECT_EQ(registry.make("copy", topo)->name(), "bottleneck");
}

TEST(CollectiveResult, BarrierWaitIsDurationMinusReceiveCompletion) {
  CollectiveResult r;
  r.duration_ns = 100;
  r.send_done_ns = {100, 40, 0};
  r.recv_done_ns = {30, 100, 0};
  set_barrier_waits(r);
  EXPECT_EQ(r.barrier_wait_ns, (std::vector<SimTime>{70, 0, 100}));
}

TEST(CollectiveResult, BottleneckIsTheLinkWithTheLongestDrainTime) {
  const Topology topo = testing::h800_like(2, 4);
  std::vector<double> link_bytes(topo.links().size(), 0.0);
  int32_t nvlink = -1, nic = -1;
  for (size_t l = 0; l < topo.links().size(); ++l) {
    if (topo.links()[l].link_class == LinkClass::kNvlink && nvlink < 0) nvlink = l;
    if (topo.links()[l].link_class == LinkClass::kNic && nic < 0) nic = l;
  }
  link_bytes[nvlink] = 3e6;  // 3 MB at 200 GB/s: 15 us
  link_bytes[nic] = 1e6;     // 1 MB at 50 GB/s: 20 us
  CollectiveResult r;
  set_bottleneck(topo, link_bytes, r);
  EXPECT_EQ(r.bottleneck_link, nic);
  EXPECT_EQ(r.bottleneck_class, LinkClass::kNic);
  EXPECT_DOUBLE_EQ(r.bottleneck_bytes, 1e6);
  EXPECT_DOUBLE_EQ(r.bottleneck_capacity_bytes_per_s, 50e9);
}

}  // namespace
}  // namespace moesim::sim
