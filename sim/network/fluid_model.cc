#include "sim/network/fluid_model.h"

#include <algorithm>

#include "base/check.h"

namespace moesim::sim {

FluidModel::FluidModel(const Topology& topology) : topology_(topology) {
  for (const Link& link : topology.links())
    capacity_bytes_per_s_.push_back(link.capacity_bytes_per_s);
  run_capacity_ = capacity_bytes_per_s_;
}

bool FluidModel::set_link_slowdown(std::span<const double> factor_per_link) {
  MOESIM_CHECK(factor_per_link.empty() || factor_per_link.size() == capacity_bytes_per_s_.size(),
               "a link slowdown per link");
  run_capacity_ = capacity_bytes_per_s_;
  for (size_t l = 0; l < factor_per_link.size(); ++l) run_capacity_[l] /= factor_per_link[l];
  return true;
}

void FluidModel::run(const TrafficMatrix& traffic, CollectiveResult& result) {
  const int32_t p = traffic.size();
  solver_.reset(run_capacity_);
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
  if (run_capacity_ == capacity_bytes_per_s_) return;
  // Slowed links (set_link_slowdown): the bottleneck by bytes over the capacity in force.
  int32_t best = -1;
  double best_s = 0;
  for (size_t l = 0; l < link_bytes_.size(); ++l) {
    const double t = link_bytes_[l] / run_capacity_[l];
    if (link_bytes_[l] > 0 && t > best_s) {
      best_s = t;
      best = static_cast<int32_t>(l);
    }
  }
  if (best < 0) return;
  result.bottleneck_link = best;
  result.bottleneck_class = topology_.links()[static_cast<size_t>(best)].link_class;
  result.bottleneck_bytes = link_bytes_[static_cast<size_t>(best)];
  result.bottleneck_capacity_bytes_per_s = run_capacity_[static_cast<size_t>(best)];
}

}  // namespace moesim::sim
