#include "sim/network/network_model.h"

#include <algorithm>

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

void set_barrier_waits(CollectiveResult& result) {
  const size_t p = result.recv_done_ns.size();
  result.barrier_wait_ns.resize(p);
  for (size_t i = 0; i < p; ++i)
    result.barrier_wait_ns[i] = result.duration_ns - result.recv_done_ns[i];
}

}  // namespace moesim::sim
