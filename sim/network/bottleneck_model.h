// "bottleneck": the link-load bound, the network model of the simulator's hot path.
//
// For a collective with flows f (source, destination, bytes b_f, topology route R_f, route
// latency lat_f = Topology::route_latency_ns):
//   load_l   = sum of b_f over flows f with l in R_f          (every directed link counted)
//   t_l      = load_l / capacity_l
//   finish_f = lat_f + max over l in R_f of t_l
//   duration = max over f of finish_f = max over l of (t_l + max lat_f of the flows over l)
//   send_done(g) = max finish_f over flows from g; recv_done(g) = max over flows into g.
// It is a lower bound on any work-conserving schedule's transfer time plus the latency of the
// flow that determines it: each flow finishes when the busiest link on its route has drained.
// Counting every link in both directions matters: under skew the bottleneck is the receiving
// NIC (or NVLink port) of the popular GPU, not the senders'.
//
// Cost: two passes over the flows' routes, O(P^2 x hops); no allocation after the first call
// with the largest participant count. For speed the model keeps its own copy of every ordered
// pair's route, padded to the longest route with a dummy link (so the inner loops have a fixed
// trip count and no offset lookups), and every pair's latency in seconds: for G topology GPUs
// and routes of at most R links, G^2 x (4 R + 8) bytes (24 MB at 1,024 GPUs, R = 4).
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "sim/network/network_model.h"

namespace moesim::sim {

class BottleneckModel final : public NetworkModel {
 public:
  // `topology` must outlive the model.
  explicit BottleneckModel(const Topology& topology);

  std::string_view name() const override { return "bottleneck"; }
  void run(const TrafficMatrix& traffic, CollectiveResult& result) override;
  using NetworkModel::run;

  // Bytes routed over each link by the last run() (indexed by link id).
  std::span<const double> link_bytes() const { return {link_bytes_.data(), num_links_}; }

 private:
  const Topology& topology_;
  size_t num_links_ = 0;         // link id num_links_ is the dummy padding link
  int32_t max_route_links_ = 0;  // R
  // padded_routes_[(src * G + dst) * R + k]: k-th link of the route, or the dummy link.
  std::vector<int32_t> padded_routes_;
  std::vector<double> route_latency_s_;  // [src * G + dst]
  std::vector<double> inv_capacity_s_per_byte_;
  std::vector<double> link_bytes_;
  std::vector<double> link_time_s_;
  std::vector<double> send_done_s_;
  std::vector<double> recv_done_s_;
};

}  // namespace moesim::sim
