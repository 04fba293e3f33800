// Bisection bandwidth: the maximum flow, in bytes/s, from the first half of the GPUs to the second
// half (one direction), computed with Boost.Graph's push-relabel max-flow on the topology's links.
//
// Halves: with two or more nodes, the first floor(num_nodes / 2) nodes against the rest; with one
// node, the first floor(gpus_per_node / 2) GPUs against the rest. Flow may pass through any vertex
// (this is the capacity of the cut, not of the routes), and every link contributes its capacity
// in its own direction.
#pragma once

#include "sim/topology/topology.h"

namespace moesim::sim {

// Precondition: num_gpus() >= 2. Returns bytes/s, one direction.
double bisection_bytes_per_s(const Topology& topology);

}  // namespace moesim::sim
