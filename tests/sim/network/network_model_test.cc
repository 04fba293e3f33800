#include "sim/network/network_model.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

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

// Host-link contention (set_link_slowdown): one flow of 50 MB from node 0 to node 1 crosses its
// source's NIC up and its destination's NIC down (50 GB/s each): 1 ms alone, 2 ms with the
// destination's NIC link at half its rate, back to 1 ms once cleared, on both models that apply
// it; the link bytes they report carry the flow's bytes.
TEST(NetworkModel, LinkSlowdownStretchesTheSlowedLinkOnly) {
  const Topology topo = build_topology(testing::h800_sxm_cluster_spec(2, 8, 1, true));
  const std::vector<GpuId> gpus = {GpuId{0}, GpuId{8}};
  TrafficMatrix t(gpus);
  t.set_bytes(0, 1, 50e6);
  int32_t nic_in_of_8 = -1;
  for (size_t l = 0; l < topo.links().size(); ++l) {
    const Link& link = topo.links()[l];
    if (link.link_class == LinkClass::kNic && link.to_vertex == 8) {
      nic_in_of_8 = static_cast<int32_t>(l);
    }
  }
  ASSERT_GE(nic_in_of_8, 0);
  std::vector<double> slow(topo.links().size(), 1.0);
  slow[static_cast<size_t>(nic_in_of_8)] = 2.0;
  for (const std::string name : {"bottleneck", "fluid"}) {
    SCOPED_TRACE(name);
    auto model = NetworkModelRegistry().make(name, topo);
    const SimTime alone = model->run(t).duration_ns;
    EXPECT_NEAR(static_cast<double>(alone), 1e6, 5e3);  // + route latency
    EXPECT_EQ(model->link_bytes()[static_cast<size_t>(nic_in_of_8)], 50e6);
    ASSERT_TRUE(model->set_link_slowdown(slow));
    const CollectiveResult slowed = model->run(t);
    EXPECT_NEAR(static_cast<double>(slowed.duration_ns - alone), 1e6, 2.0);
    EXPECT_EQ(slowed.bottleneck_link, nic_in_of_8);
    EXPECT_DOUBLE_EQ(slowed.bottleneck_capacity_bytes_per_s, 25e9);
    ASSERT_TRUE(model->set_link_slowdown({}));
    EXPECT_EQ(model->run(t).duration_ns, alone);
  }
  // The factored model does not apply it (refused by scenario validation with [kv_tiers]).
  auto factored = NetworkModelRegistry().make("bottleneck_factored", topo);
  EXPECT_FALSE(factored->set_link_slowdown(slow));
  EXPECT_TRUE(factored->set_link_slowdown({}));
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

// Durations beyond the horizon (sim/core/horizon.h, issue 19): a link of 1e-300 GB/s made an
// all-to-all wrap to a negative duration, which the step model then took as 1 ns.
std::string horizon_error_of(NetworkModel& model, const TrafficMatrix& traffic) {
  try {
    model.run(traffic);
  } catch (const HorizonError& e) {
    return e.what();
  }
  return "(no error)";
}

Topology slow_nic_topology(double nic_bytes_per_s) {
  TopologySpec spec = testing::h800_like_spec(2, 4);
  spec.nic_bytes_per_s = nic_bytes_per_s;
  return build_topology(spec);
}

TEST(CollectiveHorizon, ALinkOf1em300GbytesPerSecondIsAnErrorInEveryModel) {
  const Topology topo = slow_nic_topology(1e-300 * 1e9);
  const TrafficMatrix traffic = testing::uniform_all_to_all(8, 1e6);
  NetworkModelRegistry registry;
  for (const std::string& name : registry.names()) {
    std::unique_ptr<NetworkModel> model = registry.make(name, topo);
    const std::string message = horizon_error_of(*model, traffic);
    SCOPED_TRACE(name + ": " + message);
    EXPECT_EQ(message.rfind("network: an all-to-all takes ", 0), 0u);
    EXPECT_NE(message.find(" s, beyond the 100-year horizon (3.156e+09 s): its bottleneck, link "),
              std::string::npos);
    EXPECT_NE(message.find("check the bandwidths and latencies of topology 'test-2x4'"),
              std::string::npos);
  }
  // The uplink of GPU 0's NIC carries its 4 cross-node flows: 4e6 bytes at 1e-291 bytes/s.
  std::unique_ptr<NetworkModel> bottleneck = registry.make("bottleneck", topo);
  EXPECT_EQ(horizon_error_of(*bottleneck, traffic),
            "network: an all-to-all takes 4e+297 s, beyond the 100-year horizon (3.156e+09 s): "
            "its bottleneck, link nic gpu0->leaf0, carries 4e+06 bytes at 1e-291 bytes/s; check "
            "the bandwidths and latencies of topology 'test-2x4' (and a calibration profile's "
            "network efficiencies)");
}

TEST(CollectiveHorizon, ACapacityWhoseInverseOverflowsIsAnErrorNotACrash) {
  // 1 / 1e-320 is infinite: link times become infinite (and 0 x infinity NaN).
  const Topology topo = slow_nic_topology(1e-320);
  const TrafficMatrix traffic = testing::uniform_all_to_all(8, 1e6);
  NetworkModelRegistry registry;
  for (const std::string& name : registry.names()) {
    std::unique_ptr<NetworkModel> model = registry.make(name, topo);
    const std::string message = horizon_error_of(*model, traffic);
    SCOPED_TRACE(name + ": " + message);
    EXPECT_EQ(message.rfind("network: an all-to-all takes inf s, beyond the 100-year horizon", 0),
              0u);
  }
}

TEST(CollectiveHorizon, AHugeLatencyIsAnErrorInEveryModel) {
  // Readers refuse latencies above 1 s; a spec built in code can carry one of a century.
  TopologySpec spec = testing::h800_like_spec(2, 4);
  spec.nic_latency_ns = kHorizonNs;
  const Topology topo = build_topology(spec);
  const TrafficMatrix traffic = testing::uniform_all_to_all(8, 1e6);
  NetworkModelRegistry registry;
  for (const std::string& name : registry.names()) {
    std::unique_ptr<NetworkModel> model = registry.make(name, topo);
    const std::string message = horizon_error_of(*model, traffic);
    SCOPED_TRACE(name + ": " + message);
    EXPECT_EQ(message.rfind("network: an all-to-all takes 6.312e+09 s, beyond the 100-year "
                            "horizon (3.156e+09 s)",
                            0),
              0u);
  }
}

TEST(CollectiveHorizon, TheSameTopologyWithinTheHorizonRuns) {
  const Topology topo = slow_nic_topology(1e-3);  // 1 byte per 1000 s: slow, but representable
  const TrafficMatrix traffic = testing::uniform_all_to_all(8, 1e3);
  NetworkModelRegistry registry;
  for (const std::string& name : registry.names()) {
    const CollectiveResult r = registry.make(name, topo)->run(traffic);
    EXPECT_GT(r.duration_ns, 3 * kNsPerS * 1'000'000) << name;  // over a month
    EXPECT_LE(r.duration_ns, kHorizonNs) << name;
  }
}

}  // namespace
}  // namespace moesim::sim
