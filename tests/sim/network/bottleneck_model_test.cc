#include "sim/network/bottleneck_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "sim/core/rng.h"
#include "sim/network/traffic_plan.h"
#include "tests/sim/network/test_traffic.h"
#include "tests/support/test_topologies.h"

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

// Random bytes with zeros (a share `zero_share` of the entries) and diagonal entries (which the
// model must ignore); `fraction` is added to every non-zero entry (0: integral bytes, which run()
// sums per route class when the first row is dense).
TrafficMatrix random_traffic(std::vector<GpuId> gpus, uint64_t seed, double fraction = 0.25,
                             double zero_share = 0.3) {
  RngStream rng(seed, "bottleneck_random_traffic");
  TrafficMatrix m(gpus);
  const auto p = static_cast<int32_t>(gpus.size());
  for (int32_t s = 0; s < p; ++s) {
    for (int32_t d = 0; d < p; ++d) {
      if (rng.uniform01() < zero_share) continue;
      m.set_bytes(s, d, std::round(1e6 * rng.uniform01() * rng.uniform01()) + fraction);
    }
  }
  return m;
}

void expect_same(const BottleneckModel& a, const CollectiveResult& ra, const BottleneckModel& b,
                 const CollectiveResult& rb) {
  EXPECT_EQ(ra.duration_ns, rb.duration_ns);
  EXPECT_EQ(ra.send_done_ns, rb.send_done_ns);
  EXPECT_EQ(ra.recv_done_ns, rb.recv_done_ns);
  EXPECT_EQ(ra.barrier_wait_ns, rb.barrier_wait_ns);
  EXPECT_EQ(ra.num_flows, rb.num_flows);
  EXPECT_EQ(ra.bottleneck_link, rb.bottleneck_link);
  EXPECT_EQ(ra.bottleneck_bytes, rb.bottleneck_bytes);
  const std::span<const double> la = a.link_bytes();
  const std::span<const double> lb = b.link_bytes();
  ASSERT_EQ(la.size(), lb.size());
  for (size_t l = 0; l < la.size(); ++l) EXPECT_EQ(la[l], lb[l]) << "link " << l;
}

std::vector<GpuId> gpu_range(int32_t first, int32_t count) {
  std::vector<GpuId> gpus;
  for (int32_t i = 0; i < count; ++i) gpus.push_back(GpuId(first + i));
  return gpus;
}

// The structured hot path against the per-route reference, bit for bit: rail-optimised and
// plain fat trees (routes of 2, 3... and 4 links over spines), a single node, consecutive
// participants that are not the first GPUs, and participants that are not consecutive (which
// run() hands to the reference path).
TEST(BottleneckModel, StructuredPathEqualsThePerRouteReferenceBitForBit) {
  TopologySpec plain = testing::h800_like_spec(8, 4);
  plain.rail_optimized = false;
  plain.leaf_gpus = 8;
  plain.num_spines = 3;
  TopologySpec rail = testing::h800_like_spec(8, 4);
  rail.leaf_gpus = 2;  // 4 leaves per rail: same-rail pairs also cross the spines
  const std::vector<Topology> topologies = {testing::h800_like(4, 4), build_topology(plain),
                                            build_topology(rail), testing::h800_like(1, 8)};
  uint64_t seed = 1;
  for (const Topology& topo : topologies) {
    BottleneckModel fast(topo);
    BottleneckModel reference(topo);
    EXPECT_TRUE(fast.structured()) << topo.name();
    const int32_t g = topo.num_gpus();
    std::vector<std::vector<GpuId>> participant_sets = {gpu_range(0, g), gpu_range(g / 4, g / 2)};
    participant_sets.push_back({GpuId(g - 1), GpuId(0), GpuId(g / 2), GpuId(1)});
    for (const std::vector<GpuId>& gpus : participant_sets) {
      for (int32_t trial = 0; trial < 8; ++trial) {
        // Trials 0-2 non-integral bytes (the ordered path), 3-5 integral (the class sums), 6-7
        // integral and sparse (the ordered path).
        const TrafficMatrix m =
            random_traffic(gpus, seed++, trial < 3 ? 0.25 : 0.0, trial < 6 ? 0.3 : 0.8);
        CollectiveResult rf, rr;
        fast.run(m, rf);
        reference.run_reference(m, rr);
        SCOPED_TRACE(topo.name() + " participants " + std::to_string(gpus.size()));
        expect_same(fast, rf, reference, rr);
        if (trial < 6) {
          EXPECT_GT(rf.duration_ns, 0);
        }
      }
    }
  }
}

// Integral bytes up to the point where run() finds an entry that is not (late in the matrix, or
// negative, which is no flow), after a run on other participants: the fallback starts from
// clean link loads.
TEST(BottleneckModel, NonIntegralEntryFoundLateFallsBackBitForBit) {
  const Topology topo = testing::h800_like(4, 4);
  BottleneckModel fast(topo);
  BottleneckModel reference(topo);
  CollectiveResult rf, rr;
  fast.run(random_traffic(gpu_range(4, 8), 5, 0.0), rf);
  for (const double odd : {0.5, -3.0, 1e17}) {
    TrafficMatrix m = random_traffic(gpu_range(0, 16), 6, 0.0);
    m.set_bytes(15, 3, odd);
    fast.run(m, rf);
    reference.run_reference(m, rr);
    SCOPED_TRACE(odd);
    expect_same(fast, rf, reference, rr);
  }
  // Integral entries again, after the fallback.
  const TrafficMatrix m = random_traffic(gpu_range(0, 16), 7, 0.0);
  fast.run(m, rf);
  reference.run_reference(m, rr);
  expect_same(fast, rf, reference, rr);
}

