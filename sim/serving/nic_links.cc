#include "sim/serving/nic_links.h"

#include "base/check.h"

namespace moesim::sim {

NicLinks::NicLinks(const Topology& topology, std::span<const GpuId> gpus) : topology_(topology) {
  in_link_.assign(gpus.size(), -1);
  out_link_.assign(gpus.size(), -1);
  std::vector<int32_t> idx(static_cast<size_t>(topology.num_gpus()), -1);
  for (size_t g = 0; g < gpus.size(); ++g) {
    idx[static_cast<size_t>(gpus[g].value)] = static_cast<int32_t>(g);
  }
  const std::vector<Link>& links = topology.links();
  for (size_t l = 0; l < links.size(); ++l) {
    if (links[l].link_class != LinkClass::kNic) continue;
    if (links[l].from_vertex < topology.num_gpus() && idx[links[l].from_vertex] >= 0) {
      out_link_[idx[links[l].from_vertex]] = static_cast<int32_t>(l);
    }
    if (links[l].to_vertex < topology.num_gpus() && idx[links[l].to_vertex] >= 0) {
      in_link_[idx[links[l].to_vertex]] = static_cast<int32_t>(l);
    }
  }
}

const std::vector<double>& NicLinks::link_slowdown(std::span<const double> in,
                                                   std::span<const double> out) {
  if (in.empty() && out.empty()) {
    link_slowdown_.clear();
    return link_slowdown_;
  }
  link_slowdown_.assign(topology_.links().size(), 1.0);
  for (size_t g = 0; g < in_link_.size(); ++g) {
    if (!in.empty() && in_link_[g] >= 0) link_slowdown_[in_link_[g]] = in[g];
    if (!out.empty() && out_link_[g] >= 0) link_slowdown_[out_link_[g]] = out[g];
  }
  return link_slowdown_;
}

void NicLinks::add_link_bytes(const NetworkModel& network, std::span<double> in,
                              std::span<double> out) const {
  const std::span<const double> bytes = network.link_bytes();
  MOESIM_CHECK(!bytes.empty(), "the network model does not report link bytes");
  for (size_t g = 0; g < in_link_.size(); ++g) {
    if (in_link_[g] >= 0) in[g] += bytes[in_link_[g]];
    if (out_link_[g] >= 0) out[g] += bytes[out_link_[g]];
  }
}

}  // namespace moesim::sim
