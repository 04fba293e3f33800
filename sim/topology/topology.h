// A GPU cluster as a directed graph of links, with routes computed from its structure.
//
// Vertices are GPUs, one NVSwitch per NVLink domain (none for a full mesh), leaves and spines;
// a GPU's NICs are one aggregated GPU <-> leaf link, and every full-duplex link is two directed
// Links, 2k and 2k + 1 (reverse_link(id) == id ^ 1). "NVLink" names any scale-up fabric. Routes
// take the fewest links, never transit a GPU, stay on NVLink within a domain and on the network
// otherwise, with the spine a fixed function of the pair (a static stand-in for ECMP) so that no
// all-pairs table is needed: memory and build time are linear in GPUs. docs/topologies.md ("The
// graph", "Routing rules") has the leaf attachment, the spine formula and the size limits that
// check_topology_spec() enforces.
#pragma once

#include <array>
#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/core/ids.h"
#include "sim/core/time.h"
#include "sim/topology/gpu_spec.h"

namespace moesim::sim {

enum class LinkClass {
  kNvlink,     // GPU <-> NVSwitch, or GPU <-> GPU in a full-mesh domain (scale-up fabric)
  kNic,        // GPU <-> leaf switch (all of the GPU's NICs, aggregated)
  kLeafSpine,  // leaf <-> spine
};
inline constexpr LinkClass kAllLinkClasses[] = {LinkClass::kNvlink, LinkClass::kNic,
                                                LinkClass::kLeafSpine};
// "nvlink", "nic", "leaf_spine".
const char* link_class_name(LinkClass link_class);

enum class VertexKind { kGpu, kNvSwitch, kLeaf, kSpine };
// "gpu", "nvswitch", "leaf", "spine".
const char* vertex_kind_name(VertexKind kind);

// How the GPUs of one NVLink domain are connected.
enum class ScaleUpFabric {
  kSwitch,    // every GPU links to the domain's NVSwitch vertex (NVLink + NVSwitch)
  kFullMesh,  // every GPU pair has a direct link of nvlink_bytes_per_s / (domain GPUs - 1)
};

// One direction of a physical link.
struct Link {
  int32_t from_vertex = -1;
  int32_t to_vertex = -1;
  LinkClass link_class = LinkClass::kNvlink;
  // Capacity of this direction in bytes per second (> 0).
  double capacity_bytes_per_s = 0;
  // Fixed latency of traversing the link (>= 0).
  SimTime latency_ns = 0;
};

// A route: the directed link ids from source to destination, in path order (at most 4 links).
// A value, not a view: Topology computes it on demand.
class Route {
 public:
  static constexpr int32_t kMaxLinks = 4;
  size_t size() const { return static_cast<size_t>(size_); }
  bool empty() const { return size_ == 0; }
  int32_t operator[](size_t i) const { return links_[i]; }
  int32_t front() const { return links_[0]; }
  int32_t back() const { return links_[size_ - 1]; }
  const int32_t* begin() const { return links_.data(); }
  const int32_t* end() const { return links_.data() + size_; }
  void push_back(int32_t link_id) { links_[size_++] = link_id; }
  operator std::span<const int32_t>() const { return {links_.data(), size()}; }  // NOLINT

 private:
  std::array<int32_t, kMaxLinks> links_{};
  int32_t size_ = 0;
};

// The shapes a route between two distinct GPUs takes.
enum class RouteShape {
  kNvlinkSwitch,  // GPU -> NVSwitch -> GPU
  kNvlinkMesh,    // the direct GPU -> GPU link of a full-mesh domain
  kLeaf,          // GPU -> leaf -> GPU
  kSpine,         // GPU -> leaf -> spine -> leaf -> GPU
};
inline constexpr RouteShape kAllRouteShapes[] = {RouteShape::kNvlinkSwitch, RouteShape::kNvlinkMesh,
                                                 RouteShape::kLeaf, RouteShape::kSpine};

// Host side of every node (the optional [host] table): what a tiered KV cache (host DRAM and
// local SSD below HBM, docs/serving.md) moves over and stores in. 0 means "not declared".
struct HostSpec {
  double pcie_bytes_per_s = 0;  // per GPU, one direction: its PCIe (or C2C) link to the host
  SimTime pcie_latency_ns = 0;  // per host <-> GPU copy
  int64_t dram_bytes = 0;       // host DRAM per node
  int64_t nvme_bytes = 0;       // local NVMe SSD capacity per node
  double nvme_bytes_per_s = 0;  // NVMe read bandwidth per node (all drives)
  SimTime nvme_latency_ns = 0;  // per NVMe read
};

// The plain description a Topology is built from (what the TOML parser produces). Tests build
// topologies from this struct directly. Validity is checked by check_topology_spec().
struct TopologySpec {
  // Name for messages and summaries (the file stem for loaded files).
  std::string name;
  // Free text (the file's optional top-level `description`).
  std::string description;
  GpuSpec gpu;

