#include "sim/network/rdma_only_topology.h"

#include <algorithm>

namespace moesim::sim {

TopologySpec rdma_only_spec(TopologySpec spec) {
  const int32_t num_gpus = spec.num_nodes * spec.gpus_per_node;
  // A rail leaf serves leaf_gpus GPUs (one per node), a plain leaf leaf_gpus GPUs: same size.
  const int32_t leaf_gpus = spec.leaf_gpus;
  spec.num_nodes = num_gpus;
  spec.gpus_per_node = 1;
  spec.nvlink_domain_gpus = 0;
  spec.nvlink_bytes_per_s = 0;
  spec.fabric = ScaleUpFabric::kSwitch;
  spec.rail_optimized = false;
  spec.leaf_gpus = std::min(leaf_gpus, num_gpus);
  return spec;
}

}  // namespace moesim::sim