// Large integral entries: each below 2^52 but summing past it, where additions stop being exact.
TEST(BottleneckModel, IntegralBytesSummingPastTwoToThe52EqualTheReference) {
  const Topology topo = testing::h800_like(2, 4);
  BottleneckModel fast(topo);
  BottleneckModel reference(topo);
  RngStream rng(11, "bottleneck_large_bytes");
  TrafficMatrix m(gpu_range(0, 8));
  for (int32_t s = 0; s < 8; ++s) {
    for (int32_t d = 0; d < 8; ++d) {
      m.set_bytes(s, d, std::round(4e15 * rng.uniform01()) + 1.0);
    }
  }
  CollectiveResult rf, rr;
  fast.run(m, rf);
  reference.run_reference(m, rr);
  expect_same(fast, rf, reference, rr);
}

TEST(BottleneckModel, FullMeshTopologyUsesTheReferencePath) {
  TopologySpec spec = testing::h800_like_spec(1, 4);
  spec.fabric = ScaleUpFabric::kFullMesh;
  const Topology topo = build_topology(spec);
  BottleneckModel fast(topo);
  BottleneckModel reference(topo);
  EXPECT_FALSE(fast.structured());  // one-link routes: the egress link is the ingress link
  const TrafficMatrix m = random_traffic(gpu_range(0, 4), 77);
  CollectiveResult rf, rr;
  fast.run(m, rf);
  reference.run_reference(m, rr);
  expect_same(fast, rf, reference, rr);
}

// Hierarchical dispatch and combine from a TrafficPlan carry a row support, which run() reads
// instead of whole rows: against the per-route reference and against run() on the same bytes
// without the support, bit for bit, on rail-optimised topologies whose same-rail routes stay
// under one leaf or cross the spines, with sources that hold no tokens, interleaved with dense
// traffic on the same model.
TEST(BottleneckModel, SupportedHierarchicalTrafficEqualsTheReferenceBitForBit) {
  TopologySpec rail = testing::h800_like_spec(8, 4);
  rail.leaf_gpus = 2;
  const std::vector<Topology> topologies = {testing::h800_like(4, 4), build_topology(rail)};
  RngStream rng(31, "bottleneck_supported");
  for (const Topology& topo : topologies) {
    BottleneckModel fast(topo);
    BottleneckModel reference(topo);
    BottleneckModel unsupported(topo);
    const int32_t g = topo.num_gpus();
    const int32_t gpn = topo.gpus_per_node();
    TrafficPlan plan;
    for (const std::vector<GpuId>& gpus : {gpu_range(0, g), gpu_range(gpn, g / 2)}) {
      const auto p = static_cast<int32_t>(gpus.size());
      for (int32_t trial = 0; trial < 6; ++trial) {
        TokenCounts c;
        c.gpus = gpus;
        c.tokens.assign(static_cast<size_t>(p) * p, 0);
        c.tokens_per_src.assign(p, 0);
        for (int32_t s = 0; s < p; ++s) {
          if (rng.uniform01() < 0.15) continue;  // no tokens
          c.tokens_per_src[s] = 1 + static_cast<int64_t>(rng.uniform_int(64));
          for (int32_t d = 0; d < p; ++d) {
            if (rng.uniform01() < 0.4) continue;
            c.tokens[static_cast<size_t>(s) * p + d] =
                static_cast<int64_t>(rng.uniform_int(c.tokens_per_src[s] + 1));
          }
        }
        plan.build(topo, c, DispatchAlgorithm::kHierarchical);
        for (const bool combine : {false, true}) {
          TrafficMatrix m;
          combine ? plan.combine_traffic(14336, m) : plan.dispatch_traffic(7392, m);
          ASSERT_TRUE(m.has_support());
          TrafficMatrix copy = m;
          copy.set_bytes(0, 0, m.bytes(0, 0));  // the same bytes, without the support
          ASSERT_FALSE(copy.has_support());
          CollectiveResult rf, rr, ru;
          fast.run(m, rf);
          reference.run_reference(m, rr);
          unsupported.run(copy, ru);
          SCOPED_TRACE(topo.name() + " participants " + std::to_string(p) +
                       (combine ? " combine" : " dispatch"));
          expect_same(fast, rf, reference, rr);
          expect_same(fast, rf, unsupported, ru);
        }
        // Dense integral traffic between the collectives: the class-sum path.
        CollectiveResult rf, rr;
        const TrafficMatrix dense = random_traffic(gpus, rng.uniform_int(1000), 0.0, 0.1);
        fast.run(dense, rf);
        reference.run_reference(dense, rr);
        expect_same(fast, rf, reference, rr);
      }
    }
  }
}

}  // namespace
}  // namespace moesim::sim
