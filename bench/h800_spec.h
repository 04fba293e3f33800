// The H800-like fat tree the benchmarks build in code: num_nodes x 8 catalogue-like h800-sxm
// GPUs (latencies as in topologies/h800-8x8.toml), NVLink 160 GB/s, one 50 GB/s NIC per GPU,
// rail leaves of 32 nodes, `num_spines` spines.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "sim/topology/topology.h"

namespace moesim::sim::bench {

inline TopologySpec h800_spec(int32_t num_nodes, int32_t num_spines, std::string name) {
  TopologySpec spec;
  spec.name = std::move(name);
  spec.gpu.name = "h800-sxm";
  spec.gpu.bf16_flops_per_s = 989.4e12;
  spec.gpu.fp8_flops_per_s = 1978.9e12;
  spec.gpu.hbm_bytes = 80'000'000'000;
  spec.gpu.hbm_bytes_per_s = 3.35e12;
  spec.gpus_per_node = 8;
  spec.nvlink_bytes_per_s = 160e9;
  spec.nvlink_latency_ns = 300;
  spec.nvswitch_latency_ns = 200;
  spec.num_nodes = num_nodes;
  spec.nic_bytes_per_s = 50e9;
  spec.nic_latency_ns = 1000;
  spec.leaf_gpus = 32;
  spec.num_spines = num_spines;
  spec.leaf_spine_latency_ns = 50;
  spec.switch_latency_ns = 250;
  return spec;
}

}  // namespace moesim::sim::bench
