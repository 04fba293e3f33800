// A printable summary of a Topology (what `moesim topo show` prints), as a struct, as text and as
// JSON (units in key names).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/topology/topology.h"

namespace moesim::sim {

struct LinkClassSummary {
  LinkClass link_class = LinkClass::kNvlink;
  int64_t num_links = 0;  // directed links (two per physical link)
  double min_capacity_bytes_per_s = 0;
  double max_capacity_bytes_per_s = 0;
  SimTime min_latency_ns = 0;
  SimTime max_latency_ns = 0;
};

struct TopologySummary {
  std::string name;
  std::string description;
  int32_t num_gpus = 0;
  int32_t num_nodes = 0;
  int32_t gpus_per_node = 0;
  int32_t nvlink_domain_gpus = 0;
  int32_t num_nvlink_domains = 0;
  int32_t num_nvswitches = 0;
  int32_t num_leaves = 0;
  int32_t num_spines = 0;
  bool rail_optimized = false;  // meaningful only with leaves
  GpuSpec gpu;
  // Classes present, in LinkClass order.
  std::vector<LinkClassSummary> link_classes;
  // What the links carry (line rate x efficiency) and the line rates.
  double nvlink_bytes_per_s_per_gpu = 0;
  double nic_bytes_per_s_per_gpu = 0;
  double nvlink_line_bytes_per_s_per_gpu = 0;
  double nic_line_bytes_per_s_per_gpu = 0;
  // One direction; 0 for a single GPU.
  double bisection_bytes_per_s = 0;
  // Route latencies over all ordered pairs of distinct GPUs (0 for a single GPU).
  SimTime min_route_latency_ns = 0;
  SimTime max_route_latency_ns = 0;
};

TopologySummary describe_topology(const Topology& topology);
// Human-readable, several lines, ending in a newline. Bandwidths in GB/s (1e9 bytes/s).
std::string summary_text(const TopologySummary& summary);
// One JSON object; keys carry units (e.g. "bf16_flops_per_s", "capacity_bytes_per_s").
nlohmann::json summary_json(const TopologySummary& summary);

}  // namespace moesim::sim
