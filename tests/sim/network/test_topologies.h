// Small topologies for the network tests: H800-like figures (NVLink 200 GB/s per direction per
// GPU, one 400 Gb/s NIC per GPU, rail-optimised leaf/spine), built from a TopologySpec.
#pragma once

#include <cstdint>
#include <string>

#include "sim/topology/topology.h"

namespace moesim::sim::testing {

inline TopologySpec h800_like_spec(int32_t num_nodes, int32_t gpus_per_node) {
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

inline Topology h800_like(int32_t num_nodes, int32_t gpus_per_node) {
  return build_topology(h800_like_spec(num_nodes, gpus_per_node));
}

}  // namespace moesim::sim::testing
