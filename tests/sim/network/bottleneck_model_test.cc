#include "sim/network/bottleneck_model.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/sim/network/test_topologies.h"
#include "tests/sim/network/test_traffic.h"

namespace moesim::sim {
namespace {

using testing::first_n_gpus;

TEST(BottleneckModel, OneFlowTakesBytesOverTheSlowestLinkPlusRouteLatency) {
  const Topology topo = testing::h800_like(2, 4);
  BottleneckModel model(topo);
  TrafficMatrix m(first_n_gpus(8));
  m.set_bytes(0, 4, 50e6);  // inter-node: the 50 GB/s NIC limits
  const CollectiveResult r = model.run(m);
  EXPECT_EQ(r.num_flows, 1);
  const SimTime expected = from_seconds(50e6 / 50e9) + topo.route_latency_ns(GpuId(0), GpuId(4));
  EXPECT_EQ(r.duration_ns, expected);
  EXPECT_EQ(r.send_done_ns[0], expected);
  EXPECT_EQ(r.recv_done_ns[4], expected);
  EXPECT_EQ(r.send_done_ns[1], 0);
  EXPECT_EQ(r.bottleneck_class, LinkClass::kNic);
  EXPECT_DOUBLE_EQ(r.bottleneck_bytes, 50e6);
  EXPECT_EQ(r.barrier_wait_ns[4], 0);
  EXPECT_EQ(r.barrier_wait_ns[0], expected);  // received nothing
}

TEST(BottleneckModel, UniformAllToAllIsBoundBySendingNics) {
  const Topology topo = testing::h800_like(2, 4);
  BottleneckModel model(topo);
  const double bytes = 16e6;
  const CollectiveResult r = model.run(testing::uniform_all_to_all(8, bytes));
  // Each GPU sends 4 x bytes over its NIC (50 GB/s) and 3 x bytes over NVLink (200 GB/s).
  SimTime max_latency = 0;
  for (int32_t d = 4; d < 8; ++d)
    max_latency = std::max(max_latency, topo.route_latency_ns(GpuId(0), GpuId(d)));
  EXPECT_EQ(r.duration_ns, from_seconds(4 * bytes / 50e9) + max_latency);
  EXPECT_EQ(r.bottleneck_class, LinkClass::kNic);
  EXPECT_EQ(r.num_flows, 56);
  EXPECT_NEAR(r.bottleneck_bytes_per_s(), 50e9, 0.01 * 50e9);
}

TEST(BottleneckModel, HotDestinationIsBoundByItsReceivingNicAndOthersWaitAtTheBarrier) {
  const Topology topo = testing::h800_like(2, 4);
  BottleneckModel model(topo);
  const double bytes = 1e6;
  const CollectiveResult r = model.run(testing::hot_destination(8, bytes, 0, 8.0));
  // GPU 0 receives 4 x 8 MB over its NIC's down direction: 32 MB / 50 GB/s = 640 us.
  EXPECT_GE(r.duration_ns, from_seconds(32e6 / 50e9));
  EXPECT_LE(r.duration_ns, from_seconds(32e6 / 50e9) + 10'000);
  EXPECT_EQ(r.bottleneck_class, LinkClass::kNic);
  EXPECT_EQ(topo.links()[r.bottleneck_link].to_vertex, 0);  // into GPU 0
  EXPECT_EQ(r.recv_done_ns[0], r.duration_ns);
  EXPECT_EQ(r.barrier_wait_ns[0], 0);
  // GPU 5 receives only uniform traffic: it holds its inputs long before and waits; it is still
  // sending to GPU 0 until the end.
  EXPECT_GT(r.barrier_wait_ns[5], r.duration_ns / 2);
  EXPECT_EQ(r.send_done_ns[5], r.duration_ns);
}

TEST(BottleneckModel, EmptyTrafficTakesNoTime) {
  const Topology topo = testing::h800_like(2, 4);
  BottleneckModel model(topo);
  TrafficMatrix m(first_n_gpus(8));
  m.set_bytes(3, 3, 1e9);  // local bytes never touch the network
  const CollectiveResult r = model.run(m);
  EXPECT_EQ(r.duration_ns, 0);
  EXPECT_EQ(r.num_flows, 0);
  EXPECT_EQ(r.bottleneck_link, -1);
  EXPECT_EQ(r.bottleneck_bytes_per_s(), 0.0);
}

TEST(BottleneckModel, ParticipantsNeedNotBeTheFirstGpus) {
  const Topology topo = testing::h800_like(4, 4);
  BottleneckModel model(topo);
  std::vector<GpuId> gpus = {GpuId(8), GpuId(12)};
  TrafficMatrix m(gpus);
  m.set_bytes(0, 1, 1e6);
  const CollectiveResult r = model.run(m);
  EXPECT_EQ(r.duration_ns, from_seconds(1e6 / 50e9) + topo.route_latency_ns(GpuId(8), GpuId(12)));
  ASSERT_EQ(r.send_done_ns.size(), 2u);
}

TEST(BottleneckModel, ReusingTheModelGivesTheSameResult) {
  const Topology topo = testing::h800_like(4, 4);
  BottleneckModel model(topo);
  const TrafficMatrix zipf = testing::zipf_pairs(16, 1e6, 1.1, 9);
  const CollectiveResult first = model.run(zipf);
  model.run(testing::uniform_all_to_all(16, 3e5));
  const CollectiveResult again = model.run(zipf);
  EXPECT_EQ(first.duration_ns, again.duration_ns);
  EXPECT_EQ(first.send_done_ns, again.send_done_ns);
  EXPECT_EQ(first.bottleneck_link, again.bottleneck_link);
}

}  // namespace
}  // namespace moesim::sim
