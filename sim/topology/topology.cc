#include "sim/topology/topology.h"

#include <algorithm>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/property_map/property_map.hpp>
#include <limits>

#include "sim/config/config_error.h"
#include "sim/core/check.h"

namespace moesim::sim {
namespace {

using Edge = boost::graph_traits<TopologyGraph>::edge_descriptor;
using Vertex = boost::graph_traits<TopologyGraph>::vertex_descriptor;

// Hop distances fit easily: the longest route has 4 links.
using Hops = int16_t;
constexpr Hops kUnreached = std::numeric_limits<Hops>::max();

int32_t ceil_div(int32_t a, int32_t b) { return (a + b - 1) / b; }

// Keeps the edges a route may use when the search is rooted at `root`: edges of one fabric
// (NVLink only, or network only), and no edge leaving a GPU other than the root, so GPUs are route
// endpoints, never transit vertices.
struct RouteEdges {
  const TopologyGraph* graph = nullptr;
  const std::vector<VertexKind>* kinds = nullptr;
  const std::vector<Link>* links = nullptr;
  int32_t root = -1;
  bool nvlink = false;
  bool operator()(const Edge& e) const {
    int32_t s = static_cast<int32_t>(boost::source(e, *graph));
    if ((*kinds)[s] == VertexKind::kGpu && s != root) return false;
    int32_t id = boost::get(boost::edge_index, *graph, e);
    return ((*links)[id].link_class == LinkClass::kNvlink) == nvlink;
  }
};

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
  }
  if (gpu.bf16_flops_per_s <= 0) return {"gpu.bf16_tflops", "must be > 0"};
  if (gpu.hbm_bytes <= 0) return {"gpu.hbm_gbytes", "must be > 0"};
  if (gpu.hbm_bytes_per_s <= 0) return {"gpu.hbm_gbytes_per_s", "must be > 0"};

  if (spec.gpus_per_node < 1) return {"node.gpus_per_node", "must be >= 1"};
  if (spec.nvlink_domain_gpus < 0) return {"node.nvlink_domain_gpus", "must be >= 1"};
  const int32_t domain =
      spec.nvlink_domain_gpus == 0 ? spec.gpus_per_node : spec.nvlink_domain_gpus;
  if (domain % spec.gpus_per_node != 0) {
    return {"node.nvlink_domain_gpus", "must be a multiple of node.gpus_per_node (" +
                                           std::to_string(spec.gpus_per_node) + ")"};
  }
  if (domain > 1 && spec.nvlink_bytes_per_s <= 0) {
    return {"node.nvlink_gbytes_per_s", "must be > 0 when an NVLink domain has several GPUs"};
  }
  if (spec.nvlink_latency_ns < 0) return {"node.nvlink_latency_ns", "must be >= 0"};
  if (spec.nvswitch_latency_ns < 0) return {"node.nvswitch_latency_ns", "must be >= 0"};

