#include "sim/topology/topology.h"

#include <algorithm>
#include <limits>

#include "base/check.h"
#include "sim/config/config_error.h"

namespace moesim::sim {
namespace {

int32_t ceil_div(int32_t a, int32_t b) { return (a + b - 1) / b; }

// Size limits (topology.h): beyond them a topology is refused, not built slowly.
constexpr int64_t kMaxGpus = int64_t{1} << 20;
constexpr int32_t kMaxGpusPerNode = 1024;
constexpr int32_t kMaxFullMeshDomainGpus = 64;
constexpr int64_t kMaxLeafSpineCables = int64_t{1} << 20;
// A GPU's scale-up or NIC bandwidth beyond 1 PB/s is no hardware (and keeps the bisection's
// integer flow, whose capacities sum over every link, inside int64).
constexpr double kMaxGpuLinkBytesPerS = 1e15;
// Likewise a peak beyond 1 EFLOP/s per dtype or HBM beyond 1 PB/s (a 1e300 TFLOP/s peak became
// an infinite rate), a leaf's uplinks oversubscribed beyond 100:1 (1e300 made them carry 5e-299
// GB/s), or more than 64 NICs per GPU.
constexpr double kMaxFlopsPerS = 1e18;
constexpr double kMaxHbmBytesPerS = 1e15;
constexpr double kMaxOversubscription = 100;
constexpr int32_t kMaxNicsPerGpu = 64;

// a + b for latencies read from the file; ConfigError on overflow.
SimTime add_latency(const std::string& topology, SimTime a, SimTime b) {
  SimTime sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) {
    throw ConfigError(topology, 0, 0, "network",
                      "a route's latency overflows int64 nanoseconds (check the latencies)");
  }
  return sum;
}

}  // namespace

const char* link_class_name(LinkClass link_class) {
  switch (link_class) {
    case LinkClass::kNvlink:
      return "nvlink";
    case LinkClass::kNic:
      return "nic";
    case LinkClass::kLeafSpine:
      return "leaf_spine";
  }
  MOESIM_CHECK(false, "unknown LinkClass");
  return "";
}

const char* vertex_kind_name(VertexKind kind) {
  switch (kind) {
    case VertexKind::kGpu:
      return "gpu";
    case VertexKind::kNvSwitch:
      return "nvswitch";
    case VertexKind::kLeaf:
      return "leaf";
    case VertexKind::kSpine:
      return "spine";
  }
  MOESIM_CHECK(false, "unknown VertexKind");
  return "";
}

