// The topology DeepEP's pure-RDMA low-latency kernels see: every GPU its own node, so every pair
// of GPUs talks over the network. Used by the collective study (sim/study/collective_study.h) and
// the network fit (sim/calibration/network_fit.h) for the rdma transport.
#pragma once

#include "sim/topology/topology.h"

namespace moesim::sim {

// `spec` with every GPU its own node and NVLink domain (gpus_per_node 1, no NVLink, not rail
// optimised, leaves of the same number of GPUs as a rail leaf of the original serves nodes,
// capped at the GPUs), NIC, leaf-spine figures and GpuIds unchanged: every pair of GPUs talks over
// the network, as DeepEP's pure-RDMA low-latency kernels do.
TopologySpec rdma_only_spec(TopologySpec spec);

}  // namespace moesim::sim
