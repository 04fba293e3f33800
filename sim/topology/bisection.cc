#include "sim/topology/bisection.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <cmath>

#include "base/check.h"
#include "sim/config/config_error.h"

namespace moesim::sim {
namespace {

using FlowTraits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using FlowGraph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS, boost::no_property,
    boost::property<
        boost::edge_capacity_t, int64_t,
        boost::property<boost::edge_residual_capacity_t, int64_t,
                        boost::property<boost::edge_reverse_t, FlowTraits::edge_descriptor>>>>;

// First half of the GPUs: whole nodes when there are several, else half of the one node.
int32_t first_half_gpus(const Topology& topology) {
  if (topology.num_nodes() >= 2) return (topology.num_nodes() / 2) * topology.gpus_per_node();
  return topology.num_gpus() / 2;
}

}  // namespace

double bisection_bytes_per_s(const Topology& topology) {
  MOESIM_CHECK(topology.num_gpus() >= 2, "bisection needs at least two GPUs");
  const int32_t num_vertices = topology.num_vertices();
  const int32_t source = num_vertices;
  const int32_t sink = num_vertices + 1;
  FlowGraph g(num_vertices + 2);
  auto capacity = boost::get(boost::edge_capacity, g);
  auto reverse = boost::get(boost::edge_reverse, g);
  // Capacities are whole bytes/s, so the flow is exact.
  auto add_arc = [&](int32_t from, int32_t to, int64_t cap) {
    auto forward = boost::add_edge(from, to, g).first;
    auto backward = boost::add_edge(to, from, g).first;
    capacity[forward] = cap;
    capacity[backward] = 0;
    reverse[forward] = backward;
    reverse[backward] = forward;
  };
  // Whole bytes/s in int64: the sum of every capacity (the source and sink arcs' "infinite"
  // capacity) must fit, with room for the flow's own sums.
  double total_double = 1;
  for (const Link& link : topology.links()) total_double += link.capacity_bytes_per_s;
  if (!(total_double < 0x1p61)) {
    throw ConfigError(topology.name(), 0, 0, "network",
                      "the links' capacities sum to " + std::to_string(total_double) +
                          " bytes/s, beyond the bisection's int64 flow (2^61)");
  }
  int64_t total_capacity = 1;
  for (const Link& link : topology.links()) {
    int64_t cap = std::llround(link.capacity_bytes_per_s);
    total_capacity += cap;
    add_arc(link.from_vertex, link.to_vertex, cap);
  }
  const int32_t half = first_half_gpus(topology);
  for (int32_t gpu = 0; gpu < topology.num_gpus(); ++gpu) {
    if (gpu < half) {
      add_arc(source, gpu, total_capacity);
    } else {
      add_arc(gpu, sink, total_capacity);
    }
  }
  return static_cast<double>(boost::push_relabel_max_flow(g, source, sink));
}

}  // namespace moesim::sim