SpecProblem check_topology_spec(const TopologySpec& spec) {
  const GpuSpec& gpu = spec.gpu;
  if (gpu.name.empty()) return {"gpu.name", "must not be empty"};
  const std::pair<const char*, double> flops[] = {{"gpu.fp32_tflops", gpu.fp32_flops_per_s},
                                                  {"gpu.tf32_tflops", gpu.tf32_flops_per_s},
                                                  {"gpu.bf16_tflops", gpu.bf16_flops_per_s},
                                                  {"gpu.fp8_tflops", gpu.fp8_flops_per_s},
                                                  {"gpu.fp4_tflops", gpu.fp4_flops_per_s}};
  for (const auto& [key, value] : flops) {
    if (value < 0) return {key, "must be >= 0 (0 = dtype unsupported)"};
    if (!(value <= kMaxFlopsPerS)) return {key, "must be at most 1000000 (1 EFLOP/s)"};
  }
  if (gpu.bf16_flops_per_s <= 0) return {"gpu.bf16_tflops", "must be > 0"};
  if (gpu.hbm_bytes <= 0) return {"gpu.hbm_gbytes", "must be > 0"};
  if (gpu.hbm_bytes_per_s <= 0) return {"gpu.hbm_gbytes_per_s", "must be > 0"};
  if (!(gpu.hbm_bytes_per_s <= kMaxHbmBytesPerS)) {
    return {"gpu.hbm_gbytes_per_s", "must be at most 1000000 (1 PB/s)"};
  }
  if (gpu.num_sms < 0) return {"gpu.num_sms", "must be >= 0 (0 = not stated)"};

  if (spec.gpus_per_node < 1) return {"node.gpus_per_node", "must be >= 1"};
  if (spec.gpus_per_node > kMaxGpusPerNode) {
    return {"node.gpus_per_node", "must be <= " + std::to_string(kMaxGpusPerNode)};
  }
  if (spec.nvlink_domain_gpus < 0) return {"node.nvlink_domain_gpus", "must be >= 1"};
  const int32_t domain =
      spec.nvlink_domain_gpus == 0 ? spec.gpus_per_node : spec.nvlink_domain_gpus;
  if (domain % spec.gpus_per_node != 0) {
    return {"node.nvlink_domain_gpus", "must be a multiple of node.gpus_per_node (" +
                                           std::to_string(spec.gpus_per_node) + ")"};
  }
  if (spec.fabric == ScaleUpFabric::kFullMesh && domain > kMaxFullMeshDomainGpus) {
    return {"node.nvlink_domain_gpus",
            "a full-mesh domain has at most " + std::to_string(kMaxFullMeshDomainGpus) +
                " GPUs (its links grow with the square of the domain; use fabric = \"nvswitch\")"};
  }
  if (spec.nvlink_bytes_per_s > kMaxGpuLinkBytesPerS) {
    return {"node.nvlink_gbytes_per_s", "must be at most 1000000 (1 PB/s)"};
  }
  if (domain > 1 && spec.nvlink_bytes_per_s <= 0) {
    return {"node.nvlink_gbytes_per_s", "must be > 0 when an NVLink domain has several GPUs"};
  }
  if (!(spec.nvlink_efficiency > 0)) return {"node.nvlink_gbytes_per_s", "efficiency must be > 0"};
  if (!(spec.network_efficiency > 0)) return {"network.nic_gbps", "efficiency must be > 0"};
  if (spec.nvlink_latency_ns < 0) return {"node.nvlink_latency_ns", "must be >= 0"};
  if (spec.nvswitch_latency_ns < 0) return {"node.nvswitch_latency_ns", "must be >= 0"};

  if (spec.num_nodes < 1) return {"network.num_nodes", "must be >= 1"};
  const int64_t num_gpus = int64_t{spec.num_nodes} * spec.gpus_per_node;
  if (num_gpus > kMaxGpus) {
    return {"network.num_nodes",
            "num_nodes x gpus_per_node (" + std::to_string(num_gpus) + ") is more than 2^20 GPUs"};
  }
  if (num_gpus % domain != 0) {
    return {"network.num_nodes", "num_nodes x gpus_per_node (" + std::to_string(num_gpus) +
                                     ") must be a multiple of node.nvlink_domain_gpus (" +
                                     std::to_string(domain) + ")"};
  }
  if (spec.nics_per_gpu < 1) return {"network.nics_per_gpu", "must be >= 1"};
  if (spec.nics_per_gpu > kMaxNicsPerGpu) {
    return {"network.nics_per_gpu", "must be at most " + std::to_string(kMaxNicsPerGpu)};
  }
  if (spec.nic_bytes_per_s < 0) return {"network.nic_gbps", "must be >= 0"};
  if (spec.nic_bytes_per_s > kMaxGpuLinkBytesPerS) {
    return {"network.nic_gbps", "must be at most 8000000 (1 PB/s)"};
  }
  const bool has_nics = spec.nic_bytes_per_s > 0;
  if (!has_nics && num_gpus > domain) {
    return {"network.nic_gbps", "must be > 0: the GPUs span " + std::to_string(num_gpus / domain) +
                                    " NVLink domains, which only a network connects"};
  }
  if (spec.nic_latency_ns < 0) return {"network.nic_latency_ns", "must be >= 0"};
  if (spec.leaf_spine_latency_ns < 0) return {"network.leaf_spine_latency_ns", "must be >= 0"};
  if (spec.switch_latency_ns < 0) return {"network.switch_latency_ns", "must be >= 0"};
  if (spec.num_spines < 0) return {"network.num_spines", "must be >= 0"};
  if (!(spec.oversubscription >= 1 && spec.oversubscription <= kMaxOversubscription)) {
    return {"network.oversubscription", "must be in [1, 100]"};
  }
  if (has_nics) {
    if (spec.leaf_gpus < 1) return {"network.leaf_gpus", "must be >= 1"};
    const int32_t num_leaves = spec.rail_optimized
                                   ? spec.gpus_per_node * ceil_div(spec.num_nodes, spec.leaf_gpus)
                                   : ceil_div(static_cast<int32_t>(num_gpus), spec.leaf_gpus);
    if (num_leaves > 1 && spec.num_spines < 1) {
      return {"network.num_spines",
              "must be >= 1: the network has " + std::to_string(num_leaves) + " leaf switches"};
    }
    if (int64_t{num_leaves} * spec.num_spines > kMaxLeafSpineCables) {
      return {"network.num_spines", std::to_string(num_leaves) + " leaves x " +
                                        std::to_string(spec.num_spines) +
                                        " spines is more than 2^20 leaf-spine cables"};
    }
  }
  return {};
}

