#include "sim/network/bottleneck_model.h"

#include <algorithm>

namespace moesim::sim {

BottleneckModel::BottleneckModel(const Topology& topology) : topology_(topology) {
  const auto& links = topology.links();
  num_links_ = links.size();
  const int32_t g = topology.num_gpus();
  for (int32_t s = 0; s < g; ++s) {
    for (int32_t d = 0; d < g; ++d) {
      max_route_links_ = std::max(max_route_links_,
                                  static_cast<int32_t>(topology.route(GpuId(s), GpuId(d)).size()));
    }
  }
  const size_t num_pairs = static_cast<size_t>(g) * static_cast<size_t>(g);
  padded_routes_.assign(num_pairs * max_route_links_, static_cast<int32_t>(num_links_));
  route_latency_s_.resize(num_pairs);
  for (int32_t s = 0; s < g; ++s) {
    for (int32_t d = 0; d < g; ++d) {
      const size_t pair = static_cast<size_t>(s) * g + d;
      const std::span<const int32_t> route = topology.route(GpuId(s), GpuId(d));
      std::copy(route.begin(), route.end(), padded_routes_.begin() + pair * max_route_links_);
      route_latency_s_[pair] = to_seconds(topology.route_latency_ns(GpuId(s), GpuId(d)));
    }
  }
  inv_capacity_s_per_byte_.resize(num_links_ + 1);
  for (size_t l = 0; l < num_links_; ++l) {
    inv_capacity_s_per_byte_[l] = 1.0 / links[l].capacity_bytes_per_s;
  }
  inv_capacity_s_per_byte_[num_links_] = 0.0;  // the dummy link never delays a flow
  link_bytes_.assign(num_links_ + 1, 0.0);
  link_time_s_.assign(num_links_ + 1, 0.0);
}

void BottleneckModel::run(const TrafficMatrix& traffic, CollectiveResult& result) {
  const int32_t p = traffic.size();
  const size_t g = static_cast<size_t>(topology_.num_gpus());
  const size_t r = static_cast<size_t>(max_route_links_);
  std::fill(link_bytes_.begin(), link_bytes_.end(), 0.0);
  int32_t num_flows = 0;
  for (int32_t s = 0; s < p; ++s) {
    const size_t src_row = static_cast<size_t>(traffic.gpu(s).value) * g;
    const std::span<const double> row = traffic.row(s);
    // The first link (the source's egress) repeats across a row: summing it in a register avoids
    // a store-to-load dependency chain through link_bytes_.
    int32_t first_link = static_cast<int32_t>(num_links_);
    double first_link_bytes = 0;
    for (int32_t d = 0; d < p; ++d) {
      const double bytes = row[d];
      if (bytes <= 0 || d == s) continue;
      ++num_flows;
      const int32_t* route = &padded_routes_[(src_row + traffic.gpu(d).value) * r];
      if (route[0] != first_link) {
        link_bytes_[first_link] += first_link_bytes;
        first_link = route[0];
        first_link_bytes = 0;
      }
      first_link_bytes += bytes;
      for (size_t k = 1; k < r; ++k) link_bytes_[route[k]] += bytes;
    }
    link_bytes_[first_link] += first_link_bytes;
  }
  for (size_t l = 0; l <= num_links_; ++l) {
    link_time_s_[l] = link_bytes_[l] * inv_capacity_s_per_byte_[l];
  }
  send_done_s_.assign(p, 0.0);
  recv_done_s_.assign(p, 0.0);
  double duration_s = 0;
  for (int32_t s = 0; s < p; ++s) {
    const size_t src_row = static_cast<size_t>(traffic.gpu(s).value) * g;
    const std::span<const double> row = traffic.row(s);
    double send_s = 0;
    for (int32_t d = 0; d < p; ++d) {
      if (row[d] <= 0 || d == s) continue;
      const size_t pair = src_row + traffic.gpu(d).value;
      const int32_t* route = &padded_routes_[pair * r];
      double drain_s = 0;
      for (size_t k = 0; k < r; ++k) drain_s = std::max(drain_s, link_time_s_[route[k]]);
      const double finish_s = drain_s + route_latency_s_[pair];
      send_s = std::max(send_s, finish_s);
      recv_done_s_[d] = std::max(recv_done_s_[d], finish_s);
    }
    send_done_s_[s] = send_s;
    duration_s = std::max(duration_s, send_s);
  }
  result.num_flows = num_flows;
  result.duration_ns = from_seconds(duration_s);
  result.send_done_ns.resize(p);
  result.recv_done_ns.resize(p);
  for (int32_t i = 0; i < p; ++i) {
    result.send_done_ns[i] = from_seconds(send_done_s_[i]);
    result.recv_done_ns[i] = from_seconds(recv_done_s_[i]);
  }
  set_barrier_waits(result);
  set_bottleneck(topology_, link_bytes(), result);
}

}  // namespace moesim::sim
