#include "sim/network/fluid_model.h"

#include <gtest/gtest.h>

#include "sim/network/bottleneck_model.h"
#include "tests/sim/network/test_traffic.h"
#include "tests/support/test_topologies.h"

namespace moesim::sim {
namespace {

using testing::first_n_gpus;

TEST(FluidModel, OneFlowTakesBytesOverTheSlowestLinkPlusRouteLatency) {
  const Topology topo = testing::h800_like(2, 4);
  FluidModel model(topo);
  TrafficMatrix m(first_n_gpus(8));
  m.set_bytes(1, 6, 10e6);
  const CollectiveResult r = model.run(m);
  EXPECT_EQ(r.duration_ns,
            from_seconds(10e6 / 50e9 + to_seconds(topo.route_latency_ns(GpuId(1), GpuId(6)))));
  EXPECT_EQ(r.recv_done_ns[6], r.duration_ns);
  EXPECT_EQ(r.bottleneck_class, LinkClass::kNic);
}

TEST(FluidModel, TwoFlowsIntoOneGpuShareItsReceivingNic) {
  const Topology topo = testing::h800_like(2, 4);
  FluidModel model(topo);
  TrafficMatrix m(first_n_gpus(8));
  m.set_bytes(4, 0, 10e6);
  m.set_bytes(5, 0, 30e6);
  const CollectiveResult r = model.run(m);
  // Both at 25 GB/s until the 10 MB flow ends, then the other alone at 50 GB/s: 40 MB / 50 GB/s
  // overall, plus latencies of a few microseconds.
  EXPECT_NEAR(to_seconds(r.duration_ns), 40e6 / 50e9, 10e-6);
  EXPECT_LT(r.send_done_ns[4], r.send_done_ns[5]);
}

// The fluid model and the bottleneck bound agree when one link dominates: the fluid schedule is
// work-conserving on the bottleneck link, which starts within a route latency of time 0.
TEST(FluidModel, AgreesWithTheBottleneckBoundOnAllToAlls) {
  for (int32_t num_nodes : {2, 4}) {
    const Topology topo = testing::h800_like(num_nodes, 4);
    const int32_t n = topo.num_gpus();
    FluidModel fluid(topo);
    BottleneckModel bound(topo);
    const TrafficMatrix cases[] = {testing::uniform_all_to_all(n, 2e6),
                                   testing::hot_destination(n, 2e6, 3, 6.0),
                                   testing::zipf_pairs(n, 2e6, 1.0, 11)};
    for (const TrafficMatrix& m : cases) {
      const CollectiveResult f = fluid.run(m);
      const CollectiveResult b = bound.run(m);
      EXPECT_NEAR(static_cast<double>(f.duration_ns), static_cast<double>(b.duration_ns),
                  0.02 * static_cast<double>(b.duration_ns))
          << num_nodes << " nodes";
      EXPECT_EQ(f.bottleneck_link, b.bottleneck_link);
    }
  }
}

}  // namespace
}  // namespace moesim::sim
