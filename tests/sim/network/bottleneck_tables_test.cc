// The bottleneck model's tables (sim/network/bottleneck_tables.h): per-link capacities with a
// dummy link that never delays, and the route classes of a window checked against the routes
// they stand for.
#include "sim/network/bottleneck_tables.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tests/support/test_topologies.h"

namespace moesim::sim {
namespace {

TEST(BottleneckTables, CapacitiesPerLinkAndADummyThatNeverDelays) {
  const Topology topo = testing::h800_like(2, 4);
  const auto tables = build_bottleneck_tables(topo);
  ASSERT_EQ(tables->num_links, topo.links().size());
  ASSERT_EQ(tables->inv_capacity_s_per_byte.size(), tables->num_links + 1);
  for (size_t l = 0; l < tables->num_links; ++l) {
    EXPECT_EQ(tables->capacity_bytes_per_s[l], topo.links()[l].capacity_bytes_per_s);
    EXPECT_EQ(tables->inv_capacity_s_per_byte[l], 1.0 / topo.links()[l].capacity_bytes_per_s);
  }
  EXPECT_EQ(tables->inv_capacity_s_per_byte[tables->num_links], 0.0);
  EXPECT_TRUE(tables->windows.empty());
}

TEST(BottleneckTables, RouteClassesGiveEveryPairsRouteEndsAndLatency) {
  const Topology topo = testing::h800_like(2, 4);
  const auto dummy = static_cast<int32_t>(topo.links().size());
  BottleneckWindow w;
  w.base = 0;
  w.count = topo.num_gpus();
  build_structured_tables(topo, topo.links().size(), w);
  ASSERT_TRUE(w.structured);
  const int32_t c_none = w.num_classes;
  const size_t cc = static_cast<size_t>(c_none) + 1;
  EXPECT_GE(w.num_classes, 2);  // at least intra-node and inter-node routes
  for (int32_t s = 0; s < w.count; ++s) {
    for (int32_t d = 0; d < w.count; ++d) {
      const uint8_t c = w.pair_class[static_cast<size_t>(s) * w.count + d];
      if (s == d) {
        EXPECT_EQ(c, c_none);
        continue;
      }
      ASSERT_LT(c, c_none);
      const Route route = topo.route(GpuId(s), GpuId(d));
      const int32_t* src = &w.src_links[(s * cc + c) * 2];
      const int32_t* dst = &w.dst_links[(d * cc + c) * 2];
      // Every link of the route is one of the four ends (the dummy fills missing middles).
      std::multiset<int32_t> ends = {src[0], src[1], dst[0], dst[1]};
      ends.erase(dummy);
      EXPECT_EQ(ends, std::multiset<int32_t>(route.begin(), route.end())) << s << "->" << d;
      EXPECT_EQ(src[0], route.front());
      EXPECT_EQ(dst[0], route.back());
      EXPECT_EQ(w.class_latency_s[c], to_seconds(topo.route_latency_ns(GpuId(s), GpuId(d))));
    }
  }
}

}  // namespace
}  // namespace moesim::sim
