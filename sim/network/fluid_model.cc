#include "sim/network/fluid_model.h"

#include <algorithm>

namespace moesim::sim {

FluidModel::FluidModel(const Topology& topology) : topology_(topology) {
  for (const Link& link : topology.links())
    capacity_bytes_per_s_.push_back(link.capacity_bytes_per_s);
}

void FluidModel::run(const TrafficMatrix& traffic, CollectiveResult& result) {
  const int32_t p = traffic.size();
  solver_.reset(capacity_bytes_per_s_);
  flow_pairs_.clear();
  link_bytes_.assign(capacity_bytes_per_s_.size(), 0.0);
  for (int32_t s = 0; s < p; ++s) {
    const std::span<const double> row = traffic.row(s);
    for (int32_t d = 0; d < p; ++d) {
      if (row[d] <= 0 || d == s) continue;
      const GpuId src = traffic.gpu(s);
      const GpuId dst = traffic.gpu(d);
      const Route route = topology_.route(src, dst);
      for (int32_t l : route) link_bytes_[l] += row[d];
      solver_.add_flow(route, row[d], to_seconds(topology_.route_latency_ns(src, dst)));
      flow_pairs_.emplace_back(s, d);
    }
  }
  solver_.run_to_completion();
  result.num_flows = static_cast<int32_t>(flow_pairs_.size());
  result.send_done_ns.assign(p, 0);
  result.recv_done_ns.assign(p, 0);
  result.duration_ns = 0;
  for (size_t f = 0; f < flow_pairs_.size(); ++f) {
    const SimTime finish_ns = collective_duration_ns(solver_.finish_time_s(static_cast<int32_t>(f)),
                                                     topology_, link_bytes_);
    const auto [s, d] = flow_pairs_[f];
    result.send_done_ns[s] = std::max(result.send_done_ns[s], finish_ns);
    result.recv_done_ns[d] = std::max(result.recv_done_ns[d], finish_ns);
    result.duration_ns = std::max(result.duration_ns, finish_ns);
  }
  set_barrier_waits(result);
  set_bottleneck(topology_, link_bytes_, result);
}

}  // namespace moesim::sim
