#include "sim/network/fat_tree_routes.h"

#include <algorithm>

namespace moesim::sim {

FatTreeRoutes check_fat_tree_routes(const Topology& topology, std::span<const GpuId> gpus) {
  FatTreeRoutes r;
  const auto p = static_cast<int32_t>(gpus.size());
  const auto& links = topology.links();
  r.nvlink_up.assign(p, -1);
  r.nvlink_down.assign(p, -1);
  r.nic_up.assign(p, -1);
  r.nic_down.assign(p, -1);
  auto same = [](int32_t& slot, int32_t link) {
    if (slot < 0) slot = link;
    return slot == link;
  };
  SimTime latency_ns[3] = {-1, -1, -1};  // NVLink, same leaf, through a spine
  auto same_latency = [&](int shape, SimTime ns) {
    if (latency_ns[shape] < 0) latency_ns[shape] = ns;
    return latency_ns[shape] == ns;
  };
  auto is = [&](int32_t link, LinkClass c) { return links[link].link_class == c; };
  for (int32_t i = 0; i < p; ++i) {
    const GpuId s = gpus[i];
    for (int32_t j = 0; j < p; ++j) {
      if (i == j) continue;
      const GpuId d = gpus[j];
      const Route route = topology.route(s, d);
      const SimTime lat_ns = topology.route_latency_ns(s, d);
      if (topology.same_nvlink_domain(s, d)) {
        if (route.size() != 2 || !is(route[0], LinkClass::kNvlink) ||
            !is(route[1], LinkClass::kNvlink) || !same(r.nvlink_up[i], route[0]) ||
            !same(r.nvlink_down[j], route[1]) || !same_latency(0, lat_ns)) {
          r.why_not = "a route within an NVLink domain is not GPU -> NVSwitch -> GPU";
          return r;
        }
        continue;
      }
      const int32_t from_leaf = topology.leaf_vertex_of(s);
      const int32_t to_leaf = topology.leaf_vertex_of(d);
      if (from_leaf < 0 || to_leaf < 0 || route.size() < 2 || !is(route.front(), LinkClass::kNic) ||
          !is(route.back(), LinkClass::kNic) || !same(r.nic_up[i], route.front()) ||
          !same(r.nic_down[j], route.back())) {
        r.why_not = "a route between NVLink domains does not start and end at the GPUs' NICs";
        return r;
      }
      if (from_leaf == to_leaf) {
        if (route.size() != 2 || !same_latency(1, lat_ns)) {
          r.why_not = "a route under one leaf is not NIC -> leaf -> NIC with one latency";
          return r;
        }
        continue;
      }
      if (route.size() != 4 || !is(route[1], LinkClass::kLeafSpine) ||
          !is(route[2], LinkClass::kLeafSpine) || links[route[1]].from_vertex != from_leaf ||
          links[route[2]].to_vertex != to_leaf || !same_latency(2, lat_ns)) {
        r.why_not = "a route between leaves is not NIC -> leaf -> spine -> leaf -> NIC";
        return r;
      }
    }
  }
  r.nvlink_latency_s = to_seconds(std::max<SimTime>(latency_ns[0], 0));
  r.leaf_latency_s = to_seconds(std::max<SimTime>(latency_ns[1], 0));
  r.spine_latency_s = to_seconds(std::max<SimTime>(latency_ns[2], 0));
  return r;
}

}  // namespace moesim::sim