  if (spec.num_nodes < 1) return {"network.num_nodes", "must be >= 1"};
  const int64_t num_gpus = int64_t{spec.num_nodes} * spec.gpus_per_node;
  if (num_gpus > (int64_t{1} << 20)) return {"network.num_nodes", "more than 2^20 GPUs"};
  if (num_gpus % domain != 0) {
    return {"network.num_nodes", "num_nodes x gpus_per_node (" + std::to_string(num_gpus) +
                                     ") must be a multiple of node.nvlink_domain_gpus (" +
                                     std::to_string(domain) + ")"};
  }
  if (spec.nics_per_gpu < 1) return {"network.nics_per_gpu", "must be >= 1"};
  if (spec.nic_bytes_per_s < 0) return {"network.nic_gbps", "must be >= 0"};
  const bool has_nics = spec.nic_bytes_per_s > 0;
  if (!has_nics && num_gpus > domain) {
    return {"network.nic_gbps", "must be > 0: the GPUs span " + std::to_string(num_gpus / domain) +
                                    " NVLink domains, which only a network connects"};
  }
  if (spec.nic_latency_ns < 0) return {"network.nic_latency_ns", "must be >= 0"};
  if (spec.leaf_spine_latency_ns < 0) return {"network.leaf_spine_latency_ns", "must be >= 0"};
  if (spec.switch_latency_ns < 0) return {"network.switch_latency_ns", "must be >= 0"};
  if (spec.num_spines < 0) return {"network.num_spines", "must be >= 0"};
  if (!(spec.oversubscription >= 1)) return {"network.oversubscription", "must be >= 1"};
  if (has_nics) {
    if (spec.leaf_gpus < 1) return {"network.leaf_gpus", "must be >= 1"};
    const int32_t num_leaves = spec.rail_optimized
                                   ? spec.gpus_per_node * ceil_div(spec.num_nodes, spec.leaf_gpus)
                                   : ceil_div(static_cast<int32_t>(num_gpus), spec.leaf_gpus);
    if (num_leaves > 1 && spec.num_spines < 1) {
      return {"network.num_spines",
              "must be >= 1: the network has " + std::to_string(num_leaves) + " leaf switches"};
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
  build_routes();
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
                    spec_.nvlink_bytes_per_s, spec_.nvlink_latency_ns);
    }
  } else if (domain_gpus_ > 1) {
    const double per_peer_bytes_per_s = spec_.nvlink_bytes_per_s / (domain_gpus_ - 1);
    for (int32_t base = 0; base < num_gpus_; base += domain_gpus_) {
      for (int32_t i = base; i < base + domain_gpus_; ++i) {
        for (int32_t j = i + 1; j < base + domain_gpus_; ++j) {
          add_link_pair(i, j, LinkClass::kNvlink, per_peer_bytes_per_s, spec_.nvlink_latency_ns);
        }
      }
    }
  }

  // Network: GPU <-> leaf, then every leaf <-> every spine.
  if (has_nics) {
    std::vector<int32_t> gpus_on_leaf(num_leaves, 0);
    for (int32_t g = 0; g < num_gpus_; ++g) {
      add_link_pair(g, leaf_of_gpu_[g], LinkClass::kNic, nic_bytes_per_s_per_gpu(),
                    spec_.nic_latency_ns);
      ++gpus_on_leaf[leaf_of_gpu_[g] - first_leaf_vertex_];
    }
    for (int32_t leaf = 0; leaf < num_leaves; ++leaf) {
      if (gpus_on_leaf[leaf] == 0) continue;
      const double uplink_bytes_per_s = gpus_on_leaf[leaf] * nic_bytes_per_s_per_gpu() /
                                        spec_.oversubscription / std::max(num_spines, 1);
      for (int32_t s = 0; s < num_spines; ++s) {
        add_link_pair(first_leaf_vertex_ + leaf, first_spine_vertex_ + s, LinkClass::kLeafSpine,
                      uplink_bytes_per_s, spec_.leaf_spine_latency_ns);
      }
    }
  }
}