Topology build_topology(const TopologySpec& spec) { return Topology(spec); }

Topology::Topology(TopologySpec spec) : spec_(std::move(spec)) {
  SpecProblem problem = check_topology_spec(spec_);
  if (!problem.ok()) throw ConfigError(spec_.name, 0, 0, problem.key_path, problem.reason);
  num_gpus_ = spec_.num_nodes * spec_.gpus_per_node;
  domain_gpus_ = spec_.nvlink_domain_gpus == 0 ? spec_.gpus_per_node : spec_.nvlink_domain_gpus;
  build_graph();
  build_route_shapes();
}

std::string Topology::vertex_name(int32_t vertex) const {
  switch (vertex_kinds_[vertex]) {
    case VertexKind::kGpu:
      return "gpu" + std::to_string(vertex);
    case VertexKind::kNvSwitch:
      return "nvswitch" + std::to_string(vertex - num_gpus_);
    case VertexKind::kLeaf:
      return "leaf" + std::to_string(vertex - first_leaf_vertex_);
    case VertexKind::kSpine:
      return "spine" + std::to_string(vertex - first_spine_vertex_);
  }
  MOESIM_CHECK(false, "unknown VertexKind");
  return "";
}

SimTime Topology::vertex_latency_ns(int32_t vertex) const {
  switch (vertex_kinds_[vertex]) {
    case VertexKind::kGpu:
      return 0;
    case VertexKind::kNvSwitch:
      return spec_.nvswitch_latency_ns;
    case VertexKind::kLeaf:
    case VertexKind::kSpine:
      return spec_.switch_latency_ns;
  }
  MOESIM_CHECK(false, "unknown VertexKind");
  return 0;
}

