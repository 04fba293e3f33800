#include "sim/topology/topology.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <limits>
#include <map>

#include "tests/support/config_errors.h"
#include "tests/support/test_topologies.h"

namespace moesim::sim {
namespace {

using testing::h800_sxm_cluster_spec;

std::map<LinkClass, int> count_by_class(const Topology& t) {
  std::map<LinkClass, int> n;
  for (const Link& l : t.links()) ++n[l.link_class];
  return n;
}

// Vertices a route visits, src first.
std::vector<int32_t> route_vertices(const Topology& t, GpuId src, GpuId dst) {
  std::vector<int32_t> v{src.value};
  for (int32_t id : t.route(src, dst)) v.push_back(t.links()[id].to_vertex);
  return v;
}

// Stands for the spine in expected routes (its choice is a load balance, tested separately).
constexpr int32_t kAnySpine = -2;

// The routing rules of topology.h, written directly (no graph search): the obvious
// implementation the BFS-based route table must agree with. Switch fabric only.
std::vector<int32_t> expected_route(const TopologySpec& s, int32_t src, int32_t dst) {
  if (src == dst) return {src};
  const int32_t num_gpus = s.num_nodes * s.gpus_per_node;
  const int32_t domain = s.nvlink_domain_gpus == 0 ? s.gpus_per_node : s.nvlink_domain_gpus;
  const int32_t num_domains = num_gpus / domain;
  if (src / domain == dst / domain) return {src, num_gpus + src / domain, dst};
  const int32_t first_leaf = num_gpus + (domain > 1 ? num_domains : 0);
  const int32_t leaves_per_rail = (s.num_nodes + s.leaf_gpus - 1) / s.leaf_gpus;
  auto leaf = [&](int32_t g) {
    if (!s.rail_optimized) return first_leaf + g / s.leaf_gpus;
    return first_leaf + (g % s.gpus_per_node) * leaves_per_rail +
           (g / s.gpus_per_node) / s.leaf_gpus;
  };
  if (leaf(src) == leaf(dst)) return {src, leaf(src), dst};
  return {src, leaf(src), kAnySpine, leaf(dst), dst};
}

TEST(Topology, RailOptimisedClusterHasExpectedVerticesAndLinks) {
  Topology t(h800_sxm_cluster_spec(8, 32, 8, true));
  EXPECT_EQ(t.num_gpus(), 64);
  EXPECT_EQ(t.num_nodes(), 8);
  EXPECT_EQ(t.num_nvlink_domains(), 8);
  EXPECT_EQ(t.num_vertices(), 64 + 8 + 8 + 8);  // GPUs, NVSwitches, rail leaves, spines
  EXPECT_EQ(t.vertex_kind(63), VertexKind::kGpu);
  EXPECT_EQ(t.vertex_kind(64), VertexKind::kNvSwitch);
  EXPECT_EQ(t.vertex_kind(72), VertexKind::kLeaf);
  EXPECT_EQ(t.vertex_kind(80), VertexKind::kSpine);
  EXPECT_EQ(t.vertex_name(81), "spine1");
  EXPECT_EQ(t.vertex_name(73), "leaf1");
  auto n = count_by_class(t);
  EXPECT_EQ(n[LinkClass::kNvlink], 128);
  EXPECT_EQ(n[LinkClass::kNic], 128);
  EXPECT_EQ(n[LinkClass::kLeafSpine], 128);
  EXPECT_EQ(boost::num_edges(t.graph()), t.links().size());
  for (size_t id = 0; id < t.links().size(); id += 2) {
    const Link& a = t.links()[id];
    const Link& b = t.links()[Topology::reverse_link(static_cast<int32_t>(id))];
    EXPECT_EQ(a.from_vertex, b.to_vertex);
    EXPECT_EQ(a.to_vertex, b.from_vertex);
    EXPECT_EQ(a.capacity_bytes_per_s, b.capacity_bytes_per_s);
    EXPECT_EQ(a.link_class, b.link_class);
  }
  // Each leaf-spine direction carries 8 GPUs x 50 GB/s / 8 spines.
  for (const Link& l : t.links()) {
    if (l.link_class == LinkClass::kLeafSpine) {
      EXPECT_DOUBLE_EQ(l.capacity_bytes_per_s, 50e9);
    }
  }
  EXPECT_DOUBLE_EQ(t.nvlink_bytes_per_s_per_gpu(), 160e9);
  EXPECT_DOUBLE_EQ(t.nic_bytes_per_s_per_gpu(), 50e9);
  // GPU 19 is node 2, rail 3: rail 3's leaf.
  EXPECT_EQ(t.node_of(GpuId(19)), NodeId(2));
  EXPECT_EQ(t.rail_of(GpuId(19)), 3);
  EXPECT_EQ(t.leaf_vertex_of(GpuId(19)), 72 + 3);
}

TEST(Topology, RoutesFollowTheNvlinkRailAndSpineRules) {
  TopologySpec spec = h800_sxm_cluster_spec(8, 32, 8, true);
  Topology t(spec);
  // Intra-node: NVLink up and down through the node's NVSwitch.
  auto r = t.route(GpuId(1), GpuId(6));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(t.links()[r[0]].link_class, LinkClass::kNvlink);
  EXPECT_EQ(t.links()[r[1]].link_class, LinkClass::kNvlink);
  EXPECT_EQ(route_vertices(t, GpuId(1), GpuId(6)), (std::vector<int32_t>{1, 64, 6}));
  // Same rail, other node: NIC -> rail leaf -> NIC.
  EXPECT_EQ(route_vertices(t, GpuId(3), GpuId(43)), (std::vector<int32_t>{3, 75, 43}));
  // Cross rail, other node: rail leaf 3 -> a spine -> rail leaf 4, not through GPU 4 over NVLink.
  std::vector<int32_t> cross = route_vertices(t, GpuId(3), GpuId(44));
  ASSERT_EQ(cross.size(), 5u);
  EXPECT_EQ(cross[1], 75);
  EXPECT_EQ(t.vertex_kind(cross[2]), VertexKind::kSpine);
  EXPECT_EQ(cross[3], 76);
  EXPECT_EQ(t.route(GpuId(5), GpuId(5)).size(), 0u);
}

TEST(Topology, RouteTableAgreesWithTheDirectRulesOnSeveralShapes) {
  std::vector<TopologySpec> specs = {h800_sxm_cluster_spec(8, 32, 8, true),
                                     h800_sxm_cluster_spec(6, 4, 3, true),
                                     h800_sxm_cluster_spec(5, 16, 2, false)};
  TopologySpec nvl = h800_sxm_cluster_spec(8, 3, 2, true);
  nvl.gpus_per_node = 4;
  nvl.nvlink_domain_gpus = 16;  // 4-node NVLink domains, two of them
  specs.push_back(nvl);
  for (const TopologySpec& spec : specs) {
    Topology t(spec);
    for (int32_t a = 0; a < t.num_gpus(); ++a) {
      for (int32_t b = 0; b < t.num_gpus(); ++b) {
        std::vector<int32_t> got = route_vertices(t, GpuId(a), GpuId(b));
        if (got.size() == 5 && t.vertex_kind(got[2]) == VertexKind::kSpine) got[2] = kAnySpine;
        ASSERT_EQ(got, expected_route(spec, a, b))
            << "nodes " << spec.num_nodes << " pair " << a << " -> " << b;
      }
    }
  }
}

TEST(Topology, EveryRouteIsAConnectedPathWithItsLatency) {
  TopologySpec mesh = h800_sxm_cluster_spec(2, 32, 1, true);
  mesh.fabric = ScaleUpFabric::kFullMesh;
  for (const TopologySpec& spec :
       {h800_sxm_cluster_spec(4, 2, 4, true), h800_sxm_cluster_spec(3, 8, 2, false), mesh}) {
    Topology t(spec);
    for (int32_t a = 0; a < t.num_gpus(); ++a) {
      for (int32_t b = 0; b < t.num_gpus(); ++b) {
        auto route = t.route(GpuId(a), GpuId(b));
        EXPECT_EQ(route.empty(), a == b);
        int32_t at = a;
        SimTime latency_ns = 0;
        for (size_t i = 0; i < route.size(); ++i) {
          const Link& l = t.links()[route[i]];
          ASSERT_EQ(l.from_vertex, at);
          latency_ns += l.latency_ns;
          at = l.to_vertex;
          if (i + 1 < route.size()) {
            EXPECT_NE(t.vertex_kind(at), VertexKind::kGpu) << "route transits a GPU";
            latency_ns += t.vertex_latency_ns(at);
          }
        }
        EXPECT_EQ(at, b);
        EXPECT_EQ(t.route_latency_ns(GpuId(a), GpuId(b)), latency_ns);
      }
    }
  }
}

TEST(Topology, RouteLatencyAddsLinksAndSwitches) {
  Topology t(h800_sxm_cluster_spec(8, 32, 8, true));
  EXPECT_EQ(t.route_latency_ns(GpuId(0), GpuId(7)), 300 + 200 + 300);
  EXPECT_EQ(t.route_latency_ns(GpuId(0), GpuId(8)), 1000 + 250 + 1000);
  EXPECT_EQ(t.route_latency_ns(GpuId(0), GpuId(9)), 1000 + 250 + 50 + 250 + 50 + 250 + 1000);
  EXPECT_EQ(t.route_latency_ns(GpuId(9), GpuId(9)), 0);
}

// Under a uniform all-to-all (every ordered pair once), the largest difference in routes carried
// between two uplinks of the same leaf, or two downlinks into the same leaf, relative to that
// leaf's mean.
double leaf_spine_imbalance(const Topology& t) {
  std::vector<int> uses(t.links().size(), 0);
  for (int32_t a = 0; a < t.num_gpus(); ++a) {
    for (int32_t b = 0; b < t.num_gpus(); ++b) {
      for (int32_t id : t.route(GpuId(a), GpuId(b))) ++uses[id];
    }
  }
  struct Range {
    int lo = std::numeric_limits<int>::max(), hi = 0, sum = 0, n = 0;
  };
  std::map<int32_t, Range> range_by_leaf;  // key: leaf, or -1 - leaf for downlinks
  for (size_t id = 0; id < uses.size(); ++id) {
    const Link& l = t.links()[id];
    if (l.link_class != LinkClass::kLeafSpine) continue;
    const bool up = t.vertex_kind(l.from_vertex) == VertexKind::kLeaf;
    Range& r = range_by_leaf[up ? l.from_vertex : -1 - l.to_vertex];
    r.lo = std::min(r.lo, uses[id]);
    r.hi = std::max(r.hi, uses[id]);
    r.sum += uses[id];
    ++r.n;
  }
  double worst = 0;
  for (const auto& [key, r] : range_by_leaf) {
    if (r.sum > 0) worst = std::max(worst, (r.hi - r.lo) / (static_cast<double>(r.sum) / r.n));
  }
  return worst;
}

TEST(Topology, SpineChoiceSpreadsAUniformAllToAllEvenly) {
  // The shipped fat trees (h800-8x8, h800-128x8's shape) exactly; small ones where NVLink
  // domains cut many pairs out, within a third of the mean.
  EXPECT_EQ(leaf_spine_imbalance(Topology(h800_sxm_cluster_spec(8, 32, 8, true))), 0.0);
  EXPECT_EQ(leaf_spine_imbalance(Topology(h800_sxm_cluster_spec(128, 32, 16, true))), 0.0);
  for (const TopologySpec& spec :
       {h800_sxm_cluster_spec(6, 4, 3, true), h800_sxm_cluster_spec(5, 16, 2, false),
        h800_sxm_cluster_spec(7, 2, 5, true), h800_sxm_cluster_spec(24, 8, 7, false)}) {
    EXPECT_LE(leaf_spine_imbalance(Topology(spec)), 0.33) << spec.num_nodes;
  }
}

TEST(Topology, SpineChoiceSpreadsAHotGpusTrafficOverItsLeafsSpines) {
  // Leaves no wider than the spine count, and no rail leaves of the same nodes (whose pairs
  // below the diagonal move one spine on): the sources of one leaf reach one destination over
  // distinct spines, and one source reaches the destinations of a leaf over distinct spines.
  for (const TopologySpec& spec :
       {h800_sxm_cluster_spec(8, 3, 5, false), h800_sxm_cluster_spec(24, 8, 8, false)}) {
    Topology t(spec);
    std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> spines_into, spines_from;
    for (int32_t a = 0; a < t.num_gpus(); ++a) {
      for (int32_t b = 0; b < t.num_gpus(); ++b) {
        if (a == b || t.route_shape(GpuId(a), GpuId(b)) != RouteShape::kSpine) continue;
        const int32_t spine = t.links()[t.route(GpuId(a), GpuId(b))[1]].to_vertex;
        spines_into[{t.leaf_vertex_of(GpuId(a)), b}].push_back(spine);
        spines_from[{a, t.leaf_vertex_of(GpuId(b))}].push_back(spine);
      }
    }
    ASSERT_FALSE(spines_into.empty());
    for (auto* table : {&spines_into, &spines_from}) {
      for (auto& [key, spines] : *table) {
        std::sort(spines.begin(), spines.end());
        EXPECT_EQ(std::adjacent_find(spines.begin(), spines.end()), spines.end())
            << spec.num_nodes << " nodes: leaf/GPU " << key.first << ", " << key.second;
      }
    }
  }
}

// Hops from every vertex to `dst` over one fabric, never transiting another GPU: the reference
// shortest-path search (Boost.Graph breadth-first search on the topology's graph) the structural
// routes must match.
struct FabricEdges {
  const Topology* t = nullptr;
  int32_t root = -1;
  bool nvlink = false;
  bool operator()(const boost::graph_traits<TopologyGraph>::edge_descriptor& e) const {
    const auto s = static_cast<int32_t>(boost::source(e, t->graph()));
    if (t->vertex_kind(s) == VertexKind::kGpu && s != root) return false;
    const int32_t id = boost::get(boost::edge_index, t->graph(), e);
    return (t->links()[id].link_class == LinkClass::kNvlink) == nvlink;
  }
};

std::vector<int32_t> hops_to(const Topology& t, int32_t dst, bool nvlink) {
  std::vector<int32_t> hops(t.num_vertices(), -1);
  hops[dst] = 0;
  boost::filtered_graph<TopologyGraph, FabricEdges> g(t.graph(), FabricEdges{&t, dst, nvlink});
  boost::breadth_first_search(
      g, static_cast<boost::graph_traits<TopologyGraph>::vertex_descriptor>(dst),
      boost::visitor(boost::make_bfs_visitor(
          boost::record_distances(boost::make_iterator_property_map(
                                      hops.begin(), boost::get(boost::vertex_index, t.graph())),
                                  boost::on_tree_edge()))));
  return hops;
}

TEST(Topology, StructuralRoutesAreShortestPathsOfTheGraph) {
  TopologySpec mesh = h800_sxm_cluster_spec(2, 32, 1, true);
  mesh.fabric = ScaleUpFabric::kFullMesh;
  TopologySpec nvl = h800_sxm_cluster_spec(8, 3, 2, true);
  nvl.gpus_per_node = 4;
  nvl.nvlink_domain_gpus = 16;
  for (const TopologySpec& spec :
       {h800_sxm_cluster_spec(8, 32, 8, true), h800_sxm_cluster_spec(6, 4, 3, true),
        h800_sxm_cluster_spec(5, 16, 2, false), h800_sxm_cluster_spec(3, 8, 2, false), mesh, nvl}) {
    Topology t(spec);
    for (int32_t b = 0; b < t.num_gpus(); ++b) {
      const std::vector<int32_t> by_nvlink = hops_to(t, b, true);
      const std::vector<int32_t> by_network = hops_to(t, b, false);
      for (int32_t a = 0; a < t.num_gpus(); ++a) {
        if (a == b) continue;
        const bool nvlink = t.same_nvlink_domain(GpuId(a), GpuId(b));
        const int32_t hops = (nvlink ? by_nvlink : by_network)[a];
        ASSERT_GT(hops, 0);
        const Route route = t.route(GpuId(a), GpuId(b));
        ASSERT_EQ(static_cast<int32_t>(route.size()), hops) << a << " -> " << b;
        for (int32_t id : route) {
          EXPECT_EQ(t.links()[id].link_class == LinkClass::kNvlink, nvlink);
        }
      }
    }
  }
}

TEST(Topology, RouteShapesPresentAndTheirLatencies) {
  Topology t(h800_sxm_cluster_spec(8, 32, 8, true));
  EXPECT_TRUE(t.has_route_shape(RouteShape::kNvlinkSwitch));
  EXPECT_FALSE(t.has_route_shape(RouteShape::kNvlinkMesh));
  EXPECT_TRUE(t.has_route_shape(RouteShape::kLeaf));
  EXPECT_TRUE(t.has_route_shape(RouteShape::kSpine));
  EXPECT_EQ(t.route_shape_latency_ns(RouteShape::kSpine), t.route_latency_ns(GpuId(0), GpuId(9)));
  // One node has neither network shape.
  Topology node(testing::nvlink_node_spec("h200-sxm", 8, 450e9));
  EXPECT_TRUE(node.has_route_shape(RouteShape::kNvlinkSwitch));
  EXPECT_FALSE(node.has_route_shape(RouteShape::kLeaf));
  EXPECT_FALSE(node.has_route_shape(RouteShape::kSpine));
  // Non-rail leaves of exactly one node: every network route crosses a spine.
  Topology packed(h800_sxm_cluster_spec(4, 8, 2, false));
  EXPECT_FALSE(packed.has_route_shape(RouteShape::kLeaf));
  EXPECT_TRUE(packed.has_route_shape(RouteShape::kSpine));
}

TEST(Topology, NonRailOptimisedPacksGpusOntoLeavesInOrder) {
  Topology t(h800_sxm_cluster_spec(4, 16, 2, false));
  EXPECT_EQ(t.leaf_vertex_of(GpuId(0)), t.leaf_vertex_of(GpuId(15)));
  EXPECT_NE(t.leaf_vertex_of(GpuId(15)), t.leaf_vertex_of(GpuId(16)));
  // Node 0 and node 1 share leaf 0: their traffic never touches a spine.
  EXPECT_EQ(t.route(GpuId(0), GpuId(9)).size(), 2u);
  EXPECT_EQ(t.route(GpuId(0), GpuId(17)).size(), 4u);
}

TEST(Topology, OversubscriptionAndPartialLeavesScaleUplinks) {
  TopologySpec spec = h800_sxm_cluster_spec(5, 4, 2, true);  // rail leaves of 4 and 1 nodes
  spec.oversubscription = 2.0;
  Topology t(spec);
  std::map<int32_t, double> uplink;
  for (const Link& l : t.links()) {
    if (l.link_class == LinkClass::kLeafSpine &&
        t.vertex_kind(l.from_vertex) == VertexKind::kLeaf) {
      uplink[l.from_vertex] = l.capacity_bytes_per_s;
    }
  }
  ASSERT_EQ(uplink.size(), 16u);
  const int32_t leaf_of_node0 = t.leaf_vertex_of(GpuId(0));
  const int32_t leaf_of_node4 = t.leaf_vertex_of(GpuId(32));
  EXPECT_DOUBLE_EQ(uplink[leaf_of_node0], 4 * 50e9 / 2.0 / 2);
  EXPECT_DOUBLE_EQ(uplink[leaf_of_node4], 1 * 50e9 / 2.0 / 2);
}

TEST(Topology, FullMeshLinksEveryPairDirectly) {
  TopologySpec spec;
  spec.name = "mesh";
  spec.gpu = *find_gpu_spec("mi355x");
  spec.gpus_per_node = 8;
  spec.fabric = ScaleUpFabric::kFullMesh;
  spec.nvlink_bytes_per_s = 430e9;
  spec.nvlink_latency_ns = 700;
  Topology t(spec);
  EXPECT_EQ(t.num_vertices(), 8);
  EXPECT_EQ(t.links().size(), 8u * 7u);
  auto r = t.route(GpuId(2), GpuId(5));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(t.links()[r[0]].from_vertex, 2);
  EXPECT_EQ(t.links()[r[0]].to_vertex, 5);
  EXPECT_DOUBLE_EQ(t.links()[r[0]].capacity_bytes_per_s, 430e9 / 7);
  EXPECT_EQ(t.route_latency_ns(GpuId(2), GpuId(5)), 700);
}

TEST(Topology, NvlinkDomainSpansNodes) {
  TopologySpec spec = h800_sxm_cluster_spec(36, 36, 2, true);
  spec.gpu = *find_gpu_spec("gb200");
  spec.gpus_per_node = 4;
  spec.nvlink_domain_gpus = 72;
  spec.nvlink_bytes_per_s = 720e9;
  Topology t(spec);
  EXPECT_EQ(t.num_gpus(), 144);
  EXPECT_EQ(t.num_nvlink_domains(), 2);
  EXPECT_EQ(t.node_of(GpuId(71)), NodeId(17));
  EXPECT_EQ(t.rail_of(GpuId(71)), 3);
  EXPECT_TRUE(t.same_nvlink_domain(GpuId(0), GpuId(71)));
  EXPECT_FALSE(t.same_nvlink_domain(GpuId(71), GpuId(72)));
  // Node 0 to node 17: one NVLink domain, so NVSwitch, not the network.
  EXPECT_EQ(route_vertices(t, GpuId(0), GpuId(71)), (std::vector<int32_t>{0, 144, 71}));
  // Rack 0 to rack 1, same rail: NIC -> leaf -> NIC.
  auto r = t.route(GpuId(0), GpuId(72));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(t.links()[r[0]].link_class, LinkClass::kNic);
}

TEST(Topology, SingleGpuHasNoLinks) {
  TopologySpec spec;
  spec.name = "one";
  spec.gpu = *find_gpu_spec("h200-sxm");
  spec.gpus_per_node = 1;
  Topology t(spec);
  EXPECT_EQ(t.num_gpus(), 1);
  EXPECT_TRUE(t.links().empty());
  EXPECT_TRUE(t.route(GpuId(0), GpuId(0)).empty());
  EXPECT_EQ(t.route_latency_ns(GpuId(0), GpuId(0)), 0);
  EXPECT_EQ(t.nvlink_bytes_per_s_per_gpu(), 0);
  EXPECT_EQ(t.nic_bytes_per_s_per_gpu(), 0);
}

TEST(Topology, InvalidSpecsAreConfigErrorsNamingTheKey) {
  auto message = [](const TopologySpec& spec) {
    return testing::config_error_of([&] { Topology t(spec); });
  };
  TopologySpec s = h800_sxm_cluster_spec(8, 32, 8, true);
  s.gpus_per_node = 0;
  EXPECT_EQ(message(s), "test: node.gpus_per_node: must be >= 1");
  s = h800_sxm_cluster_spec(8, 32, 8, true);
  s.nvlink_domain_gpus = 12;
  EXPECT_EQ(message(s),
            "test: node.nvlink_domain_gpus: must be a multiple of node.gpus_per_node (8)");
  s = h800_sxm_cluster_spec(8, 32, 8, true);
  s.nic_bytes_per_s = 0;
  EXPECT_EQ(message(s),
            "test: network.nic_gbps: must be > 0: the GPUs span 8 NVLink domains, which only a "
            "network connects");
  s = h800_sxm_cluster_spec(8, 4, 0, true);
  EXPECT_EQ(message(s), "test: network.num_spines: must be >= 1: the network has 16 leaf switches");
  s = h800_sxm_cluster_spec(8, 32, 8, true);
  s.oversubscription = 0.5;
  EXPECT_EQ(message(s), "test: network.oversubscription: must be in [1, 100]");
  s.oversubscription = 1e300;  // accepted before: the leaf uplinks carried 5e-299 GB/s
  EXPECT_EQ(message(s), "test: network.oversubscription: must be in [1, 100]");
  s = h800_sxm_cluster_spec(8, 32, 8, true);
  s.gpu.bf16_flops_per_s = 1e300 * 1e12;  // an infinite peak
  EXPECT_EQ(message(s), "test: gpu.bf16_tflops: must be at most 1000000 (1 EFLOP/s)");
  s = h800_sxm_cluster_spec(8, 32, 8, true);
  s.nics_per_gpu = 65;
  EXPECT_EQ(message(s), "test: network.nics_per_gpu: must be at most 64");
  s = h800_sxm_cluster_spec(8, 32, 8, true);
  s.gpu.hbm_bytes_per_s = -1;
  EXPECT_EQ(message(s), "test: gpu.hbm_gbytes_per_s: must be > 0");
  EXPECT_TRUE(check_topology_spec(h800_sxm_cluster_spec(8, 32, 8, true)).ok());
}

TEST(Topology, SixteenThousandGpusTakeMemoryLinearInGpus) {
  // 2,048 nodes x 8 rails, rail leaves of 32 nodes (512 leaves), 64 spines. Its build time is a
  // benchmark (bench/topology_bench.cc), not asserted here.
  Topology t(h800_sxm_cluster_spec(2048, 32, 64, true));
  EXPECT_EQ(t.num_gpus(), 16384);
  // NVSwitch, NIC and leaf-spine cables, two directions each: no per-pair state.
  EXPECT_EQ(t.links().size(), 2u * (16384 + 16384 + 512 * 64));
  EXPECT_EQ(route_vertices(t, GpuId(0), GpuId(16383)).size(), 5u);
  EXPECT_EQ(route_vertices(t, GpuId(0), GpuId(8 * 31)).size(), 3u);     // node 31 shares rail leaf
  EXPECT_EQ(route_vertices(t, GpuId(0), GpuId(8 * 32)).size(), 5u);     // node 32: next rail leaf
  EXPECT_EQ(route_vertices(t, GpuId(16380), GpuId(16383)).size(), 3u);  // one node: NVSwitch
}

TEST(Topology, SizeLimitsAreRefusedNamingTheKey) {
  auto message = [](const TopologySpec& spec) {
    return testing::config_error_of([&] { Topology t(spec); });
  };
  TopologySpec s = h800_sxm_cluster_spec(8, 32, 8, true);
  s.gpus_per_node = 2048;
  EXPECT_EQ(message(s), "test: node.gpus_per_node: must be <= 1024");
  s = h800_sxm_cluster_spec(8, 32, 8, true);
  s.fabric = ScaleUpFabric::kFullMesh;
  s.nvlink_domain_gpus = 128;
  EXPECT_EQ(message(s),
            "test: node.nvlink_domain_gpus: a full-mesh domain has at most 64 GPUs (its links grow "
            "with the square of the domain; use fabric = \"nvswitch\")");
  s = h800_sxm_cluster_spec(8, 32, 8, true);
  s.nic_bytes_per_s = 2e15;
  EXPECT_EQ(message(s), "test: network.nic_gbps: must be at most 8000000 (1 PB/s)");
  s = h800_sxm_cluster_spec(8, 32, 8, true);
  s.nvlink_bytes_per_s = 2e15;
  EXPECT_EQ(message(s), "test: node.nvlink_gbytes_per_s: must be at most 1000000 (1 PB/s)");
  s = h800_sxm_cluster_spec(131073, 1, 1024, true);
  EXPECT_EQ(message(s),
            "test: network.num_nodes: num_nodes x gpus_per_node (1048584) is more than 2^20 GPUs");
  s = h800_sxm_cluster_spec(16384, 1, 64, true);
  EXPECT_EQ(message(s),
            "test: network.num_spines: 131072 leaves x 64 spines is more than 2^20 leaf-spine "
            "cables");
}

}  // namespace
}  // namespace moesim::sim
