// Small hand-built topologies for tests, built from a TopologySpec (no topology file):
// h800_like* (a synthetic H800-like GPU on a rail-optimised network, the network tests' default),
// h800_sxm_cluster_spec (the catalogue h800-sxm on a chosen leaf/spine network) and
// nvlink_node_spec (one NVSwitch node of a catalogue GPU, no network).
#pragma once

#include <cstdint>
#include <string>

#include "sim/topology/topology.h"

namespace moesim::sim::testing {

// `num_nodes` x `gpus_per_node` GPUs named "test-gpu" (989/1979 TFLOP/s BF16/FP8, 80 GB HBM at
// 3.35 TB/s); NVLink 200 GB/s, 500 ns, NVSwitch 300 ns; one 50 GB/s NIC per GPU (none on one
// node), 2000 ns; rail-optimised, one leaf per rail (leaf_gpus = num_nodes), 2 spines, 200 ns
// leaf-spine and 500 ns switch latency. Named "test-<num_nodes>x<gpus_per_node>".
TopologySpec h800_like_spec(int32_t num_nodes, int32_t gpus_per_node);

// build_topology(h800_like_spec(num_nodes, gpus_per_node)).
Topology h800_like(int32_t num_nodes, int32_t gpus_per_node);

// `num_nodes` nodes of 8 catalogue h800-sxm GPUs (latencies as in topologies/h800-8x8.toml):
// NVLink 160 GB/s, 300 ns, NVSwitch 200 ns; one 50 GB/s NIC per GPU, 1000 ns; `leaf_gpus` GPUs
// per leaf (rail-optimised: one per node), `num_spines` spines, 50 ns leaf-spine and 250 ns
// switch latency. Named "test".
TopologySpec h800_sxm_cluster_spec(int32_t num_nodes, int32_t leaf_gpus, int32_t num_spines,
                                   bool rail_optimized);

// One node of `num_gpus` catalogue `gpu_name` GPUs (which must exist) on an NVSwitch:
// NVLink `nvlink_bytes_per_s` per direction per GPU, 300 ns, NVSwitch 200 ns; no network.
// Named "test-<gpu_name>-<num_gpus>".
TopologySpec nvlink_node_spec(const std::string& gpu_name, int32_t num_gpus,
                              double nvlink_bytes_per_s);

// topologies/<stem>.toml of the repository, loaded.
Topology shipped_topology(const std::string& stem);

}  // namespace moesim::sim::testing
