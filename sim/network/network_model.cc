#include "sim/network/network_model.h"

#include <algorithm>
#include <cmath>

#include "sim/config/config_error.h"
#include "sim/network/bottleneck_model.h"
#include "sim/network/factored_bottleneck_model.h"
#include "sim/network/fluid_model.h"

namespace moesim::sim {

NetworkModelRegistry::NetworkModelRegistry() {
  add("bottleneck",
      [](const Topology& topology) { return std::make_unique<BottleneckModel>(topology); });
  add("bottleneck_factored",
      [](const Topology& topology) { return std::make_unique<FactoredBottleneckModel>(topology); });
  add("fluid", [](const Topology& topology) { return std::make_unique<FluidModel>(topology); });
}

void NetworkModelRegistry::add(std::string name, Factory factory) {
  auto it =
      std::lower_bound(factories_.begin(), factories_.end(), name,
                       [](const auto& entry, const std::string& n) { return entry.first < n; });
  if (it != factories_.end() && it->first == name) {
    it->second = std::move(factory);
  } else {
    factories_.emplace(it, std::move(name), std::move(factory));
  }
}

std::unique_ptr<NetworkModel> NetworkModelRegistry::make(std::string_view name,
                                                         const Topology& topology,
                                                         const std::string& key_path) const {
  for (const auto& [entry_name, factory] : factories_) {
    if (entry_name == name) return factory(topology);
  }
  std::string valid;
  for (const auto& entry : factories_) valid += (valid.empty() ? "" : ", ") + entry.first;
  throw ConfigError("", 0, 0, key_path,
                    "unknown network model '" + std::string(name) + "' (valid: " + valid + ")");
}

std::vector<std::string> NetworkModelRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& entry : factories_) out.push_back(entry.first);
  return out;
}

void set_bottleneck(const Topology& topology, std::span<const double> link_bytes,
                    CollectiveResult& result) {
  const auto& links = topology.links();
  int32_t best = -1;
  double best_time_s = 0;
  for (size_t l = 0; l < link_bytes.size(); ++l) {
    if (link_bytes[l] <= 0) continue;
    const double time_s = link_bytes[l] / links[l].capacity_bytes_per_s;
    if (time_s > best_time_s) {
      best_time_s = time_s;
      best = static_cast<int32_t>(l);
    }
  }
  result.bottleneck_link = best;
  if (best < 0) {
    result.bottleneck_class = LinkClass::kNvlink;
    result.bottleneck_bytes = 0;
    result.bottleneck_capacity_bytes_per_s = 0;
    return;
  }
  result.bottleneck_class = links[best].link_class;
  result.bottleneck_bytes = link_bytes[best];
  result.bottleneck_capacity_bytes_per_s = links[best].capacity_bytes_per_s;
}

void throw_collective_beyond_horizon(const Topology& topology, std::span<const double> link_bytes,
                                     double duration_s) {
  const auto& links = topology.links();
  int32_t worst = -1;
  double worst_s = -1;
  for (size_t l = 0; l < link_bytes.size() && l < links.size(); ++l) {
    if (!(link_bytes[l] > 0)) continue;
    const double time_s = link_bytes[l] / links[l].capacity_bytes_per_s;
    if (!(time_s <= worst_s)) {  // NaN or infinity wins
      worst_s = time_s;
      worst = static_cast<int32_t>(l);
    }
  }
  std::string detail;
  auto link_name = [&](int32_t l) {
    return std::string(link_class_name(links[l].link_class)) + " " +
           topology.vertex_name(links[l].from_vertex) + "->" +
           topology.vertex_name(links[l].to_vertex);
  };
  if (worst >= 0) {
    detail = "its bottleneck, link " + link_name(worst) + ", carries " +
             format_number(link_bytes[worst]) + " bytes at " +
             format_number(links[worst].capacity_bytes_per_s) + " bytes/s; ";
  } else {
    for (size_t l = 0; l < links.size(); ++l) {
      if (worst < 0 || links[l].capacity_bytes_per_s < links[worst].capacity_bytes_per_s) {
        worst = static_cast<int32_t>(l);
      }
    }
    if (worst >= 0) {
      detail = "the topology's slowest link, " + link_name(worst) + ", runs at " +
               format_number(links[worst].capacity_bytes_per_s) + " bytes/s; ";
    }
  }
  throw_bad_duration("network: an all-to-all", duration_s,
                     detail + "check the bandwidths and latencies of topology '" + topology.name() +
                         "' (and a calibration profile's network efficiencies)");
}

void set_barrier_waits(CollectiveResult& result) {
  const size_t p = result.recv_done_ns.size();
  result.barrier_wait_ns.resize(p);
  for (size_t i = 0; i < p; ++i)
    result.barrier_wait_ns[i] = result.duration_ns - result.recv_done_ns[i];
}

}  // namespace moesim::sim

namespace moesim::sim {

void KernelCost::apply(CollectiveResult& result) const {
  if (fixed_s == 0) return;
  const auto fixed_ns = static_cast<SimTime>(std::llround(1e9 * fixed_s));
  result.duration_ns += fixed_ns;
  for (SimTime& t : result.send_done_ns) t += fixed_ns;
  for (SimTime& t : result.recv_done_ns) t += fixed_ns;
}

}  // namespace moesim::sim
