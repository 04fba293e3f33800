// The SimGrid backend, and the cross-check of all three network models on small topologies.
//
// SimGrid allows one engine per process, so each TEST creates exactly one SimgridModel (ctest
// runs every TEST in its own process through gtest_discover_tests). A TEST may run several
// collectives on its model: the engine's clock carries on and results are relative to each run.
//
// Agreement bounds (measured on 2x4, 4x4, 2x8 and 8x8 H800-like topologies with uniform,
// hot-destination and Zipf per-pair all-to-alls of 2 MB mean; docs/network.md lists the table):
//   duration, bottleneck vs SimGrid: |rel| <= 1.2% measured, bound 2.5%. The bound adds the
//     largest route latency of the bottleneck link's flows, the fluid schedules start each flow
//     after its own latency; and under strong skew a non-bottleneck link can hold a flow back.
//   duration, fluid vs SimGrid: |rel| <= 0.51% measured, bound 1.5%. Both are max-min fluid
//     models; CM02 weights shares by inverse route latency, ours are equal.
//   per-GPU receive completion, fluid vs SimGrid: <= 2.2% of the duration measured, bound 5%
//     (the latency weights reorder which flows finish first; the last one moves little).
#if defined(MOESIM_HAVE_SIMGRID)

#include "sim/network/simgrid/simgrid_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "sim/core/horizon.h"
#include "sim/network/bottleneck_model.h"
#include "sim/network/fluid_model.h"
#include "tests/sim/network/test_traffic.h"
#include "tests/support/test_topologies.h"

namespace moesim::sim {
namespace {

constexpr double kBottleneckVsSimgridRel = 0.025;
constexpr double kFluidVsSimgridRel = 0.015;
constexpr double kRecvDoneVsSimgridOfDuration = 0.05;

double rel_diff(SimTime a, SimTime b) {
  return std::abs(static_cast<double>(a) - static_cast<double>(b)) / static_cast<double>(b);
}

void cross_check(int32_t num_nodes, int32_t gpus_per_node) {
  const Topology topo = testing::h800_like(num_nodes, gpus_per_node);
  const int32_t n = topo.num_gpus();
  SimgridModel simgrid(topo);
  BottleneckModel bottleneck(topo);
  FluidModel fluid(topo);
  const std::pair<std::string, TrafficMatrix> cases[] = {
      {"uniform", testing::uniform_all_to_all(n, 2e6)},
      {"hot destination", testing::hot_destination(n, 2e6, 3, 6.0)},
      {"zipf 1.0", testing::zipf_pairs(n, 2e6, 1.0, 11)},
      {"zipf 1.5", testing::zipf_pairs(n, 2e6, 1.5, 12)},
  };
  for (const auto& [label, traffic] : cases) {
    SCOPED_TRACE(label);
    const CollectiveResult s = simgrid.run(traffic);
    const CollectiveResult b = bottleneck.run(traffic);
    const CollectiveResult f = fluid.run(traffic);
    ASSERT_GT(s.duration_ns, 0);
    EXPECT_EQ(s.num_flows, b.num_flows);
    EXPECT_LE(rel_diff(b.duration_ns, s.duration_ns), kBottleneckVsSimgridRel)
        << "bottleneck " << b.duration_ns << " simgrid " << s.duration_ns;
    EXPECT_LE(rel_diff(f.duration_ns, s.duration_ns), kFluidVsSimgridRel)
        << "fluid " << f.duration_ns << " simgrid " << s.duration_ns;
    for (int32_t g = 0; g < n; ++g) {
      EXPECT_LE(std::abs(static_cast<double>(f.recv_done_ns[g] - s.recv_done_ns[g])),
                kRecvDoneVsSimgridOfDuration * static_cast<double>(s.duration_ns))
          << "gpu " << g;
    }
    EXPECT_EQ(s.bottleneck_link, b.bottleneck_link);
  }
}

TEST(SimgridModel, OneFlowTakesBytesOverTheSlowestLinkPlusRouteLatency) {
  const Topology topo = testing::h800_like(2, 4);
  SimgridModel model(topo);
  TrafficMatrix m(testing::first_n_gpus(8));
  m.set_bytes(2, 7, 25e6);
  const CollectiveResult r = model.run(m);
  const double expected_s = 25e6 / 50e9 + to_seconds(topo.route_latency_ns(GpuId(2), GpuId(7)));
  EXPECT_NEAR(to_seconds(r.duration_ns), expected_s, 2e-9);
  EXPECT_EQ(r.recv_done_ns[7], r.duration_ns);
  EXPECT_EQ(r.send_done_ns[2], r.duration_ns);
  EXPECT_EQ(r.recv_done_ns[2], 0);
  // A second collective on the same engine is timed from its own start.
  const CollectiveResult again = model.run(m);
  EXPECT_EQ(again.duration_ns, r.duration_ns);
}

TEST(SimgridModel, CrossCheckTwoNodesOfFour) { cross_check(2, 4); }

TEST(SimgridModel, CrossCheckFourNodesOfFour) { cross_check(4, 4); }

TEST(SimgridModel, RegisteredByName) {
  const Topology topo = testing::h800_like(2, 4);
  NetworkModelRegistry registry;
  register_simgrid_model(registry);
  EXPECT_EQ(registry.names(),
            (std::vector<std::string>{"bottleneck", "bottleneck_factored", "fluid", "simgrid"}));
  const std::unique_ptr<NetworkModel> model = registry.make("simgrid", topo);
  EXPECT_EQ(model->name(), "simgrid");
  const CollectiveResult r = model->run(testing::hot_destination(8, 1e6, 0, 4.0));
  EXPECT_EQ(r.recv_done_ns[0], r.duration_ns);
  EXPECT_EQ(r.barrier_wait_ns[0], 0);
  EXPECT_GT(r.barrier_wait_ns[1], 0);
}

// A collective beyond the horizon (sim/core/horizon.h) is an error here too: NICs of 1 byte/s
// carrying 4e9 bytes per cross-node pair.
TEST(SimgridModel, ACollectiveBeyondTheHorizonIsAnError) {
  TopologySpec spec = testing::h800_like_spec(2, 4);
  spec.nic_bytes_per_s = 1.0;
  const Topology topo = build_topology(spec);
  SimgridModel model(topo);
  try {
    model.run(testing::uniform_all_to_all(8, 4e9));
    FAIL() << "expected HorizonError";
  } catch (const HorizonError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("network: an all-to-all takes ", 0), 0u) << message;
    EXPECT_NE(message.find("beyond the 100-year horizon (3.156e+09 s): its bottleneck, link "),
              std::string::npos)
        << message;
  }
}

}  // namespace
}  // namespace moesim::sim

#endif  // MOESIM_HAVE_SIMGRID