void Topology::build_routes() {
  const size_t num_pairs = static_cast<size_t>(num_gpus_) * static_cast<size_t>(num_gpus_);
  const size_t num_vertices = vertex_kinds_.size();
  const auto vertex_ids = boost::get(boost::vertex_index, graph_);

  // hops_to[fabric][dst * num_vertices + v]: links on the shortest path v -> dst over one fabric
  // (0 = network, 1 = NVLink) that transits no GPU. Computed by a breadth-first search from dst:
  // every link has its reverse with the same endpoints and class, so hop counts from dst equal hop
  // counts to dst, and the filter bans the same transit vertices in either direction.
  std::vector<Hops> hops_to[2];
  for (int fabric = 0; fabric < 2; ++fabric) {
    hops_to[fabric].assign(static_cast<size_t>(num_gpus_) * num_vertices, kUnreached);
    for (int32_t dst = 0; dst < num_gpus_; ++dst) {
      Hops* hops = hops_to[fabric].data() + static_cast<size_t>(dst) * num_vertices;
      hops[dst] = 0;
      boost::filtered_graph<TopologyGraph, RouteEdges> g(
          graph_, RouteEdges{&graph_, &vertex_kinds_, &links_, dst, fabric == 1});
      boost::breadth_first_search(
          g, static_cast<Vertex>(dst),
          boost::visitor(boost::make_bfs_visitor(boost::record_distances(
              boost::make_iterator_property_map(hops, vertex_ids), boost::on_tree_edge()))));
    }
  }
  auto hops_for = [&](int32_t src, int32_t dst) -> const Hops* {
    const int fabric = same_nvlink_domain(GpuId(src), GpuId(dst)) ? 1 : 0;
    return hops_to[fabric].data() + static_cast<size_t>(dst) * num_vertices;
  };

  route_offsets_.assign(num_pairs + 1, 0);
  for (int32_t src = 0; src < num_gpus_; ++src) {
    for (int32_t dst = 0; dst < num_gpus_; ++dst) {
      Hops h = hops_for(src, dst)[src];
      MOESIM_CHECK(h != kUnreached, "GPU pair without a route");
      size_t pair = pair_index(GpuId(src), GpuId(dst));
      route_offsets_[pair + 1] = route_offsets_[pair] + static_cast<uint32_t>(h);
    }
  }
  MOESIM_CHECK(route_offsets_.back() < std::numeric_limits<uint32_t>::max() / 2,
               "route table too large");
  route_link_ids_.resize(route_offsets_.back());
  route_latency_ns_.assign(num_pairs, 0);

  const auto edge_ids = boost::get(boost::edge_index, graph_);
  // Leaf-spine link ids by (leaf, spine) and (spine, leaf), and routes carried so far, for the
  // spine balance.
  const int32_t num_leaves = first_spine_vertex_ - first_leaf_vertex_;
  const int32_t num_spines = static_cast<int32_t>(num_vertices) - first_spine_vertex_;
  std::vector<int32_t> uplink(static_cast<size_t>(num_leaves) * num_spines, -1);
  std::vector<int32_t> downlink(static_cast<size_t>(num_spines) * num_leaves, -1);
  for (int32_t id = 0; id < static_cast<int32_t>(links_.size()); ++id) {
    const Link& l = links_[id];
    if (l.link_class != LinkClass::kLeafSpine) continue;
    if (vertex_kinds_[l.from_vertex] == VertexKind::kLeaf) {
      uplink[static_cast<size_t>(l.from_vertex - first_leaf_vertex_) * num_spines +
             (l.to_vertex - first_spine_vertex_)] = id;
    } else {
      downlink[static_cast<size_t>(l.from_vertex - first_spine_vertex_) * num_leaves +
               (l.to_vertex - first_leaf_vertex_)] = id;
    }
  }
  std::vector<int64_t> routes_on_link(links_.size(), 0);

  // The graph's out-edges to switches, per vertex, in out-edge order, flattened for the walk (a
  // GPU is never a transit vertex, so only the last hop, into dst, targets a GPU).
  struct Hop {
    int32_t to_vertex;
    int32_t link_id;
  };
  std::vector<uint32_t> switch_hops_begin(num_vertices + 1, 0);
  std::vector<Hop> switch_hops;
  for (size_t u = 0; u < num_vertices; ++u) {
    for (auto [it, last] = boost::out_edges(u, graph_); it != last; ++it) {
      int32_t v = static_cast<int32_t>(boost::target(*it, graph_));
      if (vertex_kinds_[v] != VertexKind::kGpu)
        switch_hops.push_back({v, boost::get(edge_ids, *it)});
    }
    switch_hops_begin[u + 1] = static_cast<uint32_t>(switch_hops.size());
  }

  for (int32_t src = 0; src < num_gpus_; ++src) {
    for (int32_t dst = 0; dst < num_gpus_; ++dst) {
      const Hops* hops = hops_for(src, dst);
      const bool nvlink = same_nvlink_domain(GpuId(src), GpuId(dst));
      const size_t pair = pair_index(GpuId(src), GpuId(dst));
      int32_t* out = route_link_ids_.data() + route_offsets_[pair];
      SimTime latency_ns = 0;
      int32_t u = src;
      while (u != dst) {
        // The next link: one of the pair's fabric to a neighbour one hop closer to dst. The
        // first in out-edge order, except from a leaf towards spines: the least used spine.
        int32_t link_id = -1;
        if (hops[u] == 1) {
          // The last hop: the reverse of dst's link to u.
          for (auto [it, last] = boost::out_edges(dst, graph_); it != last; ++it) {
            int32_t id = boost::get(edge_ids, *it);
            if (links_[id].to_vertex == u &&
                (links_[id].link_class == LinkClass::kNvlink) == nvlink) {
              link_id = reverse_link(id);
              break;
            }
          }
        } else {
          int64_t best_uses = std::numeric_limits<int64_t>::max();
          for (uint32_t i = switch_hops_begin[u]; i < switch_hops_begin[u + 1]; ++i) {
            const Hop& h = switch_hops[i];
            if (hops[h.to_vertex] != hops[u] - 1 ||
                (links_[h.link_id].link_class == LinkClass::kNvlink) != nvlink) {
              continue;
            }
            if (vertex_kinds_[h.to_vertex] != VertexKind::kSpine) {
              link_id = h.link_id;
              break;
            }
            const int32_t leaf = u - first_leaf_vertex_;
            const int32_t spine = h.to_vertex - first_spine_vertex_;
            const int32_t dst_leaf = leaf_of_gpu_[dst] - first_leaf_vertex_;
            const int64_t uses =
                routes_on_link[uplink[static_cast<size_t>(leaf) * num_spines + spine]] +
                routes_on_link[downlink[static_cast<size_t>(spine) * num_leaves + dst_leaf]];
            if (uses < best_uses) {
              best_uses = uses;
              link_id = h.link_id;
            }
          }
        }
        MOESIM_CHECK(link_id >= 0, "route walk found no next hop");
        *out++ = link_id;
        ++routes_on_link[link_id];
        latency_ns += links_[link_id].latency_ns;
        u = links_[link_id].to_vertex;
        if (u != dst) latency_ns += vertex_latency_ns(u);
      }
      route_latency_ns_[pair] = latency_ns;
    }
  }
}

}  // namespace moesim::sim