void Topology::build_graph() {
  vertex_kinds_.assign(num_gpus_, VertexKind::kGpu);
  const bool switched = spec_.fabric == ScaleUpFabric::kSwitch && domain_gpus_ > 1;
  if (switched) vertex_kinds_.resize(num_gpus_ + num_nvlink_domains(), VertexKind::kNvSwitch);

  // Leaf of each GPU.
  const bool has_nics = spec_.nic_bytes_per_s > 0;
  int32_t num_leaves = 0;
  leaf_of_gpu_.assign(num_gpus_, -1);
  first_leaf_vertex_ = num_vertices();
  if (has_nics) {
    std::vector<int32_t> leaf_idx(num_gpus_);
    if (spec_.rail_optimized) {
      const int32_t leaves_per_rail = ceil_div(spec_.num_nodes, spec_.leaf_gpus);
      num_leaves = num_rails() * leaves_per_rail;
      for (int32_t g = 0; g < num_gpus_; ++g) {
        GpuId gpu(g);
        leaf_idx[g] = rail_of(gpu) * leaves_per_rail + node_of(gpu).value / spec_.leaf_gpus;
      }
    } else {
      num_leaves = ceil_div(num_gpus_, spec_.leaf_gpus);
      for (int32_t g = 0; g < num_gpus_; ++g) leaf_idx[g] = g / spec_.leaf_gpus;
    }
    for (int32_t g = 0; g < num_gpus_; ++g) leaf_of_gpu_[g] = first_leaf_vertex_ + leaf_idx[g];
    vertex_kinds_.resize(vertex_kinds_.size() + num_leaves, VertexKind::kLeaf);
  }
  first_spine_vertex_ = num_vertices();
  const int32_t num_spines = has_nics ? spec_.num_spines : 0;
  vertex_kinds_.resize(vertex_kinds_.size() + num_spines, VertexKind::kSpine);

  num_leaves_ = num_leaves;
  leaves_per_rail_ =
      spec_.rail_optimized && has_nics ? ceil_div(spec_.num_nodes, spec_.leaf_gpus) : 0;
  num_spines_ = num_spines;
  for (size_t v = 0; v < vertex_kinds_.size(); ++v) boost::add_vertex(graph_);
  auto add_link_pair = [&](int32_t a, int32_t b, LinkClass cls, double capacity_bytes_per_s,
                           SimTime latency_ns) {
    MOESIM_CHECK(capacity_bytes_per_s > 0, "link capacity must be positive");
    for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
      int32_t id = static_cast<int32_t>(links_.size());
      links_.push_back({from, to, cls, capacity_bytes_per_s, latency_ns});
      boost::add_edge(from, to, id, graph_);
    }
  };

  // Scale-up fabric.
  if (switched) {
    for (int32_t g = 0; g < num_gpus_; ++g) {
      add_link_pair(g, num_gpus_ + nvlink_domain_of(GpuId(g)), LinkClass::kNvlink,
                    nvlink_bytes_per_s_per_gpu(), spec_.nvlink_latency_ns);
    }
  } else if (domain_gpus_ > 1) {
    const double per_peer_bytes_per_s = nvlink_bytes_per_s_per_gpu() / (domain_gpus_ - 1);
    for (int32_t base = 0; base < num_gpus_; base += domain_gpus_) {
      for (int32_t i = base; i < base + domain_gpus_; ++i) {
        for (int32_t j = i + 1; j < base + domain_gpus_; ++j) {
          add_link_pair(i, j, LinkClass::kNvlink, per_peer_bytes_per_s, spec_.nvlink_latency_ns);
        }
      }
    }
  }

  // Network: GPU <-> leaf, then every leaf <-> every spine.
  first_nic_link_ = static_cast<int32_t>(links_.size());
  first_leaf_spine_link_ = first_nic_link_ + (has_nics ? 2 * num_gpus_ : 0);
  if (has_nics) {
    std::vector<int32_t> gpus_on_leaf(num_leaves, 0);
    for (int32_t g = 0; g < num_gpus_; ++g) {
      add_link_pair(g, leaf_of_gpu_[g], LinkClass::kNic, nic_bytes_per_s_per_gpu(),
                    spec_.nic_latency_ns);
      ++gpus_on_leaf[leaf_of_gpu_[g] - first_leaf_vertex_];
    }
    for (int32_t leaf = 0; leaf < num_leaves; ++leaf) {
      // Every leaf has GPUs (leaves are numbered by the GPUs' indices): route() relies on it.
      MOESIM_CHECK(gpus_on_leaf[leaf] > 0, "a leaf without GPUs");
      const double uplink_bytes_per_s = gpus_on_leaf[leaf] * nic_bytes_per_s_per_gpu() /
                                        spec_.oversubscription / std::max(num_spines, 1);
      for (int32_t s = 0; s < num_spines; ++s) {
        add_link_pair(first_leaf_vertex_ + leaf, first_spine_vertex_ + s, LinkClass::kLeafSpine,
                      uplink_bytes_per_s, spec_.leaf_spine_latency_ns);
      }
    }
  }
}

int32_t Topology::leaf_position(GpuId gpu) const {
  return spec_.rail_optimized ? node_of(gpu).value % spec_.leaf_gpus : gpu.value % spec_.leaf_gpus;
}

int32_t Topology::mesh_link(GpuId src, GpuId dst) const {
  // Mesh cables are declared per domain, pairs (i, j), i < j, in lexicographic order: cable k of
  // the whole fabric is directed link 2k from i to j and 2k + 1 back.
  const int64_t base = src.value / domain_gpus_;
  const int64_t i = std::min(src.value, dst.value) % domain_gpus_;
  const int64_t j = std::max(src.value, dst.value) % domain_gpus_;
  const int64_t d = domain_gpus_;
  const int64_t cable = base * (d * (d - 1) / 2) + i * (d - 1) - i * (i - 1) / 2 + (j - i - 1);
  return static_cast<int32_t>(2 * cable + (src.value < dst.value ? 0 : 1));
}

RouteShape Topology::route_shape(GpuId src, GpuId dst) const {
  if (same_nvlink_domain(src, dst)) {
    return spec_.fabric == ScaleUpFabric::kFullMesh ? RouteShape::kNvlinkMesh
                                                    : RouteShape::kNvlinkSwitch;
  }
  return leaf_of_gpu_[src.value] == leaf_of_gpu_[dst.value] ? RouteShape::kLeaf
                                                            : RouteShape::kSpine;
}

