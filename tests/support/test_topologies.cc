#include "tests/support/test_topologies.h"

#include <string>

#include "sim/topology/gpu_spec.h"
#include "sim/topology/topology_parser.h"

namespace moesim::sim::testing {

TopologySpec h800_like_spec(int32_t num_nodes, int32_t gpus_per_node) {
  TopologySpec spec;
  spec.name = "test-" + std::to_string(num_nodes) + "x" + std::to_string(gpus_per_node);
  spec.gpu.name = "test-gpu";
  spec.gpu.bf16_flops_per_s = 989e12;
  spec.gpu.fp8_flops_per_s = 1979e12;
  spec.gpu.hbm_bytes = 80'000'000'000;
  spec.gpu.hbm_bytes_per_s = 3.35e12;
  spec.gpus_per_node = gpus_per_node;
  spec.nvlink_bytes_per_s = 200e9;
  spec.nvlink_latency_ns = 500;
  spec.nvswitch_latency_ns = 300;
  spec.num_nodes = num_nodes;
  spec.nics_per_gpu = 1;
  spec.nic_bytes_per_s = num_nodes > 1 ? 50e9 : 0;
  spec.nic_latency_ns = 2000;
  spec.rail_optimized = true;
  spec.leaf_gpus = num_nodes;
  spec.num_spines = 2;
  spec.leaf_spine_latency_ns = 200;
  spec.switch_latency_ns = 500;
  return spec;
}

Topology h800_like(int32_t num_nodes, int32_t gpus_per_node) {
  return build_topology(h800_like_spec(num_nodes, gpus_per_node));
}

TopologySpec h800_sxm_cluster_spec(int32_t num_nodes, int32_t leaf_gpus, int32_t num_spines,
                                   bool rail_optimized) {
  TopologySpec spec;
  spec.name = "test";
  spec.gpu = find_gpu_spec("h800-sxm").value();
  spec.gpus_per_node = 8;
  spec.nvlink_bytes_per_s = 160e9;
  spec.nvlink_latency_ns = 300;
  spec.nvswitch_latency_ns = 200;
  spec.num_nodes = num_nodes;
  spec.nic_bytes_per_s = 50e9;
  spec.nic_latency_ns = 1000;
  spec.rail_optimized = rail_optimized;
  spec.leaf_gpus = leaf_gpus;
  spec.num_spines = num_spines;
  spec.leaf_spine_latency_ns = 50;
  spec.switch_latency_ns = 250;
  return spec;
}

TopologySpec nvlink_node_spec(const std::string& gpu_name, int32_t num_gpus,
                              double nvlink_bytes_per_s) {
  TopologySpec spec;
  spec.name = "test-" + gpu_name + "-" + std::to_string(num_gpus);
  spec.gpu = find_gpu_spec(gpu_name).value();
  spec.gpus_per_node = num_gpus;
  spec.nvlink_bytes_per_s = nvlink_bytes_per_s;
  spec.nvlink_latency_ns = 300;
  spec.nvswitch_latency_ns = 200;
  return spec;
}

Topology shipped_topology(const std::string& stem) {
  return load_topology(std::string(MOESIM_SOURCE_DIR) + "/topologies/" + stem + ".toml");
}

}  // namespace moesim::sim::testing