  // --- Node / scale-up fabric.
  int32_t gpus_per_node = 8;       // >= 1
  int32_t nvlink_domain_gpus = 0;  // 0 means gpus_per_node; else a multiple of gpus_per_node
  ScaleUpFabric fabric = ScaleUpFabric::kSwitch;
  // Per-GPU scale-up bandwidth, one direction, bytes/s (> 0 when a domain has > 1 GPU): the
  // physical line rate. Links carry nvlink_bytes_per_s x nvlink_efficiency.
  double nvlink_bytes_per_s = 0;
  // Achieved / line rate of the scale-up links (> 0): 1 for a spec built in code (its rate is
  // what the links carry), kDefaultNvlinkEfficiency for a topology file, a calibration profile's
  // fitted `nvlink` efficiency where one applies (network_calibration.h).
  double nvlink_efficiency = 1.0;
  SimTime nvlink_latency_ns = 0;    // per NVLink link traversal
  SimTime nvswitch_latency_ns = 0;  // per NVSwitch traversal (switch fabric only)

  // --- Network.
  int32_t num_nodes = 1;     // >= 1; num_nodes * gpus_per_node a multiple of the domain
  int32_t nics_per_gpu = 1;  // >= 1
  // Bandwidth of one NIC, one direction, bytes/s. 0 means no NICs and no network (allowed only
  // when all GPUs are in one NVLink domain).
  double nic_bytes_per_s = 0;
  // Achieved / line rate of the NICs and the leaf-spine links derived from them (> 0): 1 for a
  // spec built in code, kDefaultNetworkEfficiency for a topology file, a profile's fitted
  // `network` efficiency where one applies.
  double network_efficiency = 1.0;
  SimTime nic_latency_ns = 0;  // GPU <-> leaf link (PCIe + NIC + cable)
  bool rail_optimized = true;
  // GPUs attached to one leaf (>= 1 when there are NICs). Rail-optimised: one GPU per node per
  // leaf, so this is the number of nodes a rail leaf serves.
  int32_t leaf_gpus = 0;
  int32_t num_spines = 0;         // >= 1 whenever there is more than one leaf
  double oversubscription = 1.0;  // leaf downlink : uplink capacity ratio, >= 1
  SimTime leaf_spine_latency_ns = 0;
  SimTime switch_latency_ns = 0;  // per leaf or spine traversal

  // --- Host (optional).
  HostSpec host;
};

// Efficiencies a topology file's links run at when no calibration profile says otherwise: NVLink
// 0.8 (the ratio DeepEP's kernels reach on H800: 160 of 200 GB/s per direction, which is what the
// files gave as the link rate before they gave line rates), the network 1 (NIC line rate).
inline constexpr double kDefaultNvlinkEfficiency = 0.8;
inline constexpr double kDefaultNetworkEfficiency = 1.0;

// The first problem found in `spec`, as a dotted key path in the TOML schema (e.g.
// "node.nvlink_domain_gpus") and a reason; both empty when the spec is valid.
struct SpecProblem {
  std::string key_path;
  std::string reason;
  bool ok() const { return reason.empty(); }
};
SpecProblem check_topology_spec(const TopologySpec& spec);

// The routing graph: one vertex per GPU / switch, one edge per directed Link; the edge property
// is the link id.
using TopologyGraph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property,
                          boost::property<boost::edge_index_t, int32_t>>;

class Topology {
 public:
  // Builds the graph and all routes. Throws ConfigError (file = spec.name, no line) when
  // check_topology_spec() reports a problem.
  explicit Topology(TopologySpec spec);

  const TopologySpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  const GpuSpec& gpu_spec() const { return spec_.gpu; }

  int32_t num_gpus() const { return num_gpus_; }
  int32_t num_nodes() const { return spec_.num_nodes; }
  int32_t gpus_per_node() const { return spec_.gpus_per_node; }
  // Number of rails = gpus_per_node.
  int32_t num_rails() const { return spec_.gpus_per_node; }
  int32_t nvlink_domain_gpus() const { return domain_gpus_; }
  int32_t num_nvlink_domains() const { return num_gpus_ / domain_gpus_; }