Route Topology::route(GpuId src, GpuId dst) const {
  Route r;
  if (src == dst) return r;
  // Link ids follow the declaration order of build_graph(): NVSwitch cable g is links 2g (up)
  // and 2g + 1 (down); NIC cable g links first_nic_link_ + 2g (to the leaf) and + 1; the cable
  // of (leaf A, spine s) links first_leaf_spine_link_ + 2 (A x S + s) (up) and + 1 (down).
  switch (route_shape(src, dst)) {
    case RouteShape::kNvlinkSwitch:
      r.push_back(2 * src.value);
      r.push_back(2 * dst.value + 1);
      return r;
    case RouteShape::kNvlinkMesh:
      r.push_back(mesh_link(src, dst));
      return r;
    case RouteShape::kLeaf:
      r.push_back(first_nic_link_ + 2 * src.value);
      r.push_back(first_nic_link_ + 2 * dst.value + 1);
      return r;
    case RouteShape::kSpine: {
      const int64_t a = leaf_of_gpu_[src.value] - first_leaf_vertex_;
      const int64_t b = leaf_of_gpu_[dst.value] - first_leaf_vertex_;
      const int64_t offset = ((b - a) % num_leaves_ + num_leaves_) % num_leaves_;
      const int32_t i = leaf_position(src);
      const int32_t j = leaf_position(dst);
      // Rail leaves of the same nodes: the pairs of one node are NVLink routes, the diagonal
      // i == j; the half below it moves one spine on, so that the rest stays balanced.
      const bool same_nodes = spec_.rail_optimized && a % leaves_per_rail_ == b % leaves_per_rail_;
      const auto spine = static_cast<int32_t>(
          (int64_t{i} + j + offset + (same_nodes && i > j ? 1 : 0)) % num_spines_);
      r.push_back(first_nic_link_ + 2 * src.value);
      r.push_back(static_cast<int32_t>(first_leaf_spine_link_ + 2 * (a * num_spines_ + spine)));
      r.push_back(static_cast<int32_t>(first_leaf_spine_link_ + 2 * (b * num_spines_ + spine) + 1));
      r.push_back(first_nic_link_ + 2 * dst.value + 1);
      return r;
    }
  }
  MOESIM_CHECK(false, "unknown RouteShape");
  return r;
}

void Topology::build_route_shapes() {
  const std::string& name = spec_.name;
  const SimTime nvlink = spec_.nvlink_latency_ns;
  const SimTime nic = spec_.nic_latency_ns;
  const SimTime sw = spec_.switch_latency_ns;
  const SimTime ls = spec_.leaf_spine_latency_ns;
  auto at = [](RouteShape shape) { return static_cast<int>(shape); };
  shape_latency_ns_[at(RouteShape::kNvlinkSwitch)] =
      add_latency(name, add_latency(name, nvlink, nvlink), spec_.nvswitch_latency_ns);
  shape_latency_ns_[at(RouteShape::kNvlinkMesh)] = nvlink;
  const SimTime two_nics = add_latency(name, nic, nic);
  shape_latency_ns_[at(RouteShape::kLeaf)] = add_latency(name, two_nics, sw);
  const SimTime three_switches = add_latency(name, add_latency(name, sw, sw), sw);
  shape_latency_ns_[at(RouteShape::kSpine)] =
      add_latency(name, add_latency(name, two_nics, add_latency(name, ls, ls)), three_switches);

  // Which shapes occur. NVLink: a domain of several GPUs. Leaf: a leaf whose GPUs span two
  // domains (a leaf's GPUs, in id order, span domains iff its first and last do). Spine: two
  // leaves and two domains (if no pair of GPUs in different leaves were in different domains, all
  // GPUs would share one leaf).
  if (domain_gpus_ > 1) {
    has_shape_[at(spec_.fabric == ScaleUpFabric::kFullMesh ? RouteShape::kNvlinkMesh
                                                           : RouteShape::kNvlinkSwitch)] = true;
  }
  if (num_leaves_ > 0) {
    std::vector<int32_t> first(num_leaves_, -1), last(num_leaves_, -1);
    for (int32_t g = 0; g < num_gpus_; ++g) {
      const int32_t leaf = leaf_of_gpu_[g] - first_leaf_vertex_;
      if (first[leaf] < 0) first[leaf] = g;
      last[leaf] = g;
    }
    for (int32_t leaf = 0; leaf < num_leaves_; ++leaf) {
      if (!same_nvlink_domain(GpuId(first[leaf]), GpuId(last[leaf]))) {
        has_shape_[at(RouteShape::kLeaf)] = true;
      }
    }
    has_shape_[at(RouteShape::kSpine)] = num_leaves_ >= 2 && num_nvlink_domains() >= 2;
  }
}

}  // namespace moesim::sim
