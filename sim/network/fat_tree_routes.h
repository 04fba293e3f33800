// Internal to the network module: the route shapes that the per-GPU-sum models need
// (factored_bottleneck_model.h, fast_all_to_all.h), checked once over a set of GPUs.
//
// Every route between two of the GPUs must be GPU -> NVSwitch -> GPU within an NVLink domain,
// NIC -> leaf -> NIC under one leaf, or NIC -> leaf -> spine -> leaf -> NIC otherwise, with the
// same first / last link per GPU and one latency per shape.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/core/ids.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

struct FatTreeRoutes {
  // Per GPU of the checked set (in its order): its NVLink / NIC links, -1 when unused.
  std::vector<int32_t> nvlink_up, nvlink_down, nic_up, nic_down;
  // Route latency of each shape, seconds (0 when no route has it).
  double nvlink_latency_s = 0, leaf_latency_s = 0, spine_latency_s = 0;
  // Empty when every route has one of the shapes; otherwise the first that does not.
  std::string why_not;
};

FatTreeRoutes check_fat_tree_routes(const Topology& topology, std::span<const GpuId> gpus);

}  // namespace moesim::sim