  NodeId node_of(GpuId gpu) const { return NodeId(gpu.value / spec_.gpus_per_node); }
  // Local index of the GPU within its node (its rail).
  int32_t rail_of(GpuId gpu) const { return gpu.value % spec_.gpus_per_node; }
  int32_t nvlink_domain_of(GpuId gpu) const { return gpu.value / domain_gpus_; }
  bool same_nvlink_domain(GpuId a, GpuId b) const {
    return nvlink_domain_of(a) == nvlink_domain_of(b);
  }
  // Leaf switch vertex of the GPU, or -1 without a network.
  int32_t leaf_vertex_of(GpuId gpu) const { return leaf_of_gpu_[gpu.value]; }

  // Per-GPU scale-up bandwidth the links carry, one direction: line rate x efficiency (0 for
  // one-GPU domains). What every consumer prices NVLink traffic with.
  double nvlink_bytes_per_s_per_gpu() const {
    return domain_gpus_ > 1 ? spec_.nvlink_bytes_per_s * spec_.nvlink_efficiency : 0;
  }
  // The same at line rate (information: summaries).
  double nvlink_line_bytes_per_s_per_gpu() const {
    return domain_gpus_ > 1 ? spec_.nvlink_bytes_per_s : 0;
  }
  // Per-GPU network bandwidth the NIC links carry, one direction: nics_per_gpu x NIC line rate x
  // network efficiency (0 without NICs).
  double nic_bytes_per_s_per_gpu() const {
    return spec_.nics_per_gpu * spec_.nic_bytes_per_s * spec_.network_efficiency;
  }
  // The same at line rate.
  double nic_line_bytes_per_s_per_gpu() const { return spec_.nics_per_gpu * spec_.nic_bytes_per_s; }

  int32_t num_vertices() const { return static_cast<int32_t>(vertex_kinds_.size()); }
  VertexKind vertex_kind(int32_t vertex) const { return vertex_kinds_[vertex]; }
  // E.g. "gpu12", "nvswitch0", "leaf3", "spine1" (index within its kind).
  std::string vertex_name(int32_t vertex) const;
  // Switch traversal latency of a vertex (0 for GPUs).
  SimTime vertex_latency_ns(int32_t vertex) const;

  const std::vector<Link>& links() const { return links_; }
  static int32_t reverse_link(int32_t link_id) { return link_id ^ 1; }
  const TopologyGraph& graph() const { return graph_; }

  // Directed link ids from src to dst, in path order; empty when src == dst. O(1).
  Route route(GpuId src, GpuId dst) const;
  // Sum of the route's link latencies plus the traversal latency of every switch on it
  // (0 when src == dst).
  SimTime route_latency_ns(GpuId src, GpuId dst) const {
    return src == dst ? 0 : shape_latency_ns_[static_cast<int>(route_shape(src, dst))];
  }
  // The shape of the route between two distinct GPUs.
  RouteShape route_shape(GpuId src, GpuId dst) const;
  // Whether some pair of GPUs is routed with `shape`, and that shape's latency.
  bool has_route_shape(RouteShape shape) const { return has_shape_[static_cast<int>(shape)]; }
  SimTime route_shape_latency_ns(RouteShape shape) const {
    return shape_latency_ns_[static_cast<int>(shape)];
  }

 private:
  void build_graph();
  void build_route_shapes();
  // Position of the GPU among its leaf's GPUs.
  int32_t leaf_position(GpuId gpu) const;
  // Link id of the mesh link from src to dst (same full-mesh domain, src != dst).
  int32_t mesh_link(GpuId src, GpuId dst) const;

  TopologySpec spec_;
  int32_t num_gpus_ = 0;
  int32_t domain_gpus_ = 0;
  int32_t first_leaf_vertex_ = 0;
  int32_t first_spine_vertex_ = 0;
  int32_t num_leaves_ = 0;
  int32_t num_spines_ = 0;
  int32_t leaves_per_rail_ = 0;  // rail-optimised only
  // First link id of each class (links are declared NVLink, then NIC, then leaf-spine).
  int32_t first_nic_link_ = 0;
  int32_t first_leaf_spine_link_ = 0;
  std::vector<VertexKind> vertex_kinds_;
  std::vector<int32_t> leaf_of_gpu_;
  std::vector<Link> links_;
  TopologyGraph graph_;
  bool has_shape_[4] = {false, false, false, false};
  SimTime shape_latency_ns_[4] = {0, 0, 0, 0};
};

// Same as Topology(spec).
Topology build_topology(const TopologySpec& spec);

}  // namespace moesim::sim
